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
 * The text is `deno fmt`-clean at any line width from 80 up (Deno's default
 * and relaxvm's 100): a call, array or object that fits in 80 columns is
 * written on one line, one that does not is written one item per line with
 * trailing commas — the layout `deno fmt` keeps as it is (it never joins a
 * list whose first item starts a new line) — and strings are quoted as it
 * quotes them.
 *
 * @module
 */

import { quoted } from "../ground/printable.ts";
import { ArgKind, argKind, argValue, Opcode, VM_REGISTER, VOID_REGISTER } from "./bytecode.ts";
import { InstructionCursor } from "./decoder.ts";
import { saveProgram } from "./serialize.ts";
import { DataType, type NumberArray, type TensorDType } from "../ground/dtype.ts";
import type { ConstantValue, FunctionInfo, ProgramData } from "./program_data.ts";
import { sameConstant, tensorBytes } from "./constant_equality.ts";
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

/** The widest line the text uses: `deno fmt`'s default, so any wider setting keeps it too. */
const WIDTH = 80;

/**
 * A piece of code the printer lays out: text that never breaks, or a list
 * (call arguments, array elements, object properties) between `open` and
 * `close`, after `head`.
 */
type Doc = string | List;

/** A list of items between brackets, written on one line or one item per line. */
interface List {
  readonly head: string;
  readonly open: "(" | "[" | "{";
  readonly items: readonly Doc[];
  readonly close: string;
}

const call = (head: string, ...items: Doc[]): List => ({ head, open: "(", items, close: ")" });
const array = (items: readonly Doc[], head = "", close = "]"): List => ({
  head,
  open: "[",
  items,
  close,
});
const object = (items: readonly Doc[], head = "", close = "}"): List => ({
  head,
  open: "{",
  items,
  close,
});

/** `doc` on one line. */
function flat(doc: Doc): string {
  if (typeof doc === "string") return doc;
  const inner = doc.items.map(flat).join(", ");
  if (doc.open === "{") return `${doc.head}{ ${inner} }${doc.close.slice(1)}`;
  return `${doc.head}${doc.open}${inner}${doc.close}`;
}

/**
 * `doc` at `indent` spaces, followed on its last line by `trailing`: on one
 * line when that fits in `WIDTH`, else one item per line (each laid out the
 * same way), with a trailing comma after each.
 */
function layout(doc: Doc, indent: number, trailing = ""): string {
  const pad = " ".repeat(indent);
  const line = flat(doc);
  if (typeof doc === "string" || indent + line.length + trailing.length <= WIDTH) {
    return `${pad}${line}${trailing}`;
  }
  const items = doc.items.map((item) => layout(item, indent + 2, ","));
  return `${pad}${doc.head}${doc.open}\n${items.join("\n")}\n${pad}${doc.close}${trailing}`;
}

/** A string literal as `deno fmt` writes it: double quotes, unless only single ones avoid escapes. */
function stringLiteral(text: string): string {
  if (text.includes('"') && !text.includes("'")) {
    return `'${quoted(text).slice(1, -1).replaceAll('\\"', '"')}'`;
  }
  return quoted(text);
}

function tensorLiteral(t: NDArray, used: Set<string>): Doc {
  used.add("tensor");
  const options = `{ shape: [${t.shape.join(", ")}], dtype: "${t.dtype}" }`;
  const values = t.dataSync();
  if (values instanceof BigInt64Array) {
    return call(
      "tensor",
      call("new BigInt64Array", array(Array.from(values, (v) => `${v}n`))),
      options,
    );
  }
  if (t.dtype === "float16" || t.dtype === "bfloat16") {
    // Their values are float32 values, written so on any runtime; tensor() rounds them back
    // to the same bits (NaN to the canonical NaN, which notBuildable made sure they are).
    const list = Array.from(values as NumberArray, numberLiteral);
    return call("tensor", call("new Float32Array", array(list)), options);
  }
  const ctor = values.constructor.name;
  // Numbers print and parse back to the same bits, except NaN, whose payload
  // would be lost: a tensor holding NaN is written as raw bytes instead.
  const data = (values as NumberArray).some((v) => Number.isNaN(v))
    ? call(
      `new ${ctor}`,
      {
        ...call("new Uint8Array", array([...new Uint8Array(values.buffer)].map(String))),
        close: ").buffer",
      } satisfies List,
    )
    : call(`new ${ctor}`, array(Array.from(values as NumberArray, numberLiteral)));
  return call("tensor", data, options);
}

/** The NaN a float16 or bfloat16 tensor gets from tensor(NaN): other NaN bits cannot be written. */
const CANONICAL_NAN: Partial<Record<TensorDType, number>> = { float16: 0x7e00, bfloat16: 0x7fc0 };

/** Whether a 16-bit float tensor holds a NaN that `tensor()` would not give back bit for bit. */
function hasOddNaN(t: NDArray): boolean {
  const canonical = CANONICAL_NAN[t.dtype];
  if (canonical === undefined) return false;
  const bits = new Uint16Array(tensorBytes(t).slice().buffer);
  const exponent = t.dtype === "float16" ? 0x7c00 : 0x7f80;
  return bits.some((b) =>
    (b & exponent) === exponent && (b & ~exponent & 0x7fff) !== 0 && b !== canonical
  );
}

function constantLiteral(value: ConstantValue, used: Set<string>): Doc {
  if (value instanceof NDArray) return tensorLiteral(value, used);
  if (value instanceof ShapeTuple) {
    used.add("shape");
    return call("shape", ...[...value].map(String));
  }
  if (value instanceof DataType) {
    used.add("dtype");
    return `dtype("${value}")`;
  }
  if (typeof value === "string") return stringLiteral(value);
  if (typeof value === "bigint") return `${value}n`;
  return numberLiteral(value);
}

function registerExpr(reg: number): string {
  if (reg === VOID_REGISTER) return "ib.void_arg()";
  if (reg === VM_REGISTER) return "ib.vm_state()";
  return `ib.r(${reg})`;
}

function operandExpr(ex: ProgramData, word: number): Doc {
  const v = argValue(word);
  switch (argKind(word)) {
    case ArgKind.Register:
      return registerExpr(v);
    case ArgKind.Immediate:
      return `ib.imm(${v})`;
    case ArgKind.ConstIdx:
      return `ib.c(${v})`;
    case ArgKind.FuncIdx:
      return call("ib.f", stringLiteral(ex.functions[v].name));
  }
}

/**
 * The most tensor elements a module writes, all constants together (2^24).
 * Every element is a literal in a JS array first: past about 2^27, V8 cannot
 * hold the array and the process dies; long before, the text is no use to read.
 */
const MAX_WRITTEN_ELEMENTS = 2 ** 24;

/** The module text. */
export function formatTypeScript(ex: ProgramData, options: TypeScriptOptions = {}): string {
  let elements = 0;
  for (const c of ex.constants) if (c instanceof NDArray) elements += c.size;
  if (elements > MAX_WRITTEN_ELEMENTS) {
    throw new RangeError(
      `as_typescript: the tensor constants hold ${elements} elements, more than the ` +
        `${MAX_WRITTEN_ELEMENTS} a module writes; save() the executable instead`,
    );
  }
  const from = stringLiteral(options.importFrom ?? "jsr:@relaxvm/relaxvm");
  const reason = notBuildable(ex);
  if (reason !== null) return bytesModule(ex, reason, from);
  const used = new Set<string>(["ExecBuilder"]);
  const body: string[] = ["const ib = new ExecBuilder();"];
  body.push("// The function table and constant pool, in their original order.");
  for (const f of ex.functions) {
    body.push(layout(call("ib.declare_function", stringLiteral(f.name), `"${f.kind}"`), 0, ";"));
  }
  for (const c of ex.constants) {
    body.push(layout(call("ib.convert_constant", constantLiteral(c, used)), 0, ";"));
  }
  const c = new InstructionCursor(ex);
  body.push("// The VM functions, in code order.");
  for (const f of vmFunctionsInCodeOrder(ex)) {
    const opts: Doc[] = [`num_inputs: ${f.numArgs}`];
    if (f.paramNames.length > 0) {
      opts.push(array(f.paramNames.map(stringLiteral), "param_names: "));
    }
    // The body is a block after the last argument; when the call's first line does not fit,
    // every argument goes on its own line and the block moves in with them.
    const head = call("ib.function", stringLiteral(f.name), object(opts));
    const open = flat(head).slice(0, -1) + ", () => {";
    let indent = 2;
    if (open.length <= WIDTH) {
      body.push("", open);
    } else {
      const items = head.items.map((item) => layout(item, 2, ","));
      body.push("", "ib.function(", ...items, "  () => {");
      indent = 4;
    }
    for (let i = f.start; i < f.end; i++) {
      c.seek(i);
      switch (c.op) {
        case Opcode.Call: {
          const args: Doc[] = [];
          for (let k = 0; k < c.argCount; k++) args.push(operandExpr(ex, c.argWord(k)));
          const items: Doc[] = [stringLiteral(ex.functions[c.func].name), array(args)];
          if (c.dst !== VOID_REGISTER) items.push(object([`dst: ${registerExpr(c.dst)}`]));
          body.push(layout(call("ib.emit_call", ...items), indent, ";"));
          break;
        }
        case Opcode.Ret:
          body.push(layout(call("ib.emit_ret", registerExpr(c.register)), indent, ";"));
          break;
        case Opcode.Goto:
          body.push(layout(call("ib.emit_goto", String(c.jump)), indent, ";"));
          break;
        case Opcode.If:
          body.push(
            layout(call("ib.emit_if", registerExpr(c.register), String(c.jump)), indent, ";"),
          );
          break;
      }
    }
    body.push(indent === 2 ? "});" : "  },\n);");
  }
  body.push("", `export const ex = ib.get(${ex.liveness ? "" : "{ liveness: false }"});`);
  // deno fmt sorts named imports case-insensitively.
  const names = ["dtype", "ExecBuilder", "shape", "tensor"].filter((n) => used.has(n));
  return `${HEADER}\n${importLines(names, from)}\n\n${body.join("\n")}\n`;
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
    if (typeof value === "bigint" && value < 2n ** 55n && value > -(2n ** 55n)) {
      // convert_constant makes such an integer an immediate, as TVM's builder does.
      return `constant c[${i}] is an Int that the builder writes as an immediate`;
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

/**
 * The import of `names` from `from`. `deno fmt` writes a named import on
 * one line when it fits the line width and one name per line when not,
 * whatever the input says, so a named import longer than 80 columns would
 * differ at widths 80 and 100: such an import takes the names from a
 * namespace import instead, which has nothing to break.
 */
function importLines(names: readonly string[], from: string): string {
  const named = `import { ${names.join(", ")} } from ${from};`;
  if (named.length <= WIDTH) return named;
  return `import * as relaxvm from ${from};\n\nconst { ${names.join(", ")} } = relaxvm;`;
}

/** The module for an executable the builder cannot write: its saved bytes, in base64. */
function bytesModule(ex: ProgramData, reason: string, from: string): string {
  const bytes = saveProgram(ex);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  const chunks = btoa(binary).match(/.{1,72}/g) ?? [];
  const base64 = layout(array(chunks.map((c) => `"${c}"`), "", '].join("")'), 0, ";");
  const load = layout(
    call(
      "export const ex = Executable.load",
      "Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))",
    ),
    0,
    ";",
  );
  return `${HEADER}
// ExecBuilder cannot rebuild this executable byte for byte (${reason}),
// so it is embedded as the bytes of its save(); \`relaxvm dump --text\` lists its code.
${importLines(["Executable"], from)}

const base64 = ${base64}
${load}
`;
}
