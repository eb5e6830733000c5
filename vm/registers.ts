/**
 * Register writes and releases under the object protocol (ground/object.ts):
 * the one implementation every dispatch path — the generic loop, the
 * specialized loop and the VM's entry and exit — uses, so a value is held by
 * a register exactly while it is there. Objects are recognized by
 * `VMObject.is`, which never throws: a register may hold anything a packed
 * function returned, a revoked Proxy included.
 *
 * @module
 */

import { VMObject } from "../ground/object.ts";

/**
 * Stores a call's result in register `dst` (-1: discard it). The new value
 * gains its holder before the old one loses its own, so storing a value over
 * itself is safe; a discarded object that nobody holds is freed at once.
 */
export function storeResult(regs: unknown[], dst: number, v: unknown): void {
  // `typeof` first: numbers and strings (shape code, counters) skip the prototype walk.
  const isObject = typeof v === "object" && v !== null;
  if (dst >= 0) {
    const old = regs[dst];
    regs[dst] = v;
    if (isObject && VMObject.is(v)) v.retain();
    if (typeof old === "object" && old !== null && VMObject.is(old)) old.release();
  } else if (isObject && VMObject.is(v)) {
    v.releaseIfUnowned();
  }
}

/**
 * Stores a call's result in register `dst` (-1: discard it), where liveness
 * guarantees the register is empty (program/liveness.ts: a register a call
 * writes but does not read holds nothing), so there is no old value to release.
 */
export function storeFresh(regs: unknown[], dst: number, v: unknown): void {
  if (typeof v === "object" && v !== null && VMObject.is(v)) {
    if (dst >= 0) {
      regs[dst] = v;
      v.retain();
    } else {
      v.releaseIfUnowned();
    }
  } else if (dst >= 0) {
    regs[dst] = v;
  }
}

/** Clears the registers in `which` (liveness release points), releasing their values. */
export function releaseRegisters(regs: unknown[], which: Int32Array): void {
  for (let k = 0; k < which.length; k++) {
    const r = which[k];
    const v = regs[r];
    regs[r] = undefined;
    if (typeof v === "object" && v !== null && VMObject.is(v)) v.release();
  }
}

/**
 * Clears registers `0..count-1` (a frame's end), releasing their values.
 * Never throws, so a frame ends however its call failed: a value that looks
 * like an object of another copy of relaxvm but cannot be released (a Proxy
 * of one) is dropped.
 */
export function releaseAllRegisters(regs: unknown[], count: number): void {
  for (let r = 0; r < count; r++) {
    const v = regs[r];
    regs[r] = undefined;
    if (typeof v === "object" && v !== null && VMObject.is(v)) {
      try {
        v.release();
      } catch {
        // Not really an object of ours (a Proxy of one): nothing to release.
      }
    }
  }
}
