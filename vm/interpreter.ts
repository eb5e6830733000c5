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
 * Errors. The frame's pc is current before anything can throw, so a failure
 * becomes a `VMError` naming the function, pc, instruction text and callee,
 * with the original as `cause`. Frames release their registers in every
 * case, so a failed call leaves nothing behind and the VM stays usable.
 *
 * @module
 */

import { activateAllocators, type AllocatorSet } from "../devices/allocation_context.ts";
import { NDArray } from "../devices/ndarray.ts";
import { VMError } from "../ground/errors.ts";
import { disownValue, releaseValue, VMObject } from "../ground/object.ts";
import type { ProgramData } from "../program/program_data.ts";
import { DecodedOp, type Instr, instrText, type LoadedFunction } from "./loaded_function.ts";
import { releaseAllRegisters, releaseRegisters, storeFresh, storeResult } from "./registers.ts";
import { compile, type CompiledHelpers, type CompiledRun, PARK } from "./compiled_mode.ts";
import { type DispatchHelpers, specialize } from "./specialized_dispatch.ts";

/** Deepest nesting of VM function calls before a call fails with `VMError`. */
export const MAX_CALL_DEPTH = 1000;

/** Returned by the loop when a call gave a Promise; the frame is parked. */
const SUSPENDED: unique symbol = Symbol("suspended");
/** What an instrumented call that was skipped "returns"; nothing is stored. */
const SKIPPED: unique symbol = Symbol("skipped");

/** `fn(func, name, before, ret, args)`; returning `"skip"` before a call skips it. */
export type Instrument = (
  func: unknown,
  name: string,
  before: boolean,
  ret: unknown,
  args: unknown[],
) => unknown;

class Frame {
  readonly fn: LoadedFunction;
  readonly regs: unknown[];
  pc = 0;
  pending: Promise<unknown> | null = null;
  /** The arguments of the call in progress, when an instrument is set. */
  instrumentArgs: unknown[] = [];

  /** A frame over `regs` (a copy of `fn.template` whose registers it now holds). */
  constructor(fn: LoadedFunction, regs: unknown[]) {
    this.fn = fn;
    this.regs = regs;
  }

  /** A new frame for a call: the arguments become registers `0..n-1`, each holding its value. */
  static enter(fn: LoadedFunction, args: readonly unknown[]): Frame {
    const regs = fn.template.slice();
    for (let i = 0; i < args.length; i++) {
      const v = args[i];
      regs[i] = v;
      if (v instanceof VMObject) v.retain();
    }
    return new Frame(fn, regs);
  }
}

function isTruthy(v: unknown): boolean {
  if (typeof v === "number") return v !== 0;
  if (typeof v === "boolean") return v;
  if (typeof v === "bigint") return v !== 0n;
  if (v instanceof NDArray && v.size === 1 && v.device.kind === "cpu") {
    // dataSync(), not cpuView(): an int64 element is a bigint (0n !== 0), a bfloat16 one stored bits.
    return Number(v.dataSync()[0]) !== 0;
  }
  throw new TypeError(
    `If needs a number, boolean or 1-element CPU tensor as its condition, got ${
      v instanceof NDArray ? v.toString() : v === undefined ? "undefined" : typeof v
    } (read GPU conditions with vm.builtin.read_if_cond)`,
  );
}

/** Runs the compiled functions of one executable. */
export class Interpreter {
  readonly #ex: ProgramData;
  readonly #allocators: AllocatorSet;
  /** Compiled functions by function-table index (VM functions only). */
  readonly functions: (LoadedFunction | undefined)[] = [];
  instrument: Instrument | null = null;
  #depth = 0;
  /** Functions already offered to `specialize` on demand, or null when all were at load. */
  #onDemand: Set<LoadedFunction> | null = null;
  /** The frame a compiled function just parked, until `#callCompiled` takes it. */
  #parked: Frame | null = null;

  constructor(ex: ProgramData, allocators: AllocatorSet) {
    this.#ex = ex;
    this.#allocators = allocators;
  }

  /** Runs function-table entry `index` with `args`: its value, or a Promise of it. */
  call(index: number, args: readonly unknown[]): unknown {
    const fn = this.functions[index]!;
    if (args.length !== fn.info.numArgs) {
      throw new VMError(
        { functionName: fn.info.name, pc: -1, instruction: "", packedFunc: "" },
        `@${fn.info.name} takes ${fn.info.numArgs} argument${
          fn.info.numArgs === 1 ? "" : "s"
        }, got ${args.length}`,
      );
    }
    if (this.#depth >= MAX_CALL_DEPTH) {
      throw new VMError(
        { functionName: fn.info.name, pc: -1, instruction: "", packedFunc: "" },
        `Call stack overflow: more than ${MAX_CALL_DEPTH} nested VM function calls`,
      );
    }
    this.#depth++;
    if (fn.compiled !== null && this.instrument === null) {
      return this.#callCompiled(fn.compiled, args);
    }
    const frame = Frame.enter(fn, args);
    let result: unknown;
    try {
      result = this.#run(frame);
    } catch (e) {
      this.#depth--;
      this.#teardown(frame, undefined);
      throw this.#wrap(frame, e);
    }
    if (result === SUSPENDED) return this.#resume(frame);
    this.#depth--;
    return this.#teardown(frame, result);
  }

  /**
   * Runs a compiled function (vm/compiled_mode.ts). It releases its registers
   * and wraps errors itself; when a call inside it returns a Promise, it hands
   * its registers over in a frame (`parkFrame`) and the rest of this call runs
   * in the interpreter, from the instruction after the one that parked.
   */
  #callCompiled(compiled: CompiledRun, args: readonly unknown[]): unknown {
    const previous = activateAllocators(this.#allocators);
    let result: unknown;
    try {
      result = compiled(args);
    } catch (e) {
      this.#depth--;
      throw e;
    } finally {
      activateAllocators(previous);
    }
    if (result === SUSPENDED) {
      const frame = this.#parked!;
      this.#parked = null;
      return this.#resume(frame);
    }
    this.#depth--;
    return result;
  }

  async #resume(frame: Frame): Promise<unknown> {
    let result: unknown = SUSPENDED;
    try {
      while (result === SUSPENDED) {
        const v = await frame.pending;
        frame.pending = null;
        const ins = frame.fn.code[frame.pc];
        if (v !== SKIPPED) {
          storeResult(frame.regs, ins.dst, v);
          if (this.instrument !== null) this.#instrumentAfter(ins, frame, v);
        }
        if (ins.after !== null) releaseRegisters(frame.regs, ins.after);
        frame.pc++;
        result = this.#run(frame);
      }
    } catch (e) {
      this.#teardown(frame, undefined);
      throw this.#wrap(frame, e);
    } finally {
      this.#depth--;
    }
    return this.#teardown(frame, result);
  }

  /** Ends a frame: the result survives (floating), every register is released. */
  #teardown(frame: Frame, result: unknown): unknown {
    const held = result instanceof VMObject;
    if (held) result.retain();
    releaseAllRegisters(frame.regs, frame.fn.registers);
    if (held) result.disown();
    return result;
  }

  #wrap(frame: { fn: LoadedFunction; pc: number }, e: unknown): VMError {
    if (e instanceof VMError) return e;
    const ins = frame.fn.code[frame.pc];
    const reason = e instanceof RangeError && /call stack/i.test(e.message)
      ? "Call stack overflow in a packed function"
      : e instanceof Error
      ? e.message
      : String(e);
    return new VMError(
      {
        functionName: frame.fn.info.name,
        pc: frame.pc,
        instruction: ins === undefined ? "" : instrText(this.#ex, ins),
        packedFunc: ins?.fnName ?? "",
      },
      reason,
      { cause: e },
    );
  }

  #run(frame: Frame): unknown {
    const previous = activateAllocators(this.#allocators);
    try {
      const fn = frame.fn;
      if (this.#onDemand !== null && fn.specialized === null && !this.#onDemand.has(fn)) {
        this.#onDemand.add(fn);
        fn.specialized = specialize(fn, this.#dispatchHelpers());
      }
      const specialized = fn.specialized;
      return specialized !== null && this.instrument === null
        ? specialized(frame)
        : this.#loop(frame);
    } finally {
      activateAllocators(previous);
    }
  }

  /** Emits the specialized loop of every function (see vm/specialized_dispatch.ts). */
  specializeAll(): void {
    const helpers = this.#dispatchHelpers();
    for (const fn of this.functions) if (fn !== undefined) fn.specialized = specialize(fn, helpers);
  }

  /**
   * Emits a function's specialized loop when a frame of it first runs here
   * (compiled mode: only calls that parked, or that could not be compiled).
   */
  specializeOnDemand(): void {
    this.#onDemand = new Set();
  }

  #dispatchHelpers(): DispatchHelpers {
    return {
      parks(frame, pc, v) {
        if (!(v instanceof Promise)) return false;
        frame.pc = pc;
        frame.pending = v;
        return true;
      },
      store: storeResult,
      release: releaseValue,
      releaseList: releaseRegisters,
      isTruthy,
      suspended: SUSPENDED,
    };
  }

  /** Compiles every function (see vm/compiled_mode.ts); those that cannot be stay interpreted. */
  compileAll(): void {
    let pending: Promise<unknown> | null = null;
    const helpers: CompiledHelpers = {
      hold(v) {
        if (v instanceof VMObject) v.retain();
        else if (v instanceof Promise) {
          pending = v;
          throw PARK;
        }
      },
      drop(v) {
        if (v instanceof VMObject) v.releaseIfUnowned();
        else if (v instanceof Promise) {
          pending = v;
          throw PARK;
        }
      },
      // A frame's registers hold with retain() alone: they never join the GC safety net
      // (ground/object.ts heldBeyondFrames), as the protocol always releases them.
      retain(v) {
        if (v instanceof VMObject) v.retain();
      },
      release: releaseValue,
      disown: disownValue,
      isTruthy,
      park: (fn, pc, registers) => {
        if (pending === null) throw new Error("compiled function parked without a Promise");
        const regs = fn.template.slice();
        for (let r = 0; r < registers.length; r++) regs[r] = registers[r];
        // A fresh store put the Promise in its register before `hold` saw it.
        const dst = fn.code[pc].dst;
        if (dst >= 0 && regs[dst] === pending) regs[dst] = undefined;
        const frame = new Frame(fn, regs);
        frame.pc = pc;
        frame.pending = pending;
        pending = null;
        this.#parked = frame;
        return SUSPENDED;
      },
      fail: (fn, pc, e, registers) => {
        for (const v of registers) releaseValue(v);
        return this.#wrap({ fn, pc }, e);
      },
    };
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
    const instrumented = this.instrument !== null;
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
            pc += ins.jump;
            continue;
          case DecodedOp.If: {
            const truthy = isTruthy(regs[ins.a0]);
            if (ins.after !== null) releaseRegisters(regs, ins.after);
            pc += truthy ? 1 : ins.jump;
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
        if (v instanceof Promise) {
          frame.pc = pc;
          frame.pending = v;
          return SUSPENDED;
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

  /** The instrumented form of a call: may skip it (then the destination keeps its value). */
  #instrumentedCall(ins: Instr, frame: Frame): unknown {
    const args = Array.from(ins.args, (s) => frame.regs[s]);
    // Kept for the "after" call: the destination may be one of the argument registers.
    frame.instrumentArgs = args;
    if (this.instrument!(ins.fn, ins.fnName, true, undefined, args) === "skip") return SKIPPED;
    return ins.fn(...args);
  }

  #instrumentAfter(ins: Instr, frame: Frame, v: unknown): void {
    this.instrument?.(ins.fn, ins.fnName, false, v, frame.instrumentArgs);
    frame.instrumentArgs = [];
  }
}
