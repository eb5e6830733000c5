/**
 * Specialized dispatch: the interpreter's loop, written out once per VM
 * function when the VM loads it.
 *
 * The generic loop (vm/interpreter.ts) pays for being generic on every
 * instruction: it fetches a decoded record, switches on its opcode, loads
 * the callee and the argument slots from it, and calls through one shared
 * call site that sees every packed function (a megamorphic call in V8). For
 * a function of small calls that is 2.5× the cost of the call itself.
 * Here the same semantics are emitted as JavaScript source — one `case` per
 * instruction with its slots as literals and its own call site — so V8 sees
 * each call site with one target. Nothing of the user's program becomes
 * source text but numbers: callees and slots are passed in as values. Long
 * functions are emitted in chunks (see `CHUNK_INSTRUCTIONS`).
 *
 * Semantics are the generic loop's, instruction for instruction: object
 * results are stored by the same function (vm/registers.ts), liveness releases
 * run at the same points, backward jumps charge the invocation's fuel the
 * same amounts, a Promise parks the frame at its pc, and `frame.pc`
 * names the failing instruction when anything throws. Every pc has a `case`,
 * so a frame can start or resume anywhere. Releases after an instruction are
 * written out (they name only registers the instruction names); releases on
 * block entry are passed as lists, one helper call per block, so the source
 * is linear in the code. A primitive result stored where liveness left the
 * register empty is a plain write: testing an old value that is `undefined`
 * cost more than the call, 2.3× a plain JS table loop on a program whose
 * values flow from call to call (bench/dispatch_bench.ts).
 *
 * The generic loop remains the path for instrumented and profiled runs, for functions too
 * large to be worth emitting, and where `new Function` is unavailable (a page
 * whose Content Security Policy forbids it).
 *
 * @module
 */

import { makeFunction } from "./dynamic_code.ts";
import { DecodedOp, type FuelBudget, type LoadedFunction } from "./loaded_function.ts";

/** What a specialized function needs from the interpreter. */
export interface DispatchHelpers {
  /**
   * Parks the frame at `pc` if the object result `v` is a Promise or a
   * thenable (returns true: the caller returns `suspended`); returns false
   * otherwise.
   */
  parks(frame: DispatchFrame, pc: number, v: unknown): boolean;
  /** Stores an object result in a register with the object protocol (vm/registers.ts). */
  store(regs: unknown[], dst: number, v: unknown): void;
  /** Drops a register value's reference. */
  release(v: unknown): void;
  /** Clears registers `list` of `regs`, releasing their values (vm/registers.ts). */
  releaseList(regs: unknown[], list: Int32Array): void;
  /** `If`'s truth test. */
  isTruthy(v: unknown): boolean;
  /** The marker returned when a call gave a Promise. */
  suspended: symbol;
}

/** The frame fields the specialized code touches. */
export interface DispatchFrame {
  regs: unknown[];
  pc: number;
  pending: Promise<unknown> | null;
  /** The invocation's budget. */
  readonly inv: FuelBudget;
}

/** Runs a frame from `frame.pc`; returns the result or `helpers.suspended`. */
export type SpecializedRun = (frame: DispatchFrame) => unknown;

/** Functions longer than this stay on the generic loop: their source would cost more than it saves. */
export const MAX_SPECIALIZED_INSTRUCTIONS = 20_000;

/**
 * Instructions per emitted chunk. V8's optimizing compiler (Turbofan) skips
 * functions whose bytecode is over about 60 KB; a 1000-instruction function
 * emitted whole stays on the mid-tier compiler at about 1.8× the plain JS
 * call loop, while chunks of this size are optimized, and then each call site
 * is inlined: below 1×. A jump out of a chunk, or its end, costs one return
 * to the dispatcher.
 */
export const CHUNK_INSTRUCTIONS = 128;

/** What a chunk returns instead of a pc: the function returned (value in `retval`), or parked. */
const RETURNED = -1, PARKED = -2;

/** Source that releases registers `list` of `r` (liveness release points). */
function releases(list: Int32Array | null): string {
  if (list === null) return "";
  let out = "";
  for (const r of list) {
    out +=
      `v = r[${r}]; r[${r}] = undefined; if (typeof v === "object" && v !== null) h.release(v);\n`;
  }
  return out;
}

/**
 * Source that charges a backward jump of `jump` (< 0) to the invocation's
 * budget: the instructions from its target to itself (vm/invocation.ts).
 */
function charge(jump: number): string {
  if (jump >= 0) return "";
  const fuel = 1 - jump;
  if (!Number.isSafeInteger(fuel)) throw new RangeError(`jump ${jump} is not an integer`);
  return `if ((b.budget -= ${fuel}) < 0) b.refill(); `;
}

/** Emits the specialized loop for `fn`, or returns null where that is not possible. */
export function specialize(fn: LoadedFunction, helpers: DispatchHelpers): SpecializedRun | null {
  const code = fn.code;
  if (code.length > MAX_SPECIALIZED_INSTRUCTIONS) return null;
  const callees: unknown[] = [];
  // Block-entry release lists are passed as values, one helper call per block: a list
  // can name many registers (an exit that ends every life in the function), while the
  // releases after an instruction name only registers the instruction names, and are
  // written out. So the source is linear in the code.
  const entryLists: Int32Array[] = [];
  const chunks: string[] = [];
  for (let lo = 0; lo < code.length; lo += CHUNK_INSTRUCTIONS) {
    const hi = Math.min(code.length, lo + CHUNK_INSTRUCTIONS);
    // Inside the chunk a jump continues the loop; outside, the dispatcher takes it.
    const jump = (target: number) =>
      target >= lo && target < hi ? `pc = ${target}; continue;` : `return ${target};`;
    let body = "";
    for (let pc = lo; pc < hi; pc++) {
      const ins = code[pc];
      // Entry releases run here, however control arrives: falling through,
      // jumping, or resuming after a Promise.
      body += `case ${pc}: pc = ${pc};\n`;
      if (ins.entry !== null) {
        body += `h.releaseList(r, e${entryLists.length});\n`;
        entryLists.push(ins.entry);
      }
      switch (ins.op) {
        case DecodedOp.Ret:
          body += `frame.pc = ${pc}; retval = r[${ins.a0}]; return ${RETURNED};\n`;
          continue;
        case DecodedOp.Goto:
          body += releases(ins.after) + charge(ins.jump) + jump(pc + ins.jump) + "\n";
          continue;
        case DecodedOp.If:
          // The condition gets its own variable: the releases after the If use `v`.
          body += `cond = h.isTruthy(r[${ins.a0}]);\n${releases(ins.after)}if (!cond) { ${
            charge(ins.jump)
          }${jump(pc + ins.jump)} }\n`;
          if (pc + 1 === hi) body += `return ${hi};\n`;
          continue;
      }
      const callee = callees.length;
      callees.push(ins.fn);
      const args = Array.from(ins.args, (s) => `r[${s}]`).join(", ");
      body += `v = c${callee}(${args});\n`;
      // Objects go through the helpers (park a Promise, else vm/registers.ts's store), which
      // keeps each instruction's code small. A primitive result (shape code, counters) owns
      // nothing, so its store is written out here: a call per instruction would spend V8's
      // inlining budget for the chunk, and the packed functions would no longer be inlined.
      // Where liveness says the destination is empty (`fresh`), there is no old value to
      // release; testing one that is `undefined` costs V8 more than the call itself.
      body +=
        `if (typeof v === "object" && v !== null) { if (h.parks(frame, ${pc}, v)) return ${PARKED}; store(r, ${ins.dst}, v); }`;
      if (ins.dst >= 0) {
        body += ins.fresh
          ? ` else r[${ins.dst}] = v;`
          : ` else { old = r[${ins.dst}]; r[${ins.dst}] = v; if (typeof old === "object" && old !== null) h.release(old); }`;
      }
      body += "\n" + releases(ins.after);
    }
    chunks.push(`function chunk${chunks.length}(frame, pc) {
  const r = frame.regs, b = frame.inv;
  let v, old, cond;
  try {
    for (;;) {
      switch (pc) {
${body}        return ${hi};
        default: throw new Error("pc " + pc + " is outside the function");
      }
    }
  } catch (e) {
    frame.pc = pc;
    throw e;
  }
}`);
  }
  const bindings = [
    ...callees.map((_, i) => `const c${i} = callees[${i}];`),
    ...entryLists.map((_, i) => `const e${i} = entries[${i}];`),
  ].join("\n");
  const source = `"use strict";
const store = h.store;
${bindings}
let retval;
${chunks.join("\n")}
const chunks = [${chunks.map((_, i) => `chunk${i}`).join(", ")}];
return function run(frame) {
  let pc = frame.pc;
  for (;;) {
    const chunk = chunks[Math.floor(pc / ${CHUNK_INSTRUCTIONS})];
    if (chunk === undefined) {
      frame.pc = pc;
      throw new Error("pc " + pc + " is outside the function");
    }
    pc = chunk(frame, pc);
    if (pc === ${RETURNED}) {
      const result = retval;
      retval = undefined; // hold no reference once returned
      return result;
    }
    if (pc === ${PARKED}) return h.suspended;
  }
};`;
  // Null where this realm forbids eval (CSP; tried once per realm): the generic loop runs it.
  const factory = makeFunction(["callees", "entries", "h"], source);
  if (factory === null) return null;
  const run = factory(callees, entryLists, helpers) as SpecializedRun;
  fn.sourceLength += source.length;
  return run;
}
