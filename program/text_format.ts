/**
 * The text dumps: `stats()` and `as_text()` in TVM's layout. One formatter
 * per operand kind, shared by the dumps, error messages and traces.
 *
 * @module
 */

import { ArgKind, argKind, argValue, Opcode, VM_REGISTER, VOID_REGISTER } from "./bytecode.ts";
import { InstructionCursor } from "./decoder.ts";
import { DataType } from "../ground/dtype.ts";
import { printable, quoted } from "../ground/printable.ts";
import { computeReleases } from "./liveness.ts";
import { NDArray } from "../devices/ndarray.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";
import type { ConstantValue, FunctionInfo, ProgramData } from "./program_data.ts";

/** Options of `as_text()`. */
export interface TextOptions {
  /** Show where the VM releases values after their last use (liveness). */
  releases?: boolean;
}

/** `%3`, `%void`, `%vm`. */
export function registerText(reg: number): string {
  if (reg === VOID_REGISTER) return "%void";
  if (reg === VM_REGISTER) return "%vm";
  return `%${reg}`;
}

/** The name of function-table entry `index`, or a marker for a bad index. */
export function functionNameAt(p: ProgramData, index: number): string {
  const f = p.functions[index];
  return f === undefined ? `unknown_func_index(${index})` : printable(f.name);
}

/** One operand word as TVM prints it: `%3`, `i5`, `c[0]`, `f[name]`. */
export function operandText(p: ProgramData, word: number): string {
  const value = argValue(word);
  switch (argKind(word)) {
    case ArgKind.Register:
      return registerText(value);
    case ArgKind.Immediate:
      return `i${value}`;
    case ArgKind.ConstIdx:
      return `c[${value}]`;
    case ArgKind.FuncIdx:
      return `f[${functionNameAt(p, value)}]`;
  }
}

/** The instruction under `c` as one line of `as_text()`, without indentation. */
function cursorText(p: ProgramData, c: InstructionCursor): string {
  const text = c.info.text;
  switch (c.op) {
    case Opcode.Call: {
      const args: string[] = [];
      for (let k = 0; k < c.argCount; k++) args.push(operandText(p, c.argWord(k)));
      return `${text.padEnd(6)}${functionNameAt(p, c.func).padEnd(16)} in: ${
        args.join(", ").padEnd(12)
      } dst: ${registerText(c.dst)}`;
    }
    case Opcode.Ret:
      return `${"ret ".padEnd(6)}${registerText(c.register)}`;
    case Opcode.Goto:
      return `${text.padEnd(6)}${c.jump}`;
    case Opcode.If:
      return `${text.padEnd(6)}${registerText(c.register)}, ${c.jump}`;
  }
}

/** Instruction `index` (global) as one line of `as_text()`, without indentation. */
export function instructionText(p: ProgramData, index: number): string {
  return cursorText(p, new InstructionCursor(p).seek(index));
}

/** How a constant appears in `stats()`. */
export function constantSummary(value: ConstantValue): string {
  if (value instanceof NDArray) {
    return value.shape.length === 0 ? "scalar" : `[${value.shape.join(", ")}]`;
  }
  if (value instanceof ShapeTuple) return `shapetuple[${[...value].join(", ")}]`;
  if (value instanceof DataType) return value.toString();
  if (typeof value === "string") return quoted(value);
  return Object.is(value, -0) ? "-0" : String(value);
}

/** `stats()`: the constant pool and the globals, as TVM prints them. */
export function formatStats(ex: ProgramData): string {
  const constants = ex.constants.map(constantSummary).join(", ");
  const globals = ex.functions.map((f) => printable(f.name)).join(", ");
  return "Relax VM executable statistics:\n" +
    `  Constant pool (# ${ex.constants.length}): [${constants}]\n` +
    `  Globals (#${ex.functions.length}): [${globals}]\n`;
}

function releaseNote(regs: readonly number[] | null): string {
  return regs === null || regs.length === 0 ? "" : `release ${regs.map(registerText).join(", ")}`;
}

function formatFunction(
  ex: ProgramData,
  c: InstructionCursor,
  f: FunctionInfo,
  options: TextOptions,
): string {
  if (f.kind === "packed") return `@${printable(f.name)} packed_func;\n\n`;
  let out = `@${printable(f.name)}:\n`;
  const releases = options.releases ? computeReleases(ex, f) : null;
  for (let i = f.start; i < f.end; i++) {
    const pc = i - f.start;
    if (releases !== null) {
      const entry = releaseNote(releases.onEntry[pc]);
      if (entry !== "") out += `  # ${entry}\n`;
    }
    out += `  ${cursorText(ex, c.seek(i))}`;
    if (releases !== null) {
      const after = releaseNote(releases.after[pc]);
      if (after !== "") out += `  # then ${after}`;
    }
    out += "\n";
  }
  return out + "\n";
}

/** `as_text()`: every function of the table, one block each, in TVM's layout. */
export function formatText(ex: ProgramData, options: TextOptions = {}): string {
  const cursor = new InstructionCursor(ex);
  return ex.functions.map((f) => formatFunction(ex, cursor, f, options)).join("");
}
