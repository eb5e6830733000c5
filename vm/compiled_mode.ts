/**
 * Compiled mode (`new VirtualMachine(ex, dev, { mode: "compiled" })`): TVM's
 * compiled VM (`exec_mode="compiled"`) for JavaScript. Each VM function
 * becomes one JavaScript function, written out when the VM loads:
 *
 * - registers become locals (`r0`, `r1`, …), so V8 keeps them in machine
 *   registers and sees, across calls, what type each holds;
 * - each `Call` is a call of its packed function (or of the VM's entry for a
 *   VM function), bound as a closure constant, so V8 can inline it;
 * - `Goto` and `If` become a `switch` on the pc inside a loop, with a `case`
 *   only where a jump lands; a function without jumps is straight-line code;
 * - liveness release points become `rK = undefined`, after releasing the
 *   value when it is an object;
 * - a backward jump charges the invocation's fuel (`inv`, the second
 *   argument) the instructions it repeats, as the interpreter does; when
 *   the charge says the call must yield to the event loop (`YIELD`), the
 *   function hands its registers over as for a Promise, in a frame parked at
 *   the jump's target (`yielded`), and after the macrotask the interpreter
 *   hands them back: a function with jumps can also start at a jump's target
 *   with its registers (`resumeAt`), so a long loop keeps running compiled.
 *
 * Semantics are the interpreter's, instruction for instruction: results are
 * held and released with the object protocol at the same points (memory
 * figures are equal), a failure is a `VMError` naming function, pc,
 * instruction and packed function, and a frame's registers are released
 * however the call ends. When a call returns a Promise, the function hands
 * its registers over in an interpreter frame parked at that instruction and
 * returns; the interpreter awaits the Promise and runs the rest of that call
 * (specialized dispatch, whose loop for the function it writes then, or the
 * generic loop), so a compiled function never awaits and has a single entry. With an instrument set, calls run in the
 * interpreter, which reports every `Call`.
 *
 * Only numbers become source text, and only integers checked against the
 * function (register and slot numbers, pcs, indices into the arrays of
 * callees and operand values). Names, strings and constants are passed to the
 * generated code as values, so nothing a loaded executable contains can
 * change the code.
 *
 * A function is left to the interpreter when its bytecode would be larger than
 * `MAX_COMPILED_BYTECODE`, when its release lists are too long to write
 * out (`MAX_ENTRY_RELEASES_PER_WORD`), or where
 * `new Function` is unavailable (a Content Security Policy without
 * `unsafe-eval`).
 *
 * @module
 */

import { makeFunction } from "./dynamic_code.ts";
import { YIELD } from "./invocation.ts";
import { DecodedOp, type FuelBudget, type LoadedFunction } from "./loaded_function.ts";

/** What compiled functions need from the interpreter. */
export interface CompiledHelpers {
  /**
   * For an object result (or null) being stored: a `VMObject` is retained; a
   * Promise (or thenable) is kept as `pending` and `PARK` thrown, so that the
   * compiled function's handler parks the frame.
   */
  hold(v: object | null): void;
  /** For an object result (or null) being discarded: an unowned `VMObject` is freed; a Promise parks, as in `hold`. */
  drop(v: object | null): void;
  /** Adds a holder if `v` is a `VMObject`. */
  retain(v: unknown): void;
  /** Holds a function's result across its teardown (not one already released). */
  keepResult(v: unknown): void;
  /** Drops a holder if `v` is a `VMObject`. */
  release(v: unknown): void;
  /** Drops a holder without freeing, if `v` is a `VMObject` (a returned value). */
  disown(v: unknown): void;
  /** `If`'s truth test. */
  isTruthy(v: unknown): boolean;
  /**
   * Hands the registers (which keep their holds) to an interpreter frame
   * parked at `pc` on the Promise `hold` or `drop` saw; returns the value
   * the compiled function returns.
   */
  park(fn: LoadedFunction, pc: number, registers: unknown[]): unknown;
  /**
   * Hands the registers to an interpreter frame parked, until the next
   * macrotask, at the target of the backward jump at `pc`, whose charge
   * threw `YIELD`; returns the value the compiled function returns.
   */
  yielded(fn: LoadedFunction, pc: number, registers: unknown[]): unknown;
  /** Releases `registers` and returns the `VMError` for `e` at `pc`. */
  fail(fn: LoadedFunction, pc: number, e: unknown, registers: unknown[]): Error;
}

/**
 * Thrown by `hold` and `drop` when a call returned a Promise; caught by the
 * compiled function itself, never seen outside it. A throw costs more than a
 * branch, but only a Promise pays for it (and a Promise is awaited anyway),
 * while every `Call` saves the bytecode of a branch to a parking exit: that
 * keeps functions of a thousand calls under V8's size limit for optimizing.
 */
export const PARK: unique symbol = Symbol("park");

/**
 * A compiled VM function, run for an invocation whose fuel its backward jumps
 * charge: its result, or the interpreter's marker for a parked call. With
 * `resumeAt` (a jump target, for a function with jumps), `args` are all its
 * registers, already held, and it runs from that pc: the rest of a call that
 * yielded there.
 */
export type CompiledRun = (
  args: readonly unknown[],
  inv: FuelBudget,
  resumeAt?: number,
) => unknown;

/**
 * Functions whose estimated bytecode (`estimateBytecode`) is larger than this
 * stay interpreted. V8's optimizing compiler (Turbofan) skips functions of
 * more than 60 KB of bytecode; above it a compiled function runs on V8's
 * mid-tier compiler, and far above it V8 takes seconds to compile it, while
 * specialized dispatch splits long functions into chunks.
 */
export const MAX_COMPILED_BYTECODE = 60 * 1024;

/**
 * An estimate of the V8 bytecode of `fn` compiled, in bytes, fitted to the
 * bytecode listings of the V8 in Deno 2.9 (`--print-bytecode`): about 35
 * bytes per `Call` and 18 per release, doubled where more than about 100
 * locals make every register operand wide. Within a few percent on the
 * benchmark programs; it only decides which functions are worth compiling.
 */
export function estimateBytecode(fn: LoadedFunction): number {
  let bytes = 40 * fn.registers + 100;
  let calls = 0, jumps = false;
  for (const ins of fn.code) {
    bytes += 18 * ((ins.entry?.length ?? 0) + (ins.after?.length ?? 0));
    switch (ins.op) {
      case DecodedOp.Ret:
        bytes += 6;
        break;
      case DecodedOp.Goto:
        bytes += 8;
        jumps = true;
        break;
      case DecodedOp.If:
        bytes += 28;
        jumps = true;
        break;
      default:
        // Past about 120 calls the feedback slot operands are wide.
        bytes += 28 + 3 * ins.argc + (ins.fresh ? 0 : 24) + (++calls > 120 ? 5 : 0);
    }
  }
  // A function with jumps can resume at one after a yield: a load per register.
  if (jumps) bytes += 6 * fn.registers;
  return fn.registers > 100 ? 2 * bytes : bytes;
}

/**
 * Block-entry releases allowed per code word. Registers are locals, so each
 * release is a statement. Releases after an instruction name only registers
 * the instruction names, so they are bounded by the code; releases on block
 * entry are written once per block, but a function with many exits that each
 * end the lives of many registers can have more of them than code words.
 * Past this bound the function stays interpreted, so generated source is
 * within a constant factor of the bytecode.
 */
export const MAX_ENTRY_RELEASES_PER_WORD = 1;

/** Whether `fn`'s block-entry releases are few enough to write out. */
function releasesFitSource(fn: LoadedFunction): boolean {
  return fn.entryReleaseCount <= MAX_ENTRY_RELEASES_PER_WORD * fn.words;
}

/** `x` as source, after checking that it is an integer in `[lo, hi)`. */
function int(x: number, lo: number, hi: number): string {
  if (!Number.isSafeInteger(x) || x < lo || x >= hi) {
    throw new RangeError(`compiled mode: ${x} is not an integer in [${lo}, ${hi})`);
  }
  return String(x);
}

/** Writes `fn` out as one JavaScript function, or returns null where it stays interpreted. */
export function compile(fn: LoadedFunction, helpers: CompiledHelpers): CompiledRun | null {
  const code = fn.code;
  const n = code.length;
  if (!releasesFitSource(fn) || estimateBytecode(fn) > MAX_COMPILED_BYTECODE) return null;
  const R = fn.registers;
  const slots = fn.template.length;
  const reg = (r: number) => `r${int(r, 0, R)}`;
  // Operands: registers are locals, every other slot (constant, immediate, %vm, %void,
  // function reference) a closure constant bound from the template.
  const usedSlots = new Set<number>();
  const operand = (s: number) => {
    if (s < R) return reg(s);
    usedSlots.add(s);
    return `s${int(s, R, slots)}`;
  };
  const calleeIndex = new Map<unknown, number>();
  const callees: unknown[] = [];
  const callee = (f: unknown) => {
    let i = calleeIndex.get(f);
    if (i === undefined) {
      i = callees.length;
      callees.push(f);
      calleeIndex.set(f, i);
    }
    return `c${i}`;
  };
  // `typeof x === "object"` is true for null too; the helpers accept null. The test
  // keeps each helper call off the path of primitive values, where V8 then drops it.
  const release = (list: Int32Array | null) => {
    let out = "";
    if (list === null) return out;
    for (const r of list) {
      const x = reg(r);
      out += `if (typeof ${x} === "object") release(${x}); ${x} = undefined;\n`;
    }
    return out;
  };

  const targets = new Set<number>();
  for (let pc = 0; pc < n; pc++) {
    const ins = code[pc];
    if (ins.op === DecodedOp.Goto || ins.op === DecodedOp.If) {
      targets.add(Number(int(pc + ins.jump, 0, n)));
    }
  }
  const loop = targets.size > 0;
  const jump = (target: number) => `pc = ${int(target, 0, n)}; continue;`;
  // A backward jump charges the instructions from its target to itself; `pc` names it if
  // the budget throws.
  const charge = (pc: number, offset: number) =>
    offset >= 0
      ? ""
      : `pc = ${int(pc, 0, n)}; if ((inv.budget -= ${
        int(1 - offset, 2, n + 1)
      }) < 0) inv.refill(); `;

  let body = "";
  for (let pc = 0; pc < n; pc++) {
    const ins = code[pc];
    if (loop && (pc === 0 || targets.has(pc))) body += `case ${int(pc, 0, n)}:\n`;
    body += release(ins.entry);
    switch (ins.op) {
      case DecodedOp.Ret:
        body += `v = ${operand(ins.a0)}; break ret;\n`;
        continue;
      case DecodedOp.Goto:
        body += release(ins.after) + charge(pc, ins.jump) + jump(pc + ins.jump) + "\n";
        continue;
      case DecodedOp.If:
        body += `pc = ${int(pc, 0, n)}; v = truthy(${operand(ins.a0)});\n${
          release(ins.after)
        }if (!v) { ${charge(pc, ins.jump)}${jump(pc + ins.jump)} }\n`;
        continue;
    }
    const call = `${callee(ins.fn)}(${Array.from(ins.args, operand).join(", ")})`;
    // `pc` is current before anything can throw: errors and parking name the instruction.
    body += `pc = ${int(pc, 0, n)}; `;
    // An object result may be a Promise (`hold`/`drop` throw PARK: the rest of the call runs
    // in the interpreter) or a VMObject (the register becomes a holder). Primitives own nothing.
    if (ins.dst < 0) {
      body += `v = ${call}; if (typeof v === "object") drop(v);\n`;
    } else if (ins.fresh) {
      // Liveness guarantees the register is empty: no old value to release, and the result
      // goes straight into it (if it is a Promise, `park` empties the register again).
      const d = reg(ins.dst);
      body += `${d} = ${call}; if (typeof ${d} === "object") hold(${d});\n`;
    } else {
      const d = reg(ins.dst);
      body += `v = ${call}; if (typeof v === "object") hold(v);\n` +
        `old = ${d}; ${d} = v; if (typeof old === "object") release(old);\n`;
    }
    body += release(ins.after);
  }

  const registers = Array.from({ length: R }, (_, r) => reg(r));
  const all = `[${registers.join(", ")}]`;
  const numArgs = fn.info.numArgs;
  const declarations = registers.map((x, r) => (r < numArgs ? `${x} = args[${r}]` : x));
  let entry = "";
  for (let r = 0; r < numArgs; r++) {
    const x = reg(r);
    entry += `if (typeof ${x} === "object") retain(${x});\n`;
  }
  if (loop) {
    // Resuming at a jump target after a yield: every register comes back, holds and all.
    let resume = "";
    for (let r = numArgs; r < R; r++) resume += `${reg(r)} = args[${r}]; `;
    entry = `if (resumeAt === undefined) {\n${entry}} else { ${resume}pc = resumeAt; }\n`;
  }
  let teardown = "";
  for (const x of registers) teardown += `if (typeof ${x} === "object") release(${x});\n`;
  const bindings = [
    ...callees.map((_, i) => `const c${i} = callees[${i}];`),
    ...[...usedSlots].map((s) => `const s${int(s, R, slots)} = template[${s}];`),
  ].join("\n");
  const source = `"use strict";
const hold = h.hold, drop = h.drop, retain = h.retain, release = h.release, disown = h.disown;
const keepResult = h.keepResult;
const truthy = h.isTruthy;
${bindings}
return function compiled(args, inv, resumeAt) {
  let ${declarations.length > 0 ? declarations.join(", ") + ", " : ""}v, old, pc = 0;
${entry}  try {
    ret: {
${loop ? "for (;;) {\nswitch (pc) {\n" : ""}${body}${
    loop ? '}\nthrow new Error("fell off the end");\n}\n' : ""
  }    }
  } catch (e) {
    if (e === PARK) return h.park(fn, pc, ${all});
    if (e === YIELD) return h.yielded(fn, pc, ${all});
    throw h.fail(fn, pc, e, ${all});
  }
  // Ret: every register is released; the result survives, floating, as in the interpreter.
  const held = typeof v === "object";
  if (held) keepResult(v);
${teardown}  if (held) disown(v);
  return v;
};`;
  // Null where this realm forbids eval (CSP; tried once per realm): the interpreter runs it.
  const factory = makeFunction(["callees", "template", "fn", "h", "PARK", "YIELD"], source);
  if (factory === null) return null;
  const run = factory(callees, fn.template, fn, helpers, PARK, YIELD) as CompiledRun;
  fn.sourceLength += source.length;
  return run;
}
