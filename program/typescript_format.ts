/**
 * `as_typescript()`: a TypeScript module that rebuilds an executable with
 * `ExecBuilder` (TVM's `as_python`, for Deno), such that the rebuilt
 * executable's `save()` is byte-identical to the original's:
 *
 * - the function table is replayed with `declare_function`, in table order,
 *   so every entry (VM or packed) gets its original index whatever order the
 *   program declared, defined or called them in;
 * - the constant pool is replayed with `convert_constant`, in pool order;
 * - VM function bodies are emitted in code order (by first instruction), which
 *   need not be table order: a function declared before the functions that
 *   call it sits early in the table but late in the code.
 *
 * A loaded executable may hold what `ExecBuilder` cannot write: registers not
 * numbered in order of first use (`get()` always formalizes), two equal
 * constants (`convert_constant` shares one entry), code that belongs to no
 * function, a NaN constant with a payload (everything else the verifier
 * accepts, the builder can write). Such an executable is written as its saved bytes
 * (`Executable.load(...)`), with a comment saying why, so the round trip
 * stays byte-identical for every executable.
 *
 * @module
 */

import { ArgKind, argKind, argValue, Opcode, VM_REGISTER, VOID_REGISTER } from "./bytecode.ts";
import { InstructionCursor } from "./decoder.ts";
import { saveProgram } from "./serialize.ts";
import { DataType, type NumberArray, type TensorDType } from "../ground/dtype.ts";
import type { ConstantValue, FunctionInfo, ProgramData } from "./program_data.ts";
import { NDArray } from "../devices/ndarray.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";

/** Options of `as_typescript()`. */
export interface TypeScriptOptions {
  /** Where the generated module imports relaxvm from; default `"jsr:@relaxvm/relaxvm"`. */
  importFrom?: string;
}

function numberLiteral(v: number): string {
  if (Object.is(v, -0)) return "-0";
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "Infinity";
  if (v === -Infinity) return "-Infinity";
  return String(v);
}

function tensorLiteral(t: NDArray, used: Set<string>): string {
  used.add("tensor");
  const options = `{ shape: [${t.shape.join(", ")}], dtype: "${t.dtype}" }`;
  const values = t.dataSync();
  if (values instanceof BigInt64Array) {
    return `tensor(new BigInt64Array([${
      Array.from(values, (v) => `${v}n`).join(", ")
    }]), ${options})`;
  }
  if (t.dtype === "float16" || t.dtype === "bfloat16") {
    // Their values are float32 values, written so on any runtime; tensor() rounds them back
    // to the same bits (NaN to the canonical NaN, which notBuildable made sure they are).
    const list = Array.from(values as NumberArray, numberLiteral).join(", ");
    return `tensor(new Float32Array([${list}]), ${options})`;
  }
  const ctor = values.constructor.name;
  // Numbers print and parse back to the same bits, except NaN, whose payload
  // would be lost: a tensor holding NaN is written as raw bytes instead.
  const data = (values as NumberArray).some((v) => Number.isNaN(v))
    ? `new ${ctor}(new Uint8Array([${new Uint8Array(values.buffer).join(", ")}]).buffer)`
    : `new ${ctor}([${Array.from(values as NumberArray, numberLiteral).join(", ")}])`;
  return `tensor(${data}, ${options})`;
}

/** The NaN a float16 or bfloat16 tensor gets from tensor(NaN): other NaN bits cannot be written. */
const CANONICAL_NAN: Partial<Record<TensorDType, number>> = { float16: 0x7e00, bfloat16: 0x7fc0 };

/** Whether a 16-bit float tensor holds a NaN that `tensor()` would not give back bit for bit. */
function hasOddNaN(t: NDArray): boolean {
  const canonical = CANONICAL_NAN[t.dtype];
  if (canonical === undefined) return false;
  const bits = new Uint16Array(bytesOf(t).slice().buffer);
  const exponent = t.dtype === "float16" ? 0x7c00 : 0x7f80;
  return bits.some((b) =>
    (b & exponent) === exponent && (b & ~exponent & 0x7fff) !== 0 && b !== canonical
  );
}

function constantLiteral(value: ConstantValue, used: Set<string>): string {
  if (value instanceof NDArray) return tensorLiteral(value, used);
  if (value instanceof ShapeTuple) {
    used.add("shape");
    return `shape(${[...value].join(", ")})`;
  }
  if (value instanceof DataType) {
    used.add("dtype");
    return `dtype("${value}")`;
  }
  if (typeof value === "string") return JSON.stringify(value);
  return numberLiteral(value);
}

function registerExpr(reg: number): string {
  if (reg === VOID_REGISTER) return "ib.void_arg()";
  if (reg === VM_REGISTER) return "ib.vm_state()";
  return `ib.r(${reg})`;
}

function operandExpr(ex: ProgramData, word: number): string {
  const v = argValue(word);
  switch (argKind(word)) {
    case ArgKind.Register:
      return registerExpr(v);
    case ArgKind.Immediate:
      return `ib.imm(${v})`;
    case ArgKind.ConstIdx:
      return `ib.c(${v})`;
    case ArgKind.FuncIdx:
      return `ib.f(${JSON.stringify(ex.functions[v].name)})`;
  }
}

/** The module text. */
export function formatTypeScript(ex: ProgramData, options: TypeScriptOptions = {}): string {
  const from = JSON.stringify(options.importFrom ?? "jsr:@relaxvm/relaxvm");
  const reason = notBuildable(ex);
  if (reason !== null) return bytesModule(ex, reason, from);
  const used = new Set<string>(["ExecBuilder"]);
  const body: string[] = ["const ib = new ExecBuilder();"];
  body.push("// The function table and constant pool, in their original order.");
  for (const f of ex.functions) {
    body.push(`ib.declare_function(${JSON.stringify(f.name)}, "${f.kind}");`);
  }
  for (const c of ex.constants) body.push(`ib.convert_constant(${constantLiteral(c, used)});`);
  const c = new InstructionCursor(ex);
  body.push("// The VM functions, in code order.");
  for (const f of vmFunctionsInCodeOrder(ex)) {
    const opts = [`num_inputs: ${f.numArgs}`];
    if (f.paramNames.length > 0) opts.push(`param_names: ${JSON.stringify(f.paramNames)}`);
    body.push("", `ib.function(${JSON.stringify(f.name)}, { ${opts.join(", ")} }, () => {`);
    for (let i = f.start; i < f.end; i++) {
      c.seek(i);
      switch (c.op) {
        case Opcode.Call: {
          const args: string[] = [];
          for (let k = 0; k < c.argCount; k++) args.push(operandExpr(ex, c.argWord(k)));
          const dst = c.dst === VOID_REGISTER ? "" : `, { dst: ${registerExpr(c.dst)} }`;
          body.push(
            `  ib.emit_call(${JSON.stringify(ex.functions[c.func].name)}, [${
              args.join(", ")
            }]${dst});`,
          );
          break;
        }
        case Opcode.Ret:
          body.push(`  ib.emit_ret(${registerExpr(c.register)});`);
          break;
        case Opcode.Goto:
          body.push(`  ib.emit_goto(${c.jump});`);
          break;
        case Opcode.If:
          body.push(`  ib.emit_if(${registerExpr(c.register)}, ${c.jump});`);
          break;
      }
    }
    body.push("});");
  }
  body.push("", `export const ex = ib.get(${ex.liveness ? "" : "{ liveness: false }"});`);
  const names = ["ExecBuilder", "dtype", "shape", "tensor"].filter((n) => used.has(n));
  return `${HEADER}\nimport { ${names.join(", ")} } from ${from};\n\n${body.join("\n")}\n`;
}

const HEADER = "// Generated by relaxvm's Executable.as_typescript().";

/** The VM functions, ordered by where their code starts. */
function vmFunctionsInCodeOrder(ex: ProgramData): FunctionInfo[] {
  return ex.functions.filter((f) => f.kind === "vm").sort((a, b) => a.start - b.start);
}

/**
 * Why `ExecBuilder` cannot write `ex` byte for byte, or null when it can.
 * The verifier already holds every executable to the builder's function
 * table rules (packed entries without code fields, parameter names for every
 * input or none, register files no larger than the code needs).
 */
function notBuildable(ex: ProgramData): string | null {
  let next = 0;
  for (const f of vmFunctionsInCodeOrder(ex)) {
    if (f.start !== next) return `instructions ${next}..${f.start - 1} belong to no function`;
    next = f.end;
  }
  if (next !== ex.instrOffset.length) {
    return `instructions ${next}..${ex.instrOffset.length - 1} belong to no function`;
  }
  const seen: ConstantValue[] = [];
  for (const [i, value] of ex.constants.entries()) {
    if (typeof value === "number" && Number.isNaN(value) && !isCanonicalNaN(value)) {
      return `constant c[${i}] is a NaN with a payload`;
    }
    if (value instanceof NDArray && hasOddNaN(value)) {
      return `constant c[${i}] is a ${value.dtype} tensor holding a NaN with a payload`;
    }
    const same = seen.findIndex((other) => sameConstant(other, value));
    if (same >= 0) return `constants c[${same}] and c[${i}] are equal`;
    seen.push(value);
  }
  const c = new InstructionCursor(ex);
  for (const f of ex.functions) {
    if (f.kind === "vm" && !inFirstUseOrder(c, f)) {
      return `the registers of @${f.name} are not numbered in order of first use`;
    }
  }
  return null;
}

/**
 * Whether formalize would leave `f` as it is: registers after the inputs are
 * numbered in order of first use, visiting each instruction's registers as
 * formalize does (operands, the read field, the written register), and the
 * register file holds exactly those.
 */
function inFirstUseOrder(c: InstructionCursor, f: FunctionInfo): boolean {
  const seen = new Uint8Array(f.registerFileSize);
  seen.fill(1, 0, Math.min(f.numArgs, seen.length));
  let next = f.numArgs, ordered = true;
  const visit = (reg: number) => {
    if (reg < 0 || seen[reg] === 1) return;
    if (reg !== next) ordered = false;
    seen[reg] = 1;
    next++;
  };
  for (let i = f.start; i < f.end && ordered; i++) {
    c.seek(i).forEachRead(visit);
    visit(c.written());
  }
  return ordered && next === f.registerFileSize;
}

function isCanonicalNaN(v: number): boolean {
  const bits = new Uint32Array(new Float64Array([v]).buffer);
  const canonical = new Uint32Array(new Float64Array([NaN]).buffer);
  return bits[0] === canonical[0] && bits[1] === canonical[1];
}

/** `convert_constant`'s notion of equal constants (builder/constant_pool.ts). */
function sameConstant(a: ConstantValue, b: ConstantValue): boolean {
  if (typeof a === "number" || typeof b === "number") return Object.is(a, b);
  if (typeof a === "string" || typeof b === "string") return a === b;
  if (a instanceof ShapeTuple && b instanceof ShapeTuple) return a.equals(b);
  if (a instanceof DataType && b instanceof DataType) return a.equals(b);
  if (a instanceof NDArray && b instanceof NDArray) {
    if (a.dtype !== b.dtype || a.shape.join() !== b.shape.join()) return false;
    const x = bytesOf(a), y = bytesOf(b);
    return x.length === y.length && x.every((byte, i) => byte === y[i]);
  }
  return false;
}

/** The tensor's element bytes as stored. */
function bytesOf(t: NDArray): Uint8Array {
  const v = t.cpuView();
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

/** The module for an executable the builder cannot write: its saved bytes, in base64. */
function bytesModule(ex: ProgramData, reason: string, from: string): string {
  const bytes = saveProgram(ex);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  const base64 = btoa(binary).replace(/.{1,96}/g, (line) => `  "${line}" +\n`);
  return `${HEADER}
// ExecBuilder cannot rebuild this executable byte for byte (${reason}),
// so it is embedded as the bytes of its save(); \`relaxvm dump --text\` lists its code.
import { Executable } from ${from};

const base64 =
${base64}  "";
export const ex = Executable.load(Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)));
`;
}
