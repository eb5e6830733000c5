/**
 * The text dumps: `stats()` and `as_text()` in TVM's layout. One formatter
 * per operand kind, shared by the dumps, error messages and traces.
 *
 * @module
 */

import { ArgKind, argKind, argValue, Opcode, VM_REGISTER, VOID_REGISTER } from "./bytecode.ts";
import { InstructionCursor } from "./decoder.ts";
import { DataType } from "../ground/dtype.ts";
import { printable } from "../ground/printable.ts";
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

const utf8 = new TextEncoder();

/**
 * `s` padded with spaces to `width` UTF-8 bytes, as TVM's `std::setw` on a
 * `std::string` pads (a name such as `ext.café` takes 9 of the 16).
 */
function padBytes(s: string, width: number): string {
  // Pure ASCII, the common case, counts the same in characters and bytes.
  // deno-lint-ignore no-control-regex
  const bytes = /^[\x00-\x7f]*$/.test(s) ? s.length : utf8.encode(s).length;
  return bytes >= width ? s : s + " ".repeat(width - bytes);
}

/** The instruction under `c` as one line of `as_text()`, without indentation. */
function cursorText(p: ProgramData, c: InstructionCursor): string {
  const text = c.info.text;
  switch (c.op) {
    case Opcode.Call: {
      const args: string[] = [];
      for (let k = 0; k < c.argCount; k++) args.push(operandText(p, c.argWord(k)));
      return `${text.padEnd(6)}${padBytes(functionNameAt(p, c.func), 16)} in: ${
        padBytes(args.join(", "), 12)
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

/**
 * Instruction `index` (global) as the builder wrote it, with the register numbers it used
 * before formalize renumbered them (`FunctionInfo.builtRegisters`); `""` when they are the same
 * or unknown (a loaded executable).
 */
export function builtInstructionText(p: ProgramData, index: number): string {
  const f = p.functions.find((f) => f.kind === "vm" && f.start <= index && index < f.end);
  const built = f?.builtRegisters;
  if (built === undefined) return "";
  const from = p.instrOffset[index];
  const to = index + 1 < p.instrOffset.length ? p.instrOffset[index + 1] : p.instrData.length;
  const copy: ProgramData = {
    ...p,
    instrOffset: new Uint32Array([0]),
    instrData: p.instrData.slice(from, to),
  };
  const c = new InstructionCursor(copy).seek(0);
  c.renameRegisters((r) => (r < 0 || r >= built.length ? r : built[r]));
  const text = cursorText(copy, c);
  return text === instructionText(p, index) ? "" : text;
}

/** Instruction `index` (global) as one line of `as_text()`, without indentation. */
export function instructionText(p: ProgramData, index: number): string {
  return cursorText(p, new InstructionCursor(p).seek(index));
}

/**
 * A C++ `std::ostringstream` as TVM's `Stats()` uses it: writes overwrite
 * from the put position, and `seekp(-2)` steps back over a ", " (or over
 * the last two characters written, whatever they are: for an empty shape
 * TVM prints `shapetupl]`).
 */
class SeekableText {
  #chars: string[] = [];
  #pos = 0;
  write(s: string): void {
    for (const ch of s) this.#chars[this.#pos++] = ch;
  }
  seekBack2(): void {
    this.#pos = Math.max(0, this.#pos - 2);
  }
  toString(): string {
    return this.#chars.join("");
  }
}

/** How a constant appears in `stats()` (an empty shape included, see `formatStats`). */
export function constantSummary(value: ConstantValue): string {
  const out = new SeekableText();
  writeConstantSummary(out, value);
  out.seekBack2();
  return out.toString().slice(0, -2);
}

/** Writes `value` and ", " as TVM's `Stats()` does. */
function writeConstantSummary(out: SeekableText, value: ConstantValue): void {
  if (value instanceof NDArray && value.shape.length > 0) {
    out.write("[");
    for (const d of value.shape) out.write(`${d}, `);
    out.seekBack2();
    out.write("], ");
  } else if (value instanceof ShapeTuple) {
    out.write("shapetuple[");
    for (const d of value) out.write(`${d}, `);
    out.seekBack2();
    out.write("], ");
  } else {
    out.write(`${constantText(value)}, `);
  }
}

function constantText(value: ConstantValue): string {
  if (value instanceof NDArray) return "scalar";
  if (value instanceof ShapeTuple) return `shapetuple[${[...value].join(", ")}]`;
  if (value instanceof DataType) return value.toString();
  // TVM writes a string constant's bytes as they are, between quotes; control characters
  // are escaped here (ground/printable.ts: a dump never carries raw terminal escapes).
  if (typeof value === "string") return `"${printable(value)}"`;
  if (typeof value === "bigint") return String(value);
  return Object.is(value, -0) ? "-0" : String(value);
}

/**
 * `stats()`: the constant pool and the globals, byte for byte as TVM 0.27
 * prints them (`VMExecutable::Stats`), quirks included: an empty shape
 * prints as `shapetupl]`. TVM cannot print a `Float` constant (it throws
 * "Unsupported constant pool type float"); relaxvm prints the number.
 * Names and strings holding control characters are the one deliberate
 * difference: relaxvm escapes them (`\n`, `\x1b`), TVM writes them raw.
 */
export function formatStats(ex: ProgramData): string {
  const out = new SeekableText();
  out.write("Relax VM executable statistics:\n");
  out.write(`  Constant pool (# ${ex.constants.length}): [`);
  for (const c of ex.constants) writeConstantSummary(out, c);
  if (ex.constants.length > 0) out.seekBack2();
  out.write("]\n");
  out.write(`  Globals (#${ex.functions.length}): [`);
  for (const f of ex.functions) out.write(`${printable(f.name)}, `);
  if (ex.functions.length > 0) out.seekBack2();
  out.write("]\n");
  return out.toString();
}

/** TVM's `std::to_string` of a register in `as_python()`: `%void` and `%vm` as their numbers. */
function pythonRegister(reg: number): string {
  if (reg === VOID_REGISTER) return String(2 ** 54);
  if (reg === VM_REGISTER) return "18014398509481985"; // 2^54 + 1: not a float64
  return String(reg);
}

function pythonFunctionName(p: ProgramData, index: number): string {
  const f = p.functions[index];
  return f === undefined ? `ib.unknown_func_index(${index})` : `"${printable(f.name)}"`;
}

function pythonOperand(p: ProgramData, word: number): string {
  const value = argValue(word);
  switch (argKind(word)) {
    case ArgKind.Register:
      return value === VM_REGISTER ? "ib.r(vm)" : `ib.r(${pythonRegister(value)})`;
    case ArgKind.Immediate:
      return `ib.imm(${value})`;
    case ArgKind.ConstIdx:
      return `ib.c(${value})`;
    case ArgKind.FuncIdx:
      return `ib.f(${pythonFunctionName(p, value)})`;
  }
}

/**
 * `as_python()`: the listing TVM 0.27 prints (`VMExecutable::AsPython`),
 * byte for byte — Python that rebuilds the VM functions with TVM's
 * `ExecBuilder` (as TVM prints it, it names the builder `rx.Builder()` and
 * leaves out parameter names and constants' values). Names with control
 * characters are escaped, as in `as_text()`.
 */
export function formatPython(ex: ProgramData): string {
  const c = new InstructionCursor(ex);
  let out = "ib = rx.Builder()\n";
  for (const f of ex.functions) {
    if (f.kind !== "vm") continue;
    out += `with ib.function("${printable(f.name)}", num_inputs=${f.numArgs}):\n`;
    for (let i = f.start; i < f.end; i++) {
      c.seek(i);
      switch (c.op) {
        case Opcode.Call: {
          const args: string[] = [];
          for (let k = 0; k < c.argCount; k++) args.push(pythonOperand(ex, c.argWord(k)));
          const dst = c.dst === VOID_REGISTER ? "" : `, dst=ib.r(${pythonRegister(c.dst)})`;
          out += `    ib.emit_call(${pythonFunctionName(ex, c.func)}, args=[${
            args.join(", ")
          }]${dst})\n`;
          break;
        }
        case Opcode.Ret:
          out += `    ib.emit_ret(ib.r(${pythonRegister(c.register)}))\n`;
          break;
        case Opcode.Goto:
          out += `    ib.emit_goto(${c.jump})\n`;
          break;
        case Opcode.If:
          out += `    ib.emit_if(ib.r(${pythonRegister(c.register)}), ${c.jump})\n`;
          break;
      }
    }
  }
  return out;
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
