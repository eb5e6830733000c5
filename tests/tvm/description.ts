/**
 * Program descriptions: the JSON that both TVM's `ExecBuilder`
 * (tools/tvm/build_programs.py) and relaxvm's (`buildWithRelaxvm`) build,
 * and the tagged values that carry inputs and results between the two VMs
 * without rounding anything.
 *
 * ```text
 * program   { name, items: item[], runs?: [function, value[]][] }
 * item      ["declare", name, "packed" | "vm"]
 *           ["function", name, num_inputs, param_names | null, instruction[]]
 * instr     ["call", callee, operand[], dst | null]    dst: register number, "void" or "vm"
 *           ["ret", register]  ["goto", offset]  ["if", register, offset]
 * operand   ["r", n]  ["imm", "<decimal>"]  ["c", index]  ["f", name]  ["void"]  ["vm"]
 *           ["const", value]   (convert_constant: an int in TVM's immediate range is an immediate)
 * value     ["int", "<decimal>"]  ["float", "<16 hex digits: the float64's bits>"]
 *           ["str", s]  ["shape", [n...]]  ["dtype", "float32"]
 *           ["tensor", dtype, [dims], "<hex bytes>"]  ["array", value[]]
 *           ["none"]  ["closure"]  ["error", message]
 * ```
 *
 * @module
 */

import {
  Closure,
  DataType,
  dtype,
  ExecBuilder,
  type Executable,
  NDArray,
  type Operand,
  ShapeTuple,
  type TensorDType,
} from "../../mod.ts";

/** A tagged value (see the module comment). */
export type Value =
  | ["int", string]
  | ["float", string]
  | ["str", string]
  | ["shape", number[]]
  | ["dtype", string]
  | ["tensor", string, number[], string]
  | ["array", Value[]]
  | ["none"]
  | ["closure"]
  | ["error", string]
  | ["other", string];

/** An operand of a call. */
export type OperandDesc =
  | ["r", number]
  | ["imm", string]
  | ["c", number]
  | ["f", string]
  | ["void"]
  | ["vm"]
  | ["const", Value];

/** A destination or read register. */
export type RegisterDesc = number | "void" | "vm";

/** One instruction. */
export type InstructionDesc =
  | ["call", string, OperandDesc[], RegisterDesc | null]
  | ["ret", RegisterDesc]
  | ["goto", number]
  | ["if", RegisterDesc, number];

/** A declaration or a function definition, in builder order. */
export type ItemDesc =
  | ["declare", string, "packed" | "vm"]
  | ["function", string, number, string[] | null, InstructionDesc[]];

/** A program: what to build, and what to run in both VMs. */
export interface ProgramDesc {
  name: string;
  /** What to build (absent: only `relaxvm_bytes`, for TVM to load and print). */
  items?: ItemDesc[];
  runs?: [string, Value[]][];
  /** The file relaxvm wrote for it (hex), for TVM to load and run as well. */
  relaxvm_bytes?: string;
}

/** What TVM made of a description (tools/tvm/build_programs.py). */
export interface TvmOutput {
  name: string;
  build_error?: string;
  bytes?: string;
  as_text?: string;
  as_python?: string;
  stats?: string;
  stats_error?: string;
  load_error?: string;
  relaxvm_loaded?: boolean;
  relaxvm_load_error?: string;
  relaxvm_results?: Value[];
  relaxvm_as_text?: string;
  relaxvm_as_python?: string;
  relaxvm_stats?: string;
  relaxvm_stats_error?: string;
  results?: Value[];
}

/** Lowercase hex of bytes. */
export function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Bytes of lowercase hex. */
export function fromHex(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** The 16 hex digits of a float64's bits (big-endian, as Python's struct ">d"). */
export function bitsOf(v: number): string {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, v);
  return toHex(new Uint8Array(view.buffer));
}

/** The float64 whose bits `bits` are. */
export function floatOf(bits: string): number {
  return new DataView(fromHex(bits).buffer).getFloat64(0);
}

/** A CPU tensor holding exactly `hex`'s bytes. */
export function tensorOf(dt: string, shape: number[], hex: string): NDArray {
  const bytes = fromHex(hex);
  const t = NDArray.empty(shape, dt as TensorDType);
  const view = t.cpuView();
  new Uint8Array(view.buffer, view.byteOffset, view.byteLength).set(bytes);
  return t;
}

/** The relaxvm value of a tagged constant or input (an `int` is a bigint: TVM's Int). */
export function valueOf(v: Value): unknown {
  switch (v[0]) {
    case "int":
      return BigInt(v[1]);
    case "float":
      return floatOf(v[1]);
    case "str":
      return v[1];
    case "shape":
      return new ShapeTuple(v[1]);
    case "dtype":
      return dtype(v[1]);
    case "tensor":
      return tensorOf(v[1], v[2], v[3]);
    default:
      throw new Error(`no relaxvm value for ${JSON.stringify(v)}`);
  }
}

/** An input for relaxvm's VM: ints that are safe integers pass as numbers, as the VM passes Int constants. */
export function inputOf(v: Value): unknown {
  const x = valueOf(v);
  return typeof x === "bigint" && Number.isSafeInteger(Number(x)) ? Number(x) : x;
}

/** The tagged form of what relaxvm's VM returned. */
export function tagged(v: unknown): Value {
  if (v === null || v === undefined) return ["none"];
  if (typeof v === "boolean") return ["int", v ? "1" : "0"];
  if (typeof v === "bigint") return ["int", String(v)];
  if (typeof v === "number") return ["float", bitsOf(v)];
  if (typeof v === "string") return ["str", v];
  if (v instanceof ShapeTuple) return ["shape", [...v]];
  if (v instanceof DataType) return ["dtype", String(v)];
  if (v instanceof NDArray) {
    const view = v.cpuView();
    return [
      "tensor",
      v.dtype,
      [...v.shape],
      toHex(new Uint8Array(view.buffer, view.byteOffset, view.byteLength)),
    ];
  }
  if (Array.isArray(v)) return ["array", v.map(tagged)];
  if (v instanceof Closure || typeof v === "function") return ["closure"];
  return ["other", Object.prototype.toString.call(v)];
}

/**
 * Whether TVM's result and relaxvm's are the same value. JS has one number
 * type where Python has int and float: a TVM `int` matches a relaxvm
 * number holding exactly that integer, a TVM `float` one with the same bits.
 */
export function sameValue(tvm: Value, ours: Value): boolean {
  if (tvm[0] === "int" && ours[0] === "float") {
    const x = floatOf(ours[1]);
    return Number.isSafeInteger(x) && BigInt(x) === BigInt(tvm[1]);
  }
  if (tvm[0] === "float" && ours[0] === "float") {
    return Object.is(floatOf(tvm[1]), floatOf(ours[1]));
  }
  if (tvm[0] === "array" && ours[0] === "array") {
    return tvm[1].length === ours[1].length && tvm[1].every((x, i) => sameValue(x, ours[1][i]));
  }
  return JSON.stringify(tvm) === JSON.stringify(ours);
}

function operand(ib: ExecBuilder, a: OperandDesc): Operand {
  switch (a[0]) {
    case "r":
      return ib.r(a[1]);
    case "imm":
      return ib.imm(Number(a[1]));
    case "c":
      return ib.c(a[1]);
    case "f":
      return ib.f(a[1]);
    case "void":
      return ib.void_arg();
    case "vm":
      return ib.vm_state();
    case "const": {
      const value = valueOf(a[1]);
      try {
        return ib.convert_constant(value as Parameters<ExecBuilder["convert_constant"]>[0]);
      } finally {
        if (value instanceof NDArray) value.dispose(); // the pool holds its own reference
      }
    }
  }
}

function register(ib: ExecBuilder, r: RegisterDesc): Operand {
  return r === "void" ? ib.void_arg() : r === "vm" ? ib.vm_state() : ib.r(r);
}

/** Builds a description with relaxvm's `ExecBuilder`, as build_programs.py does with TVM's. */
export function buildWithRelaxvm(desc: ProgramDesc): Executable {
  const ib = new ExecBuilder();
  for (const item of desc.items ?? []) {
    if (item[0] === "declare") {
      ib.declare_function(item[1], item[2]);
      continue;
    }
    const [, name, numInputs, paramNames, body] = item;
    ib.function(
      name,
      paramNames === null
        ? { num_inputs: numInputs }
        : { num_inputs: numInputs, param_names: paramNames },
      () => {
        for (const ins of body) {
          switch (ins[0]) {
            case "call": {
              const args = ins[2].map((a) => operand(ib, a));
              if (ins[3] === null) ib.emit_call(ins[1], args);
              else ib.emit_call(ins[1], args, { dst: register(ib, ins[3]) });
              break;
            }
            case "ret":
              ib.emit_ret(register(ib, ins[1]));
              break;
            case "goto":
              ib.emit_goto(ins[1]);
              break;
            case "if":
              ib.emit_if(register(ib, ins[1]), ins[2]);
              break;
          }
        }
      },
    );
  }
  return ib.get();
}
