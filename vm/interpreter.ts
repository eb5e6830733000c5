/**
 * The dispatch loop. A frame is a register array (registers, then the
 * operand slots of vm/loaded_function.ts) and a pc. The loop is a
 * `switch` over the four opcodes; `Call` reads its arguments from slots
 * and stores the result with the object protocol (vm/registers.ts).
 *
 * Liveness. Releases after an instruction run right after it; releases on
 * entry to a block run at its first instruction, however control arrives
 * (falling through, jumping, resuming). A register a `Call` writes but does
 * not read is empty when liveness is on (program/liveness.ts), so the store
 * skips the old value (`fresh`).
 *
 * Three forms run the same frames: this generic loop, the specialized loop
 * of each function (vm/specialized_dispatch.ts), used unless an instrument is
 * set, and in compiled mode the compiled function (vm/compiled_mode.ts),
 * which starts each call and hands its registers to a frame here when a call
 * inside it returns a Promise.
 *
 * Promises. A packed function (or a VM function that awaited inside) may
 * return a Promise. The loop is synchronous and never awaits per
 * instruction (an `await` per instruction costs about 5× here): when a call
 * returns a Promise, the loop parks the frame and returns `SUSPENDED`;
 * `resume` awaits that one promise, stores the value and re-enters the loop.
 * So a VM function returns either its value or, if anything inside it
 * suspended, a Promise of it, and callers treat both alike.
 *
 * Promises are recognized as the language does: any object with a callable
 * `then` (a thenable) is awaited like one (`asPromise`).
 *
 * Errors. The frame's pc is current before anything can throw, so a failure
 * becomes a `VMError` naming the function, pc, instruction text and callee,
 * with the original as `cause`. Frames release their registers in every
 * case, so a failed call leaves nothing behind and the VM stays usable.
 * Whatever a packed function throws is described without running its code
 * unguarded (`reasonOf`): a getter that throws or a revoked Proxy still gives
 * a `VMError`.
 *
 * Budgets (vm/invocation.ts). Each call from the user is an `Invocation`
 * with its own depth, register slots, fuel, deadline and signal; a frame
 * keeps its invocation, and `#current` is the invocation running right now
 * (the loop is synchronous, so it is set while a frame runs and restored
 * after). Every VM function call checks depth and slots and charges one unit
 * of fuel; every backward jump charges the instructions it repeats, in all
 * three forms. A frame waiting on a Promise races it against the
 * invocation's timer and signal.
 *
 * Yields (issue 27, finding 8). When a charge finds that the call has run
 * its `yieldIntervalMs`, `refill` throws `YIELD`. At a backward jump the
 * loop's frame parks at the jump's target (`#parkYield`: the jump's
 * releases and fuel are done, only `pc` moves) on `nextMacrotask()`; at a
 * call entry the call itself becomes a Promise that starts the callee after
 * it (`#enterLater`), and the caller parks on that as on any VM call that
 * parked. Either way the rest runs on `#resume`, the path of a Promise from
 * a packed function, so the three forms agree call for call.
 *
 * @module
 */

import { activateAllocators, type AllocatorSet } from "../devices/allocation_context.ts";
import { VMError } from "../ground/errors.ts";
import { releaseIfUnowned, VMObject } from "../ground/object.ts";
import type { ProgramData } from "../program/program_data.ts";
import {
  builtInstrText,
  DecodedOp,
  type Instr,
  instrText,
  type LoadedFunction,
} from "./loaded_function.ts";
import { releaseAllRegisters, releaseRegisters, storeFresh, storeResult } from "./registers.ts";
import { compile, type CompiledRun } from "./compiled_mode.ts";
import { specialize } from "./specialized_dispatch.ts";
import {
  asPromise,
  checkArgumentsLive,
  isTruthy,
  isVMError,
  limitOf,
  reasonOf,
} from "./call_boundary.ts";
import { Frame, NO_TOKEN, SKIPPED, SUSPENDED } from "./frame.ts";
import { compiledHelpers, dispatchHelpers } from "./generated_forms.ts";
import {
  type CallProbe,
  Invocation,
  nextMacrotask,
  NO_LIMITS,
  type ResolvedLimits,
  RESUMED,
  STOPPED,
  YIELD,
} from "./invocation.ts";

export { asPromise, checkArgumentsLive, reasonOf } from "./call_boundary.ts";

/** `fn(func, name, before, ret, args)`; returning `"skip"` before a call skips it. */
export type Instrument = (
  func: unknown,
  name: string,
  before: boolean,
  ret: unknown,
  args: unknown[],
) => unknown;

/** What a call through a closure adds to the call depth besides its own call (`callClosure`). */
const CLOSURE_EXTRA_DEPTH = 1;

/** Runs the compiled functions of one executable. */
export class Interpreter {
  readonly #ex: ProgramData;
  readonly #allocators: AllocatorSet;
  /** Compiled functions by function-table index (VM functions only). */
  readonly functions: (LoadedFunction | undefined)[] = [];
  instrument: Instrument | null = null;
  /** The limits of a call that gives none (the VM's options). */
  limits: ResolvedLimits = NO_LIMITS;
  /** The invocation running now, while a frame runs synchronously; null between runs. */
  #current: Invocation | null = null;
  /** A finished invocation the next call may reuse (`Invocation.reusable`). */
  #spare: Invocation | null = null;
  /** The Promises of VM calls that parked: a frame waiting on one needs no race of its own. */
  readonly #own = new WeakSet<Promise<unknown>>();
  /** Functions already offered to `specialize` on demand, or null when all were at load. */
  #onDemand: Set<LoadedFunction> | null = null;
  /** The frame a compiled function just parked, until `#callCompiled` takes it. */
  #parked: Frame | null = null;

  constructor(ex: ProgramData, allocators: AllocatorSet) {
    this.#ex = ex;
    this.#allocators = allocators;
  }

  /** Checks the clock and signal of the invocation running now (`Invocation.checkNow`). */
  checkNow(): void {
    this.#current?.checkNow();
  }

  /** The invocation running now, or null between runs: what a kernel's work is charged to. */
  currentInvocation(): Invocation | null {
    return this.#current;
  }

  /** The call signal of the invocation running now (`Invocation.callSignal`), if any. */
  currentCallSignal(): AbortSignal | undefined {
    return this.#current?.callSignal();
  }

  /**
   * Runs function-table entry `index` with `args`: its value, or a Promise of
   * it. Inside a running invocation (a call from the program, or from a
   * packed function it called) it nests in that invocation; otherwise it
   * starts one under the VM's limits.
   */
  call(index: number, args: readonly unknown[]): unknown {
    const inv = this.#current;
    if (inv === null) return this.invoke(this.limits, index, args);
    return this.#enter(inv, index, args);
  }

  /**
   * `call`, for a closure: a call through `invoke_closure` (a builtin, the
   * closure, this) takes about twice the JavaScript stack of a call in the
   * code, so it counts as two nested calls against `maxCallDepth` while it
   * runs. Recursion through closures then stops with the same "Call stack
   * overflow" as recursion in the code, in every dispatch form, instead of
   * exhausting the JavaScript stack first (at about 700 levels, against
   * about 1,250 for calls in the code).
   */
  callClosure(index: number, args: readonly unknown[]): unknown {
    const inv = this.#current;
    if (inv === null) return this.invoke(this.limits, index, args);
    inv.depth += CLOSURE_EXTRA_DEPTH;
    try {
      return this.#enter(inv, index, args);
    } finally {
      inv.depth -= CLOSURE_EXTRA_DEPTH;
    }
  }

  /**
   * Runs function `index` as a new invocation under `limits` (`run`, without
   * a closure). With a `probe`, every call of the invocation is reported to
   * it, on the generic loop (`vm.profile`).
   */
  invoke(
    limits: ResolvedLimits,
    index: number,
    args: readonly unknown[],
    probe: CallProbe | null = null,
  ): unknown {
    let inv = this.#spare;
    if (inv !== null && inv.limits === limits && probe === null) this.#spare = null;
    else inv = new Invocation(limits);
    inv.probe = probe;
    const previous = this.#current;
    this.#current = inv;
    let out: unknown;
    try {
      out = this.#enter(inv, index, args);
    } catch (e) {
      this.#current = previous;
      this.#end(inv);
      throw e;
    }
    this.#current = previous;
    // #enter returns a Promise only for a call that parked.
    if (out instanceof Promise) return this.#finishLater(inv, out);
    this.#end(inv);
    return out;
  }

  /**
   * A call returned or threw without waiting: its invocation ends, and serves
   * the next call when it can (`Invocation.reusable`: no clock, no signal, no
   * frame left waiting).
   */
  #end(inv: Invocation): void {
    if (inv.reusable) {
      inv.restart();
      this.#spare = inv;
    } else {
      inv.finish();
    }
  }

  #finishLater(inv: Invocation, p: Promise<unknown>): Promise<unknown> {
    return p.then(
      (v) => {
        inv.finish();
        return v;
      },
      (e) => {
        inv.finish();
        throw e;
      },
    );
  }

  /**
   * Runs `body` as a new invocation under `limits` (calls into the VM it
   * makes, through closures say, belong to that invocation); the invocation
   * ends when `body`'s value, or the Promise it returned, settles.
   */
  run(limits: ResolvedLimits, body: (inv: Invocation) => unknown): unknown {
    const inv = new Invocation(limits);
    const previous = this.#current;
    this.#current = inv;
    let out: unknown;
    try {
      out = body(inv);
    } catch (e) {
      inv.finish();
      throw e;
    } finally {
      this.#current = previous;
    }
    const p = typeof out === "object" && out !== null ? asPromise(out) : null;
    if (p !== null) return this.#finishLater(inv, p);
    inv.finish();
    return out;
  }

  #enter(inv: Invocation, index: number, args: readonly unknown[]): unknown {
    const fn = this.functions[index]!;
    if (args.length !== fn.info.numArgs) {
      throw new VMError(
        { functionName: fn.info.name, pc: -1, instruction: "", packedFunc: "" },
        `@${fn.info.name} takes ${fn.info.numArgs} argument${
          fn.info.numArgs === 1 ? "" : "s"
        }, got ${args.length}`,
      );
    }
    checkArgumentsLive(fn.info.name, args);
    const limits = inv.limits;
    if (inv.depth >= limits.maxCallDepth) {
      throw new VMError(
        { functionName: fn.info.name, pc: -1, instruction: "", packedFunc: "" },
        `Call stack overflow: more than ${limits.maxCallDepth} nested VM function calls (maxCallDepth)`,
      );
    }
    const slots = fn.template.length;
    if (inv.slots + slots > limits.maxStackSlots) {
      throw new VMError(
        { functionName: fn.info.name, pc: -1, instruction: "", packedFunc: "" },
        `Stack overflow: a frame of ${slots} register slots on top of ${inv.slots} would pass the ${limits.maxStackSlots} register slots one call may hold (maxStackSlots)`,
      );
    }
    if ((inv.budget -= 1) < 0) {
      try {
        inv.refill(true);
      } catch (e) {
        if (e === YIELD) return this.#enterLater(inv, fn, args);
        throw this.#wrap({ fn, pc: -1 }, e);
      }
    }
    return this.#start(inv, fn, args);
  }

  /**
   * A call whose fuel was charged and that must yield first: after a
   * macrotask (and the checks a timer's abort makes land), it starts as
   * `#start`. Its caller parks on the Promise, as on a VM call that parked.
   */
  #enterLater(inv: Invocation, fn: LoadedFunction, args: readonly unknown[]): Promise<unknown> {
    const p = nextMacrotask().then(() => {
      try {
        inv.resumed();
      } catch (e) {
        throw this.#wrap({ fn, pc: -1 }, e);
      }
      // The arguments may have been freed meanwhile (the caller's, at the top level).
      checkArgumentsLive(fn.info.name, args);
      const previous = this.#current;
      this.#current = inv;
      try {
        return this.#start(inv, fn, args);
      } finally {
        this.#current = previous;
      }
    });
    this.#own.add(p);
    return p;
  }

  /** Runs a call whose checks passed and whose fuel was charged. */
  #start(inv: Invocation, fn: LoadedFunction, args: readonly unknown[]): unknown {
    const slots = fn.template.length;
    inv.depth++;
    inv.slots += slots;
    if (fn.compiled !== null && this.instrument === null && inv.probe === null) {
      return this.#callCompiled(inv, fn, fn.compiled, args);
    }
    const frame = Frame.enter(fn, args, inv);
    let result: unknown;
    try {
      result = this.#run(frame);
    } catch (e) {
      this.#leave(inv, fn);
      this.#probeFailed(frame);
      this.#teardown(frame, undefined);
      throw this.#wrap(frame, e);
    }
    if (result === SUSPENDED) return this.#suspend(frame);
    this.#leave(inv, fn);
    return this.#teardown(frame, result);
  }

  #leave(inv: Invocation, fn: LoadedFunction): void {
    inv.depth--;
    inv.slots -= fn.template.length;
  }

  /** The rest of a parked frame's call, as a Promise that the VM knows as its own. */
  #suspend(frame: Frame): Promise<unknown> {
    const p = this.#resume(frame);
    this.#own.add(p);
    return p;
  }

  /**
   * Runs a compiled function (vm/compiled_mode.ts). It releases its registers
   * and wraps errors itself; when a call inside it returns a Promise, it hands
   * its registers over in a frame (`parkFrame`) and the rest of this call runs
   * in the interpreter, from the instruction after the one that parked.
   */
  #callCompiled(
    inv: Invocation,
    fn: LoadedFunction,
    compiled: CompiledRun,
    args: readonly unknown[],
  ): unknown {
    // `inv` is already the current invocation: `#enter` runs only inside one.
    const previous = activateAllocators(this.#allocators);
    let result: unknown;
    try {
      result = compiled(args, inv);
    } catch (e) {
      this.#leave(inv, fn);
      throw e;
    } finally {
      activateAllocators(previous);
    }
    if (result === SUSPENDED) {
      const frame = this.#parked!;
      this.#parked = null;
      return this.#suspend(frame);
    }
    this.#leave(inv, fn);
    return result;
  }

  /**
   * Awaits a parked frame's Promise and runs the rest of its call. A Promise
   * from a packed function races the invocation's timer and signal: when the
   * invocation stops first, the frame is released and its call fails here
   * (a value the Promise delivers later is freed if nobody holds it). A
   * Promise of a VM call of the same invocation needs no race: the frame
   * waiting inside it fails first.
   */
  async #resume(frame: Frame): Promise<unknown> {
    const inv = frame.inv;
    let result: unknown = SUSPENDED;
    try {
      while (result === SUSPENDED) {
        const pending = frame.pending!;
        const v = this.#own.has(pending) ? await pending : await inv.race(pending);
        if (v === STOPPED) {
          pending.then(releaseIfUnowned, () => {});
          throw inv.stopReason();
        }
        frame.pending = null;
        if (v === RESUMED) {
          // A yield: the frame starts again at `frame.pc`, once the interval restarted and
          // nothing stopped the call meanwhile.
          inv.resumed();
          const compiled = frame.fn.compiled;
          if (compiled === null || this.instrument !== null || inv.probe !== null) {
            result = this.#run(frame);
            continue;
          }
          // In compiled mode the function takes its registers back, and goes on compiled.
          result = this.#runCompiledFrom(frame, compiled);
          if (result === SUSPENDED) {
            frame = this.#parked!;
            this.#parked = null;
          }
          continue;
        }
        const ins = frame.fn.code[frame.pc];
        if (v !== SKIPPED) {
          storeResult(frame.regs, ins.dst, v);
          if (this.instrument !== null || inv.probe !== null) this.#instrumentAfter(ins, frame, v);
        }
        if (ins.after !== null) releaseRegisters(frame.regs, ins.after);
        frame.pc++;
        result = this.#run(frame);
      }
    } catch (e) {
      this.#probeFailed(frame);
      this.#teardown(frame, undefined);
      throw this.#wrap(frame, e);
    } finally {
      this.#leave(inv, frame.fn);
    }
    return this.#teardown(frame, result);
  }

  /**
   * Hands a frame parked at a jump target after a yield back to its compiled
   * function (`CompiledRun`'s `resumeAt`): the frame is left empty, and the
   * compiled function releases the registers and wraps errors itself, as at
   * any call. Its result, or `SUSPENDED` with the frame it parked next in
   * `#parked`.
   */
  #runCompiledFrom(frame: Frame, compiled: CompiledRun): unknown {
    const count = frame.fn.registers;
    const regs = frame.regs.slice(0, count);
    frame.regs.fill(undefined, 0, count);
    const previous = activateAllocators(this.#allocators);
    const previousInv = this.#current;
    this.#current = frame.inv;
    try {
      return compiled(regs, frame.inv, frame.pc);
    } finally {
      activateAllocators(previous);
      this.#current = previousInv;
    }
  }

  /** A probed call that parked and then failed (or was stopped) is reported as failed. */
  #probeFailed(frame: Frame): void {
    const token = frame.probeToken;
    if (token === NO_TOKEN) return;
    frame.probeToken = NO_TOKEN;
    frame.inv.probe?.after(token, true);
  }

  /**
   * Ends a frame: the result survives (floating), every register is
   * released. A result whose memory was already released (`kill r; ret r`)
   * is returned as it is, for the caller to refuse with a `VMError`: the
   * VM's result check, or the caller's register store.
   */
  #teardown(frame: Frame, result: unknown): unknown {
    const held = typeof result === "object" && result !== null && VMObject.is(result) &&
      !result.disposed;
    if (held) result.retain();
    releaseAllRegisters(frame.regs, frame.fn.registers);
    if (held) result.disown();
    return result;
  }

  #wrap(frame: { fn: LoadedFunction; pc: number }, e: unknown): VMError {
    if (isVMError(e)) return e;
    const ins = frame.pc >= 0 ? frame.fn.code[frame.pc] : undefined;
    const reason = reasonOf(e);
    // A limit that stopped the call says which in the message; the cause is the abort's reason
    // (none for fuel and time), not the VM's internal error.
    const limit = limitOf(e);
    return new VMError(
      {
        functionName: frame.fn.info.name,
        pc: frame.pc,
        instruction: ins === undefined ? "" : instrText(this.#ex, ins),
        builtInstruction: ins === undefined ? "" : builtInstrText(this.#ex, ins),
        packedFunc: ins?.fnName ?? "",
      },
      reason,
      limit === null ? { cause: e } : limit.cause === undefined ? {} : { cause: limit.cause },
    );
  }

  #run(frame: Frame): unknown {
    const previous = activateAllocators(this.#allocators);
    const previousInv = this.#current;
    this.#current = frame.inv;
    try {
      const fn = frame.fn;
      if (this.#onDemand !== null && fn.specialized === null && !this.#onDemand.has(fn)) {
        this.#onDemand.add(fn);
        fn.specialized = specialize(fn, dispatchHelpers());
      }
      const specialized = fn.specialized;
      return specialized !== null && this.instrument === null && frame.inv.probe === null
        ? specialized(frame)
        : this.#loop(frame);
    } catch (e) {
      // Both loops left `frame.pc` at the backward jump whose charge yielded.
      if (e === YIELD) return this.#parkYield(frame);
      throw e;
    } finally {
      activateAllocators(previous);
      this.#current = previousInv;
    }
  }

  /**
   * Parks `frame`, stopped at a backward jump whose charge threw `YIELD`, at
   * the jump's target: the jump's releases and fuel are done, and the
   * target's entry releases run when the frame resumes there.
   */
  #parkYield(frame: Frame): typeof SUSPENDED {
    frame.pc += frame.fn.code[frame.pc].jump;
    const p = nextMacrotask();
    this.#own.add(p);
    frame.pending = p;
    return SUSPENDED;
  }

  /** Emits the specialized loop of every function (see vm/specialized_dispatch.ts). */
  specializeAll(): void {
    const helpers = dispatchHelpers();
    for (const fn of this.functions) if (fn !== undefined) fn.specialized = specialize(fn, helpers);
  }

  /**
   * Emits a function's specialized loop when a frame of it first runs here
   * (compiled mode: only calls that parked, or that could not be compiled).
   */
  specializeOnDemand(): void {
    this.#onDemand = new Set();
  }

  /** Compiles every function (see vm/compiled_mode.ts); those that cannot be stay interpreted. */
  compileAll(): void {
    const helpers = compiledHelpers({
      current: () => this.#current!,
      parked: (frame) => {
        this.#parked = frame;
      },
      own: (p) => {
        this.#own.add(p);
      },
      wrap: (frame, e) => this.#wrap(frame, e),
    });
    for (const fn of this.functions) if (fn !== undefined) fn.compiled = compile(fn, helpers);
  }

  /**
   * The loop. Runs from `frame.pc` until `Ret` (returns the value) or a call
   * returns a Promise (parks it in the frame, returns `SUSPENDED`). On a
   * throw, `frame.pc` is set to the failing instruction before it propagates.
   */
  #loop(frame: Frame): unknown {
    const code = frame.fn.code;
    const regs = frame.regs;
    const inv = frame.inv;
    // A user's instrument or a profile (the invocation's probe) sees every call.
    const instrumented = this.instrument !== null || inv.probe !== null;
    let pc = frame.pc;
    let ins = code[pc];
    try {
      for (;;) {
        ins = code[pc];
        if (ins.entry !== null) releaseRegisters(regs, ins.entry);
        let v: unknown;
        switch (ins.op) {
          case DecodedOp.Call0:
            if (instrumented) v = this.#instrumentedCall(ins, frame);
            else v = ins.fn();
            break;
          case DecodedOp.Call1:
            if (instrumented) v = this.#instrumentedCall(ins, frame);
            else v = ins.fn(regs[ins.a0]);
            break;
          case DecodedOp.Call2:
            if (instrumented) v = this.#instrumentedCall(ins, frame);
            else v = ins.fn(regs[ins.a0], regs[ins.a1]);
            break;
          case DecodedOp.Call3:
            if (instrumented) v = this.#instrumentedCall(ins, frame);
            else v = ins.fn(regs[ins.a0], regs[ins.a1], regs[ins.a2]);
            break;
          case DecodedOp.Call4:
            if (instrumented) v = this.#instrumentedCall(ins, frame);
            else v = ins.fn(regs[ins.a0], regs[ins.a1], regs[ins.a2], regs[ins.a3]);
            break;
          case DecodedOp.CallN:
            if (instrumented) v = this.#instrumentedCall(ins, frame);
            else v = ins.fn(...Array.from(ins.args, (s) => regs[s]));
            break;
          case DecodedOp.Ret:
            frame.pc = pc;
            return regs[ins.a0];
          case DecodedOp.Goto:
            if (ins.after !== null) releaseRegisters(regs, ins.after);
            // A backward jump repeats the instructions from its target to itself: their fuel.
            if (ins.jump < 0 && (inv.budget -= 1 - ins.jump) < 0) inv.refill();
            pc += ins.jump;
            continue;
          case DecodedOp.If: {
            const truthy = isTruthy(regs[ins.a0]);
            if (ins.after !== null) releaseRegisters(regs, ins.after);
            if (truthy) pc++;
            else {
              if (ins.jump < 0 && (inv.budget -= 1 - ins.jump) < 0) inv.refill();
              pc += ins.jump;
            }
            continue;
          }
          default:
            throw new Error(`invalid decoded opcode ${ins.op}`);
        }
        // Every Call lands here with its result. Numbers and other primitives
        // (the common case for shape code) take the short path.
        if (instrumented && v === SKIPPED) {
          if (ins.after !== null) releaseRegisters(regs, ins.after);
          pc++;
          continue;
        }
        if (typeof v === "object" && v !== null && !VMObject.is(v)) {
          const p = asPromise(v);
          if (p !== null) {
            frame.pc = pc;
            frame.pending = p;
            return SUSPENDED;
          }
        }
        if (ins.fresh && !instrumented) storeFresh(regs, ins.dst, v);
        else storeResult(regs, ins.dst, v);
        if (instrumented) this.#instrumentAfter(ins, frame, v);
        if (ins.after !== null) releaseRegisters(regs, ins.after);
        pc++;
      }
    } catch (e) {
      frame.pc = pc;
      throw e;
    }
  }

  /**
   * The instrumented form of a call: the user's instrument may skip it (then
   * the destination keeps its value); the invocation's probe (a profile)
   * times what runs, between the user's "before" and "after" calls.
   */
  #instrumentedCall(ins: Instr, frame: Frame): unknown {
    const args = Array.from(ins.args, (s) => frame.regs[s]);
    // Kept for the "after" call: the destination may be one of the argument registers.
    frame.instrumentArgs = args;
    const instrument = this.instrument;
    if (instrument !== null && instrument(ins.fn, ins.fnName, true, undefined, args) === "skip") {
      return SKIPPED;
    }
    const probe = frame.inv.probe;
    if (probe === null) return ins.fn(...args);
    const token = probe.before(frame.fn, ins);
    frame.probeToken = token;
    try {
      return ins.fn(...args);
    } catch (e) {
      frame.probeToken = NO_TOKEN;
      probe.after(token, true);
      throw e;
    }
  }

  #instrumentAfter(ins: Instr, frame: Frame, v: unknown): void {
    const token = frame.probeToken;
    if (token !== NO_TOKEN) {
      frame.probeToken = NO_TOKEN;
      frame.inv.probe?.after(token, false);
    }
    this.instrument?.(ins.fn, ins.fnName, false, v, frame.instrumentArgs);
    frame.instrumentArgs = [];
  }
}
