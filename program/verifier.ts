/**
 * The verifier: everything that can be wrong with a program's code,
 * collected (not stopping at the first), each problem with its function and
 * instruction index. One verifier serves both producers of code: the builder
 * runs it before formalize, so messages use the register numbers the user
 * wrote, and the loader runs it on what it read, reporting every problem.
 *
 * First the layout (do the words decode into instructions? see
 * `layoutProblems`) and the function table (do the functions' ranges fit
 * the code, without overlapping?); only code that passes both is decoded.
 * Then one small function per concern — control flow, operand ranges,
 * register use — reads each VM function through the decoder.
 *
 * @module
 */

import { ArgKind, MAX_OPERAND_VALUE, Opcode, VM_REGISTER } from "./bytecode.ts";
import { InstructionCursor, layoutProblems, NO_FIELD } from "./decoder.ts";
import type { CheckProblem } from "../ground/errors.ts";
import { printable } from "../ground/printable.ts";
import { DataType } from "../ground/dtype.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";
import { NDArray } from "../devices/ndarray.ts";
import type { FunctionInfo, ProgramData } from "./program_data.ts";
import { registerText } from "./text_format.ts";

/** The largest register file a function may ask for (2^24 registers). */
export const MAX_REGISTER_FILE = 1 << 24;

/**
 * The most inputs a VM function may take (2^16). Inputs cost a file no
 * bytes, but each is a register of every frame and a line of the checker's
 * warnings: a 200-byte file declaring 2^24 inputs took 6 s to load and as
 * long to construct a VM for (found by the bombs fuzz family).
 */
export const MAX_INPUTS = 1 << 16;

/** A problem, with the word of the code it is about (-1: none) for loaders to point at. */
export interface VerifierProblem extends CheckProblem {
  /** Position in `instrData` of the instruction concerned, or -1. */
  readonly word: number;
}

/** What the verifier found. */
export interface VerifyResult {
  /** Problems that make the program unusable, in program order. */
  readonly errors: VerifierProblem[];
  /** Suspicious but runnable things, as readable sentences. */
  readonly warnings: string[];
}

type Report = (pc: number, message: string) => void;

function checkControlFlow(c: InstructionCursor, f: FunctionInfo, report: Report): void {
  const n = f.end - f.start;
  if (n === 0) {
    report(-1, "has no instructions, so it falls off its end without ret");
    return;
  }
  for (let i = f.start; i < f.end; i++) {
    c.seek(i);
    const pc = i - f.start;
    const offset = c.jump;
    if (offset !== NO_FIELD) {
      const target = pc + offset;
      if (target < 0 || target >= n) {
        report(
          pc,
          `jumps by ${offset} to ${target}, outside the function (instructions 0..${n - 1})`,
        );
      } else if (offset === 0) {
        report(pc, `jumps by 0 to itself, which loops forever`);
      }
    }
    if (pc === n - 1 && c.fallsThrough) {
      report(pc, "can fall off the end of the function without ret");
    }
  }
}

function checkOperandRanges(
  c: InstructionCursor,
  p: ProgramData,
  f: FunctionInfo,
  report: Report,
): void {
  for (let i = f.start; i < f.end; i++) {
    c.seek(i);
    const pc = i - f.start;
    if (c.op === Opcode.Call) {
      const callee = p.functions[c.func];
      const n = c.argCount;
      // A JavaScript call takes about 120,000 arguments before V8 reports a stack overflow.
      if (n > MAX_INPUTS) report(pc, `passes ${n} operands, more than ${MAX_INPUTS}`);
      if (callee === undefined) {
        report(pc, `calls function index ${c.func}, which does not exist`);
      } else if (callee.kind === "vm" && callee.numArgs !== n) {
        report(
          pc,
          `calls @${printable(callee.name)} with ${n} argument${
            n === 1 ? "" : "s"
          }, but it takes ${callee.numArgs}`,
        );
      }
      const dst = c.dst;
      if (dst === VM_REGISTER) report(pc, "cannot write the result to %vm");
      else if (dst < VM_REGISTER) report(pc, `writes register ${dst}, which does not exist`);
      for (let k = 0; k < n; k++) {
        const v = c.argValue(k);
        switch (c.argKind(k)) {
          case ArgKind.Register:
            if (v < VM_REGISTER) report(pc, `reads register ${v}, which does not exist`);
            break;
          case ArgKind.Immediate:
            if (Math.abs(v) > MAX_OPERAND_VALUE) report(pc, `has an immediate out of range`);
            break;
          case ArgKind.ConstIdx:
            if (v < 0 || v >= p.constants.length) {
              report(pc, `reads constant c[${v}], but the pool has ${p.constants.length}`);
            }
            break;
          case ArgKind.FuncIdx:
            if (p.functions[v] === undefined) {
              report(pc, `refers to function index ${v}, which does not exist`);
            }
            break;
        }
      }
    } else {
      const reg = c.register;
      if (reg !== NO_FIELD && reg < 0) {
        report(pc, `needs a value register, not ${registerText(reg)}`);
      }
    }
  }
}

function checkRegisterUse(
  c: InstructionCursor,
  f: FunctionInfo,
  report: Report,
  warn: (m: string) => void,
): void {
  // Bitmaps, not Sets: this runs over every instruction of every build and load. But a file
  // may name register 2^24 - 1 in a function of two instructions (valid: the VM renumbers it),
  // and a bitmap of the whole file per function then cost 16 MiB of zeroing each (a 1 MB file
  // of such functions took 14 s): where the file is far larger than the code, a Set.
  const size = f.registerFileSize;
  const instructions = f.end - f.start;
  let isWritten: (reg: number) => boolean, markWritten: (reg: number) => void;
  if (size <= 4096 || size <= 16 * (instructions + f.numArgs)) {
    const bits = new Uint8Array(size).fill(1, 0, Math.min(f.numArgs, size));
    isWritten = (reg) => bits[reg] === 1;
    markWritten = (reg) => bits[reg] = 1;
  } else {
    const set = new Set<number>();
    isWritten = (reg) => reg < f.numArgs || set.has(reg);
    markWritten = (reg) => set.add(reg);
  }
  const usedInput = new Uint8Array(f.numArgs);
  let pc = 0;
  const read = (reg: number) => {
    if (reg < 0) return;
    if (reg >= size) {
      report(pc, `reads ${registerText(reg)}, outside the register file of ${size}`);
      return;
    }
    if (!isWritten(reg)) {
      const inputs = f.numArgs === 0 ? "none" : `%0..%${f.numArgs - 1}`;
      report(pc, `reads ${registerText(reg)} before any write (the inputs are ${inputs})`);
      markWritten(reg); // report each register once
    }
    if (reg < f.numArgs) usedInput[reg] = 1;
  };
  for (let i = f.start; i < f.end; i++) {
    c.seek(i);
    pc = i - f.start;
    c.forEachRead(read);
    const dst = c.written();
    if (dst >= size) report(pc, `writes ${registerText(dst)}, outside the register file`);
    else if (dst >= 0) markWritten(dst);
  }
  for (let r = 0; r < f.numArgs; r++) {
    if (usedInput[r] === 0) {
      warn(
        `@${f.name}: input ${registerText(r)}${
          f.paramNames[r] ? ` (${f.paramNames[r]})` : ""
        } is never used`,
      );
    }
  }
}

const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/**
 * Problems of the function table itself and against the code: every field
 * of an entry is in range for its kind (a packed function's code fields are
 * unused, so they must be 0), names are unique, ranges fit the code without
 * overlapping, register files are bounded. Returns which function owns each
 * instruction (-1: none).
 */
function checkFunctionTable(
  p: ProgramData,
  errors: VerifierProblem[],
): Int32Array {
  const count = p.instrOffset.length;
  const owner = new Int32Array(count).fill(-1);
  const names = new Set<string>();
  p.functions.forEach((f, fi) => {
    const name = typeof f.name === "string" ? f.name : "";
    const problem = (message: string) =>
      errors.push({ functionName: name, pc: -1, message, word: -1 });
    if (typeof f.name !== "string" || f.name === "") problem(`entry ${fi} has no name`);
    else if (names.has(f.name)) problem(`is in the function table twice`);
    names.add(name);
    if (f.kind !== "vm" && f.kind !== "packed") {
      problem(`has unknown kind ${JSON.stringify(String(f.kind))}`);
      return;
    }
    const fields = {
      start: f.start,
      end: f.end,
      numArgs: f.numArgs,
      registerFileSize: f.registerFileSize,
    };
    for (const [field, value] of Object.entries(fields)) {
      if (!isCount(value)) problem(`has ${field} ${String(value)}, not a non-negative integer`);
    }
    if (!Array.isArray(f.paramNames) || !f.paramNames.every((n) => typeof n === "string")) {
      problem("has parameter names that are not strings");
      return;
    }
    if (Object.values(fields).some((v) => !isCount(v))) return;
    if (f.kind === "packed") {
      // A packed function is resolved by name; fields that describe code must be unused.
      for (const [field, value] of Object.entries(fields)) {
        if (value !== 0) problem(`is a packed function but has ${field} ${value} (must be 0)`);
      }
      if (f.paramNames.length > 0) problem("is a packed function but has parameter names");
      return;
    }
    if (f.paramNames.length !== 0 && f.paramNames.length !== f.numArgs) {
      problem(`has ${f.paramNames.length} parameter names for ${f.numArgs} inputs`);
    }
    if (f.start > f.end || f.end > count) {
      problem(`spans instructions ${f.start}..${f.end}, outside the code (${count} instructions)`);
      return;
    }
    if (f.registerFileSize > MAX_REGISTER_FILE) {
      problem(`asks for ${f.registerFileSize} registers, more than ${MAX_REGISTER_FILE}`);
    }
    if (f.numArgs > MAX_INPUTS) {
      problem(`takes ${f.numArgs} inputs, more than ${MAX_INPUTS}`);
    }
    if (f.numArgs > f.registerFileSize) {
      problem(`has ${f.numArgs} inputs but ${f.registerFileSize} registers`);
    }
    for (let i = f.start; i < f.end; i++) {
      if (owner[i] !== -1) {
        problem(`shares instruction ${i} with @${printable(p.functions[owner[i]].name)}`);
        return;
      }
      owner[i] = fi;
    }
  });
  return owner;
}

/** Constants must be values a program can hold: numbers, int64s, strings, shapes, dtypes, CPU tensors. */
function checkConstants(p: ProgramData, errors: VerifierProblem[]): void {
  p.constants.forEach((c, i) => {
    const ok = typeof c === "number" || typeof c === "string" || c instanceof ShapeTuple ||
      (typeof c === "bigint" && c === BigInt.asIntN(64, c)) ||
      c instanceof DataType || (c instanceof NDArray && c.device.kind === "cpu" && !c.disposed);
    if (!ok) {
      errors.push({
        functionName: "",
        pc: -1,
        message:
          `constant c[${i}] is not a number, 64-bit bigint, string, shape, dtype or live CPU tensor`,
        word: -1,
      });
    }
  });
}

/**
 * A register file larger than the registers the code names would let a few
 * bytes of program ask for any amount of memory per call: the register file
 * must be what the code needs, at most the inputs or the highest register
 * named, plus one.
 */
function checkRegisterFileSize(c: InstructionCursor, f: FunctionInfo, report: Report): void {
  let highest = f.numArgs - 1;
  const widen = (r: number) => {
    if (r > highest) highest = r;
  };
  for (let i = f.start; i < f.end; i++) {
    c.seek(i).forEachRead(widen);
    widen(c.written());
  }
  if (f.registerFileSize > highest + 1) {
    report(
      -1,
      `declares ${f.registerFileSize} registers, but its inputs and code use ${highest + 1}`,
    );
  }
}

/**
 * Verifies a program: the layout of its code, its function table, and each
 * VM function's control flow, operands and register use.
 */
export function verifyProgram(p: ProgramData): VerifyResult {
  const errors: VerifierProblem[] = [];
  const warnings: string[] = [];
  const owner = checkFunctionTable(p, errors);
  checkConstants(p, errors);
  for (const lp of layoutProblems(p)) {
    const fi = lp.index >= 0 ? owner[lp.index] : -1;
    const f = fi >= 0 ? p.functions[fi] : undefined;
    errors.push({
      functionName: f?.name ?? "",
      pc: f === undefined ? -1 : lp.index - f.start,
      message: lp.message,
      word: lp.word,
    });
  }
  if (errors.length > 0) return { errors, warnings }; // the code cannot be decoded safely
  const cursor = new InstructionCursor(p);
  for (const f of p.functions) {
    if (f.kind !== "vm") continue;
    const start = errors.length;
    const report: Report = (pc, message) =>
      errors.push({
        functionName: f.name,
        pc,
        message,
        word: pc >= 0 ? p.instrOffset[f.start + pc] : -1,
      });
    checkRegisterFileSize(cursor, f, report);
    checkControlFlow(cursor, f, report);
    checkOperandRanges(cursor, p, f, report);
    checkRegisterUse(cursor, f, report, (m) => warnings.push(m));
    // Program order within the function; the sort is stable, so concerns keep their order.
    const found = errors.splice(start).sort((a, b) => a.pc - b.pc);
    errors.push(...found);
  }
  return { errors, warnings };
}

/** What `check` found. */
export interface CheckResult {
  /** Problems that make the executable unusable. */
  errors: CheckProblem[];
  /** Suspicious but runnable things, as readable sentences. */
  warnings: string[];
}

/**
 * Checks an executable's code: the verifier as a tool sees it. Lower-level
 * than `ExecBuilder.get()`, which runs the same verifier and throws
 * `CheckError` on errors.
 *
 * @example
 * ```ts
 * import { check, ExecBuilder } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("main", { num_inputs: 2 }, () => ib.emit_ret(ib.r(0)));
 * const { errors, warnings } = check(ib.get());
 * assertEquals(errors, []);
 * assertEquals(warnings, ["@main: input %1 is never used"]);
 * ```
 */
export function check(ex: ProgramData): CheckResult {
  const { errors, warnings } = verifyProgram(ex);
  return {
    errors: errors.map(({ functionName, pc, message }) => ({ functionName, pc, message })),
    warnings,
  };
}
