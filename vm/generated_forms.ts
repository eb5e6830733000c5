/**
 * The glue between the interpreter (vm/interpreter.ts) and the two code
 * generators that write faster forms of its loop: the helpers that the
 * specialized loops (vm/specialized_dispatch.ts) and the compiled functions
 * (vm/compiled_mode.ts) call.
 *
 * @module
 */

import type { VMError } from "../ground/errors.ts";
import { disownValue, releaseValue, VMObject } from "../ground/object.ts";
import { asPromise, isTruthy, parkPromise } from "./call_boundary.ts";
import { type CompiledHelpers, PARK } from "./compiled_mode.ts";
import { Frame, SUSPENDED } from "./frame.ts";
import { type Invocation, nextMacrotask } from "./invocation.ts";
import type { LoadedFunction } from "./loaded_function.ts";
import { releaseRegisters, storeResult } from "./registers.ts";
import type { DispatchHelpers } from "./specialized_dispatch.ts";

/** What the specialized loops call (vm/specialized_dispatch.ts). */
export function dispatchHelpers(): DispatchHelpers {
  return {
    // Called for every object result: the common one, a VMObject, returns at once, so V8
    // inlines this into the specialized loop without spending the budget it needs to
    // inline the packed functions.
    parks(frame, pc, v) {
      if (VMObject.is(v as object)) return false; // the generated code passes objects only
      return parkPromise(frame, pc, v as object);
    },
    store: storeResult,
    release: releaseValue,
    releaseList: releaseRegisters,
    isTruthy,
    suspended: SUSPENDED,
  };
}

/** What the compiled functions of one interpreter call (vm/compiled_mode.ts). */
export interface CompiledHost {
  /** The invocation running now. */
  current(): Invocation;
  /** Takes the frame a compiled function just parked. */
  parked(frame: Frame): void;
  /** Marks a Promise as the VM's own: a frame waiting on it needs no race. */
  own(p: Promise<unknown>): void;
  /** The `VMError` for `e` thrown at `pc` of `fn`. */
  wrap(frame: { fn: LoadedFunction; pc: number }, e: unknown): VMError;
}

/**
 * The helpers the compiled functions of one interpreter call: they hold,
 * drop and store values with the object protocol and park the call on a
 * Promise, handing its registers to a frame of the generic loop.
 */
export function compiledHelpers(host: CompiledHost): CompiledHelpers {
  let pending: Promise<unknown> | null = null;
  /** The value the call returned: a Promise, or the thenable `pending` stands for. */
  let pendingValue: unknown = null;
  const parks = (v: object) => {
    const p = asPromise(v);
    if (p === null) return;
    pending = p;
    pendingValue = v;
    throw PARK;
  };
  const helpers: CompiledHelpers = {
    hold(v) {
      if (v === null) return;
      if (VMObject.is(v)) v.retain();
      else parks(v);
    },
    drop(v) {
      if (v === null) return;
      if (VMObject.is(v)) v.releaseIfUnowned();
      else parks(v);
    },
    // A frame's registers hold with retain() alone: they never join the GC safety net
    // (ground/object.ts heldBeyondFrames), as the protocol always releases them.
    retain(v) {
      if (typeof v === "object" && v !== null && VMObject.is(v)) v.retain();
    },
    keepResult(v) {
      // As #teardown: a released result goes back as it is, for the caller to refuse.
      if (typeof v === "object" && v !== null && VMObject.is(v) && !v.disposed) v.retain();
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
      if (dst >= 0 && regs[dst] === pendingValue) regs[dst] = undefined;
      const frame = new Frame(fn, regs, host.current());
      frame.pc = pc;
      frame.pending = pending;
      pending = null;
      pendingValue = null;
      host.parked(frame);
      return SUSPENDED;
    },
    yielded: (fn, pc, registers) => {
      const regs = fn.template.slice();
      for (let r = 0; r < registers.length; r++) regs[r] = registers[r];
      const frame = new Frame(fn, regs, host.current());
      frame.pc = pc + fn.code[pc].jump;
      const p = nextMacrotask();
      host.own(p);
      frame.pending = p;
      host.parked(frame);
      return SUSPENDED;
    },
    fail: (fn, pc, e, registers) => {
      for (const v of registers) releaseValue(v);
      return host.wrap({ fn, pc }, e);
    },
  };
  return helpers;
}
