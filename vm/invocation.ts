/**
 * One invocation's budgets: what a call from the user (`invoke`, `get`,
 * `invoke_closure`, …) may spend, with every VM function it calls, until it
 * returns. Each top-level call gets its own `Invocation`, so calls parked on
 * a Promise never count against other calls (issue 9, finding 4), and a
 * frame knows its invocation wherever it resumes.
 *
 * | limit                   | counted                                            | stops with            |
 * | ----------------------- | -------------------------------------------------- | --------------------- |
 * | `maxCallDepth` (1000)   | nested VM function calls                           | "Call stack overflow" |
 * | `maxStackSlots` (2^24)  | register slots of the frames on the stack          | "Stack overflow"      |
 * | `fuel` (none)           | instructions, charged on backward jumps and calls  | "Out of fuel"         |
 * | `timeoutMs` (none)      | wall-clock time since the call started             | "Timed out"           |
 * | `signal` (none)         | an `AbortSignal`                                   | "Aborted"             |
 *
 * Fuel, time and the signal are checked where a program can run on without
 * end: on backward jumps and on VM function calls (Lua's count hook, the fuel
 * of wasm engines). A backward jump charges the instructions of the loop it
 * repeats (its distance plus one), a call charges 1. The hot path is one
 * subtraction and compare on `budget`, a slice of the fuel; when the slice is
 * spent, `refill` does the real checks. With a deadline or a signal the slice
 * adapts so that the clock is read about once a millisecond of running.
 * While a call waits on a Promise, a timer and the signal's `abort` event
 * wake it (`race`), so a Promise that never settles cannot hold a call, or
 * its frames' memory, forever.
 *
 * Yielding (issue 27, finding 8). The loops are synchronous, so while one
 * runs no timer, I/O or `abort` event of the process can run: a signal
 * aborted by a timer would never land, and every other tenant would starve.
 * So `refill` also reads the clock for a call with no deadline or signal
 * (after its first slice of fuel: calls that spend less read no clock), and
 * once `yieldIntervalMs` of running have passed since the call started or
 * last yielded it takes its slice and throws `YIELD`. The loop that charged
 * (a backward jump) parks its frame at the jump's target, the call entry
 * that charged (past twice the interval: `refill`'s `atCall`) returns a
 * Promise of the call, and both resume after a macrotask (`nextMacrotask`)
 * on the path a Promise from a packed function takes (vm/interpreter.ts).
 * Fuel is charged the same whether a call yields or not.
 *
 * What stops an invocation stays stopped: every later check throws again, so
 * a packed function that swallows the error cannot keep the program running.
 *
 * @module
 */

import type { Instr, LoadedFunction } from "./loaded_function.ts";

/** Per-call limits: `vm.with(limits)`, and the VM's defaults (`VirtualMachineOptions`). */
export interface CallLimits {
  /**
   * Instructions the call may run, counted on backward jumps (the loop's
   * length) and VM function calls (1 each), and `vm.op.*` kernels' work
   * (1 per 64 multiply-adds, from 2^16; builtins/operators/kernel_cost.ts).
   * Default: no limit.
   */
  fuel?: number;
  /** Milliseconds the call may take, waiting on Promises included. Default: no limit. */
  timeoutMs?: number;
  /** Stops the call when aborted; the `VMError`'s `cause` is the signal's `reason`. */
  signal?: AbortSignal;
}

/** The limits of an invocation, checked and complete. */
export interface ResolvedLimits {
  readonly fuel: number;
  readonly timeoutMs: number;
  readonly signal: AbortSignal | null;
  readonly maxCallDepth: number;
  readonly maxStackSlots: number;
  /** Milliseconds a call runs before it yields to the event loop; Infinity: never. */
  readonly yieldIntervalMs: number;
}

/** Deepest nesting of VM function calls in one invocation, by default. */
export const DEFAULT_MAX_CALL_DEPTH = 1000;
/** Register slots of the frames of one invocation, by default (2^24 slots, 128 MiB of pointers). */
export const DEFAULT_MAX_STACK_SLOTS = 2 ** 24;
/** Milliseconds of running between a call's yields to the event loop, by default. */
export const DEFAULT_YIELD_INTERVAL_MS = 20;

/**
 * `yieldIntervalMs` checked: a positive number of milliseconds, or 0 or
 * Infinity for never (returned as Infinity).
 */
export function checkYieldInterval(value: number): number {
  if (!(typeof value === "number" && value >= 0)) {
    throw new RangeError(
      `yieldIntervalMs must be a non-negative number of milliseconds (0 or Infinity: never), got ${
        String(value)
      }`,
    );
  }
  return value === 0 ? Infinity : value;
}

/** Throws unless `limits` are well-formed; returns them completed over `defaults`. */
export function resolveLimits(
  limits: CallLimits,
  defaults: ResolvedLimits,
): ResolvedLimits {
  if (typeof limits !== "object" || limits === null) {
    throw new TypeError("Call limits must be an object: { fuel?, timeoutMs?, signal? }");
  }
  const { fuel, timeoutMs, signal } = limits;
  if (fuel !== undefined && !(typeof fuel === "number" && fuel >= 0)) {
    throw new RangeError(`fuel must be a non-negative number (or Infinity), got ${String(fuel)}`);
  }
  if (timeoutMs !== undefined && !(typeof timeoutMs === "number" && timeoutMs >= 0)) {
    throw new RangeError(
      `timeoutMs must be a non-negative number (or Infinity), got ${String(timeoutMs)}`,
    );
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new TypeError("signal must be an AbortSignal");
  }
  let combined = defaults.signal;
  if (signal !== undefined) {
    combined = combined === null || combined === signal
      ? signal
      : AbortSignal.any([combined, signal]);
  }
  return {
    fuel: fuel ?? defaults.fuel,
    timeoutMs: timeoutMs ?? defaults.timeoutMs,
    signal: combined,
    maxCallDepth: defaults.maxCallDepth,
    maxStackSlots: defaults.maxStackSlots,
    yieldIntervalMs: defaults.yieldIntervalMs,
  };
}

/** Throws unless `value` (option `name`) is an integer of at least 1. */
export function checkCount(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
}

/**
 * Why an invocation stopped: thrown at the instruction where a budget ran
 * out (or the frame that was waiting) and wrapped by the interpreter in a
 * `VMError` naming it, with this as `cause`.
 */
export class LimitExceeded extends Error {
  /** Which limit: `"fuel"`, `"timeout"` or `"abort"`. */
  readonly limit: "fuel" | "timeout" | "abort";

  constructor(limit: "fuel" | "timeout" | "abort", message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "LimitExceeded";
    this.limit = limit;
  }
}

/** What `race` resolves to when the invocation stopped while waiting. */
export const STOPPED: unique symbol = Symbol("stopped");

/**
 * Thrown by `refill` when the call must yield to the event loop; caught by
 * the loop or the call entry that charged (vm/interpreter.ts,
 * vm/compiled_mode.ts), never seen outside them. The fuel is already charged.
 */
export const YIELD: unique symbol = Symbol("yield");

/** What the Promise a yielded frame waits on resolves to (`nextMacrotask`). */
export const RESUMED: unique symbol = Symbol("resumed");

/**
 * The turn of the event loop a yielding call waits for: a Promise that
 * resolves to `RESUMED` in a macrotask, after timers and I/O had their turn.
 *
 * Deno, Node and Bun: `setTimeout(0)`, the only one of their macrotasks that
 * runs both timers and I/O (on Deno 2.9 `setImmediate` runs timers but no
 * I/O, and a `MessageChannel` neither: a server in the process answered no
 * request while a loop yielded on either); it waits for the timers'
 * granularity (docs/security.md says how long). Browsers: a
 * `MessageChannel` message, which runs after timers and input without
 * `setTimeout`'s clamp on nested timers.
 */
export const nextMacrotask: () => Promise<typeof RESUMED> = pickMacrotask();

function pickMacrotask(): () => Promise<typeof RESUMED> {
  const g = globalThis as { navigator?: { userAgent?: unknown } };
  const agent = String(g.navigator?.userAgent ?? "");
  if (typeof MessageChannel !== "function" || /^(Deno|Node\.js|Bun)\//.test(agent)) {
    return () => new Promise((resolve) => setTimeout(() => resolve(RESUMED), 0));
  }
  const channel = new MessageChannel();
  const waiting: ((v: typeof RESUMED) => void)[] = [];
  channel.port1.onmessage = () => waiting.shift()?.(RESUMED);
  return () =>
    new Promise((resolve) => {
      waiting.push(resolve);
      channel.port2.postMessage(null);
    });
}

/** Slices of fuel between checks: without a clock or signal to watch, as large as this. */
const UNWATCHED_SLICE = 2 ** 30;
/**
 * Without a clock or signal, but yielding: the first slice, before the clock
 * is first read (a call that spends less never reads it); the later ones
 * adapt as with a clock.
 */
const FIRST_YIELD_SLICE = 1024;
/** With one, between these, adapted to about one check per millisecond. */
const MIN_SLICE = 16, MAX_SLICE = 2 ** 20;
/** The longest delay a timer takes (2^31 - 1 ms); longer ones are re-armed. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Observes every `Call` of one invocation, nested VM calls included
 * (`vm.profile`, vm/profiler.ts). An invocation with a probe runs on the
 * generic loop, which reports each call; the VM's other invocations, and
 * its own instrument, are not affected.
 */
export interface CallProbe {
  /** Call `ins` of `fn` is about to run (after the user's instrument let it); returns a token. */
  before(fn: LoadedFunction, ins: Instr): unknown;
  /** That call returned (for a Promise: once it settled), or threw (`failed`). */
  after(token: unknown, failed: boolean): void;
}

/** The budgets of one invocation. */
export class Invocation {
  /** What observes this invocation's calls (`vm.profile`), or null. */
  probe: CallProbe | null = null;
  /** VM function calls now on the stack. */
  depth = 0;
  /** Register slots of those calls' frames. */
  slots = 0;
  /**
   * The slice of fuel left before the next `refill`: charge with
   * `if ((inv.budget -= n) < 0) inv.refill()`.
   */
  budget = 0;
  readonly limits: ResolvedLimits;
  /** Fuel not yet sliced into `budget`. */
  #reserve: number;
  /** When the call must end (`performance.now()` time), or Infinity. */
  readonly #deadline: number;
  /** Whether there is a clock or a signal to check (else only fuel). */
  readonly #watched: boolean;
  /** `limits.yieldIntervalMs`: Infinity when the call never yields. */
  readonly #yieldMs: number;
  /** Whether `refill` reads the clock: watched, or yielding. */
  readonly #clocked: boolean;
  #slice = MIN_SLICE;
  /** Without a clock or signal: the fuel of the first slice. */
  #firstSlice = 0;
  /** When `refill` last read the clock; 0 before it first did (unwatched and yielding). */
  #lastCheck = 0;
  /** When the call started or last resumed from a yield (or 0, as `#lastCheck`). */
  #lastYield = 0;
  #stop: LimitExceeded | null = null;
  /** Callers of `race` waiting now, woken when the invocation stops (made on the first wait). */
  #waiting: Set<() => void> | null = null;
  #timer: ReturnType<typeof setTimeout> | undefined = undefined;
  #onAbort: (() => void) | null = null;
  /** Aborts when the invocation stops or finishes (`callSignal`); made on first request. */
  #controller: AbortController | null = null;

  /**
   * Budgets for one call under `limits`. Made for every call from the user,
   * so it does little: without a deadline or a signal it reads no clock and
   * its first slice of fuel is ready; with one, `budget` starts at 0, so the
   * first charge checks them.
   */
  constructor(limits: ResolvedLimits) {
    this.limits = limits;
    const watched = limits.signal !== null || limits.timeoutMs !== Infinity;
    this.#watched = watched;
    this.#yieldMs = limits.yieldIntervalMs;
    this.#clocked = watched || this.#yieldMs !== Infinity;
    if (watched) {
      const now = performance.now();
      this.#lastCheck = now;
      this.#lastYield = now;
      this.#deadline = now + limits.timeoutMs;
      this.#reserve = limits.fuel;
      if (limits.signal?.aborted) this.#stop = this.#aborted();
    } else {
      this.#deadline = Infinity;
      const first = this.#clocked ? FIRST_YIELD_SLICE : UNWATCHED_SLICE;
      this.#slice = first;
      this.#firstSlice = Math.min(limits.fuel, first);
      this.budget = this.#firstSlice;
      this.#reserve = limits.fuel - this.#firstSlice;
    }
  }

  /**
   * Whether a finished invocation can serve the next call under the same
   * limits (`restart`): one without a clock or signal, with no frame left.
   * Saves an allocation per call, a good part of a small call's cost.
   */
  get reusable(): boolean {
    // A frame still waiting (a packed function dropped the Promise of a VM call it made)
    // keeps its invocation: its depth is not back to 0.
    return !this.#watched && this.depth === 0 && this.probe === null;
  }

  /** Makes a finished, reusable invocation new again. */
  restart(): void {
    this.budget = this.#firstSlice;
    this.#reserve = this.limits.fuel - this.#firstSlice;
    if (this.#stop !== null) this.#stop = null;
    this.slots = 0;
    if (this.#lastCheck !== 0) {
      this.#lastCheck = this.#lastYield = 0;
      this.#slice = FIRST_YIELD_SLICE;
    }
  }

  /**
   * Called when `budget` went below 0: throws `LimitExceeded` when the fuel
   * is spent, the deadline passed or the signal aborted; else takes the next
   * slice of fuel, and throws `YIELD` when the call has run
   * `yieldIntervalMs` since it last yielded.
   *
   * `atCall`: the charge of a VM function call, which yields only past twice
   * the interval. A call that yields makes its caller park like one waiting
   * on a Promise, and in compiled mode a caller that parked at a call runs
   * the rest of its call on the slower specialized loop, while one that
   * yields at a backward jump resumes compiled: so a loop that calls yields
   * at its jump, and only recursion with no loop yields at calls.
   */
  refill(atCall = false, mayYield = true): void {
    if (this.#stop !== null) {
      this.budget = -Infinity; // stays stopped: every later charge comes back here
      this.#controller?.abort(this.#stop);
      throw this.#stop;
    }
    const remaining = this.#reserve + this.budget;
    if (remaining < 0) {
      this.#stop = new LimitExceeded(
        "fuel",
        `Out of fuel: the call ran more than its ${this.limits.fuel} instructions (fuel)`,
      );
      return this.refill(atCall);
    }
    let slice = UNWATCHED_SLICE;
    let yieldNow = false;
    if (this.#clocked) {
      const now = performance.now();
      if (this.#watched) {
        if (this.limits.signal?.aborted) this.#stop = this.#aborted();
        if (now >= this.#deadline) this.#stop ??= this.#timedOut();
        if (this.#stop !== null) return this.refill(atCall);
      } else if (this.#lastCheck === 0) {
        this.#lastCheck = this.#lastYield = now; // the first check of a yielding call
      }
      // About one check per millisecond: grow the slice while checks come faster.
      const elapsed = now - this.#lastCheck;
      this.#lastCheck = now;
      if (elapsed < 0.5) this.#slice = Math.min(MAX_SLICE, this.#slice * 2);
      else if (elapsed > 2) this.#slice = Math.max(MIN_SLICE, this.#slice >> 1);
      slice = this.#slice;
      yieldNow = now - this.#lastYield >= (atCall ? 2 * this.#yieldMs : this.#yieldMs);
    }
    const take = Math.min(remaining, slice);
    this.#reserve = remaining - take;
    this.budget = take;
    if (yieldNow && mayYield) throw YIELD;
  }

  /**
   * The call resumes after a yield (`nextMacrotask`): the interval starts
   * again, and what stopped it meanwhile (a timer's abort, the deadline)
   * throws `LimitExceeded` here.
   */
  resumed(): void {
    const now = performance.now();
    this.#lastYield = this.#lastCheck = now;
    this.checkNow();
  }

  /**
   * `pending`, or, when the invocation has a deadline or a signal, a Promise
   * that settles like `pending` or resolves to `STOPPED` when the invocation
   * stops first (then `stopReason()` says why).
   */
  race<T>(pending: Promise<T>): Promise<T | typeof STOPPED> {
    if (!this.#watched) return pending;
    // The signal may have fired while the call ran (its abort event is gone by the time a
    // listener is added), and the deadline may have passed: check both before waiting.
    if (this.#stop === null && this.limits.signal?.aborted) this.#stop = this.#aborted();
    if (this.#stop === null && performance.now() >= this.#deadline) this.#stop = this.#timedOut();
    if (this.#stop !== null) return Promise.resolve(STOPPED);
    this.#watch();
    const waiting = this.#waiting ??= new Set();
    return new Promise((resolve, reject) => {
      const wake = () => resolve(STOPPED);
      waiting.add(wake);
      pending.then(
        (v) => {
          waiting.delete(wake);
          resolve(v);
        },
        (e) => {
          waiting.delete(wake);
          reject(e);
        },
      );
    });
  }

  /**
   * Checks the clock and the signal now, between the instructions' own
   * checks (before a large allocation: `MemoryLimit.onLargeBlock`), and
   * throws `LimitExceeded` if the invocation must stop. Nothing to do for an
   * invocation without a clock or signal.
   */
  checkNow(): void {
    if (!this.#watched) return;
    if (this.#stop === null && this.limits.signal?.aborted) this.#stop = this.#aborted();
    if (this.#stop === null && performance.now() >= this.#deadline) this.#stop = this.#timedOut();
    if (this.#stop !== null) {
      this.budget = -Infinity;
      this.#controller?.abort(this.#stop);
      throw this.#stop;
    }
  }

  /**
   * A signal that aborts when this invocation stops (its timeout, its
   * signal) or finishes, for work a builtin starts on its behalf (a
   * download) that must not outlive it; undefined for an invocation with no
   * clock or signal to watch, which stops only by fuel, between
   * instructions.
   */
  callSignal(): AbortSignal | undefined {
    if (!this.#watched) return undefined;
    const controller = this.#controller ??= new AbortController();
    if (this.#stop === null && this.limits.signal?.aborted) this.#stop = this.#aborted();
    if (this.#stop === null && performance.now() >= this.#deadline) this.#stop = this.#timedOut();
    if (this.#stop !== null) controller.abort(this.#stop);
    return controller.signal;
  }

  /** Whether the invocation has a deadline or a signal to watch (`WorkBudget.watched`). */
  get watched(): boolean {
    return this.#watched;
  }

  /**
   * Spends `fuel` at once, for a kernel's estimated work (builtins/operators/kernel_cost.ts):
   * the charge of a backward jump, so it throws like one when the fuel runs out. It never
   * yields: it runs inside a packed function, whose frame has no place to park at (a compiled
   * function without jumps would start again from its entry with its registers gone); the
   * next backward jump or call yields instead.
   */
  chargeFuel(fuel: number): void {
    if ((this.budget -= fuel) < 0) this.refill(false, false);
  }

  /** Milliseconds left before the deadline; Infinity without one. */
  remainingMs(): number {
    return this.#deadline === Infinity ? Infinity : this.#deadline - performance.now();
  }

  /**
   * Stops the invocation as timed out before work that cannot finish in the
   * time left starts (a WebGPU kernel, which cannot be interrupted once
   * dispatched); `why` says which.
   */
  refuse(why: string): never {
    this.#stop ??= new LimitExceeded(
      "timeout",
      `Timed out: ${why}, more than the ${
        Math.max(0, Math.round(this.remainingMs()))
      } ms left of its ${this.limits.timeoutMs} ms (timeoutMs)`,
    );
    this.budget = -Infinity;
    this.#controller?.abort(this.#stop);
    throw this.#stop;
  }

  /** Why the invocation stopped (after `race` gave `STOPPED`). */
  stopReason(): LimitExceeded {
    return this.#stop!;
  }

  /** The call is over: drops the timer and the signal listener. */
  finish(): void {
    if (!this.#watched) return; // no timer, listener, waiters or call signal
    this.#controller?.abort(new LimitExceeded("abort", "The call has ended"));
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#onAbort !== null) this.limits.signal!.removeEventListener("abort", this.#onAbort);
    this.#onAbort = null;
    this.#waiting?.clear();
  }

  /** Starts the timer and the abort listener, once, on the first wait. */
  #watch(): void {
    if (this.#deadline !== Infinity && this.#timer === undefined) this.#arm();
    const signal = this.limits.signal;
    if (signal !== null && this.#onAbort === null) {
      this.#onAbort = () => this.#halt(this.#aborted());
      signal.addEventListener("abort", this.#onAbort, { once: true });
    }
  }

  #arm(): void {
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, this.#deadline - performance.now()));
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (performance.now() < this.#deadline) this.#arm();
      else this.#halt(this.#timedOut());
    }, delay);
  }

  #halt(reason: LimitExceeded): void {
    this.#stop ??= reason;
    this.budget = -Infinity;
    this.#controller?.abort(this.#stop);
    const waiting = [...this.#waiting ?? []];
    this.#waiting?.clear();
    for (const wake of waiting) wake();
  }

  #timedOut(): LimitExceeded {
    return new LimitExceeded("timeout", `Timed out after ${this.limits.timeoutMs} ms (timeoutMs)`);
  }

  #aborted(): LimitExceeded {
    const reason = this.limits.signal?.reason;
    return new LimitExceeded("abort", "Aborted by the call's AbortSignal", { cause: reason });
  }
}

/** The limits of a VM that was given none. */
export const NO_LIMITS: ResolvedLimits = Object.freeze({
  fuel: Infinity,
  timeoutMs: Infinity,
  signal: null,
  maxCallDepth: DEFAULT_MAX_CALL_DEPTH,
  maxStackSlots: DEFAULT_MAX_STACK_SLOTS,
  yieldIntervalMs: DEFAULT_YIELD_INTERVAL_MS,
});
