/**
 * A frame of the VM (vm/interpreter.ts): a function's register array, its
 * pc, the invocation whose budgets it spends, and the Promise it waits on
 * when it parked.
 *
 * @module
 */

import { VMObject } from "../ground/object.ts";
import type { Invocation } from "./invocation.ts";
import type { LoadedFunction } from "./loaded_function.ts";

/** Returned by the loop when a call gave a Promise; the frame is parked. */
export const SUSPENDED: unique symbol = Symbol("suspended");
/** What an instrumented call that was skipped "returns"; nothing is stored. */
export const SKIPPED: unique symbol = Symbol("skipped");
/** A frame's `probeToken` when no probed call is in progress. */
export const NO_TOKEN: unique symbol = Symbol("no token");

/** One running call of a VM function. */
export class Frame {
  readonly fn: LoadedFunction;
  readonly regs: unknown[];
  /** The invocation this frame belongs to (its budgets). */
  readonly inv: Invocation;
  pc = 0;
  pending: Promise<unknown> | null = null;
  /** The arguments of the call in progress, when an instrument is set. */
  instrumentArgs: unknown[] = [];
  /** The probe's token for the call in progress (`vm.profile`), or `NO_TOKEN`. */
  probeToken: unknown = NO_TOKEN;

  /** A frame over `regs` (a copy of `fn.template` whose registers it now holds). */
  constructor(fn: LoadedFunction, regs: unknown[], inv: Invocation) {
    this.fn = fn;
    this.regs = regs;
    this.inv = inv;
  }

  /** A new frame for a call: the arguments become registers `0..n-1`, each holding its value. */
  static enter(fn: LoadedFunction, args: readonly unknown[], inv: Invocation): Frame {
    const regs = fn.template.slice();
    for (let i = 0; i < args.length; i++) {
      const v = args[i];
      regs[i] = v;
      if (typeof v === "object" && v !== null && VMObject.is(v)) v.retain();
    }
    return new Frame(fn, regs, inv);
  }
}
