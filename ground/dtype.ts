/**
 * Element types. A `DataType` is DLPack's (code, bits, lanes) triple with its
 * TVM spelling ("float32", "int32", "uint8", "bool", …). The triple is what
 * gets serialized; the string is what users write.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "./brand.ts";
import {
  bfloat16ArrayToFloat32,
  bfloat16BitsToFloat32,
  float16ArrayToFloat32,
  float16BitsToFloat32,
} from "./float_formats.ts";
import { formatBytes, INSPECT } from "./inspect.ts";

/** DLPack type codes. */
export const DTypeCode = { Int: 0, UInt: 1, Float: 2, BFloat: 4, Bool: 6 } as const;

const CODE_NAMES: Record<number, string> = {
  0: "int",
  1: "uint",
  2: "float",
  4: "bfloat",
  6: "bool",
};

/**
 * `Float16Array` where the runtime has one (Deno 2, recent browsers); where
 * it does not, float16 tensors are stored in a `Uint16Array` of IEEE half
 * bits and converted when written and read (ground/float_formats.ts).
 */
const Float16Storage = (globalThis as { Float16Array?: typeof Float16Array }).Float16Array ??
  Uint16Array;

/** Whether float16 tensors are stored in a `Float16Array` (else: `Uint16Array` of bits). */
export const NATIVE_FLOAT16: boolean = Float16Storage !== Uint16Array;

/**
 * The TypedArray classes that hold tensor elements, keyed by dtype string:
 * what `cpuView()` returns. `int64` is a `BigInt64Array`; `bfloat16` (and
 * `float16` without `Float16Array`) a `Uint16Array` of the raw bits.
 */
export const TYPED_ARRAYS: Readonly<
  Record<
    TensorDType,
    {
      new (n: number): TypedArray;
      new (b: ArrayBuffer, offset: number, length: number): TypedArray;
      readonly BYTES_PER_ELEMENT: number;
    }
  >
> = {
  float32: Float32Array,
  float64: Float64Array,
  float16: Float16Storage,
  bfloat16: Uint16Array,
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  int64: BigInt64Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  bool: Uint8Array,
};

/**
 * The most elements `valuesOf` widens into a new `Float32Array`: 2^30 (4 GiB
 * of float32). A bfloat16 tensor larger than that (2 GiB of its own) is read
 * through its raw bits (`cpuView()`) instead.
 */
export const MAX_WIDENED_ELEMENTS = 2 ** 30;

/**
 * What `data()` returns for elements stored as `stored`: the array itself,
 * except that bfloat16 (and float16 without `Float16Array`) bits become a
 * `Float32Array` of their values (exact), built by a loop whatever the size.
 * `stored` may be reused. Throws a `RangeError` naming the size when the
 * widened copy would exceed `MAX_WIDENED_ELEMENTS`.
 */
export function valuesOf(dt: TensorDType, stored: TypedArray): TypedArray {
  const widens = dt === "bfloat16" || (dt === "float16" && !NATIVE_FLOAT16);
  if (!widens) return stored;
  if (stored.length > MAX_WIDENED_ELEMENTS) {
    throw new RangeError(
      `Cannot read the values of a ${dt} tensor of ${stored.length} elements: as float32 they ` +
        `would take ${formatBytes(stored.length * 4)}, over the ${MAX_WIDENED_ELEMENTS} elements ` +
        `(${formatBytes(MAX_WIDENED_ELEMENTS * 4)}) one copy may hold; read its raw bits with ` +
        `cpuView(), or a slice of it`,
    );
  }
  return dt === "bfloat16"
    ? bfloat16ArrayToFloat32(stored as Uint16Array)
    : float16ArrayToFloat32(stored as Uint16Array);
}

/**
 * Element `i` of `stored` (a tensor's storage of dtype `dt`) as `valuesOf`
 * would give it, without copying the rest: what printing reads, so that
 * showing a few elements of a huge tensor costs a few reads.
 */
export function elementReader(dt: TensorDType, stored: TypedArray): (i: number) => number | bigint {
  if (dt === "bfloat16") return (i) => bfloat16BitsToFloat32((stored as Uint16Array)[i]);
  if (dt === "float16" && !NATIVE_FLOAT16) {
    return (i) => float16BitsToFloat32((stored as Uint16Array)[i]);
  }
  return (i) => stored[i];
}

/** A dtype string that tensors can hold. */
export type TensorDType =
  | "float32"
  | "float64"
  | "float16"
  | "bfloat16"
  | "int8"
  | "int16"
  | "int32"
  | "int64"
  | "uint8"
  | "uint16"
  | "uint32"
  | "bool";

/**
 * Every dtype a tensor can hold, in a fixed order (floats, signed and
 * unsigned integers, bool): for pickers, argument parsers and tests that
 * cover them all.
 *
 * @example
 * ```ts
 * import { TENSOR_DTYPES } from "@relaxvm/relaxvm";
 * import { assert } from "@std/assert";
 *
 * assert(TENSOR_DTYPES.includes("bfloat16"));
 * ```
 */
export const TENSOR_DTYPES: readonly TensorDType[] = Object.freeze(
  Object.keys(TYPED_ARRAYS) as TensorDType[],
);

/** The valid names, for the messages of a dtype string that is not one (a typo, user input). */
const DTYPE_NAMES_TEXT = `a dtype is one of ${
  TENSOR_DTYPES.join(", ")
}, uint64, or one of these with vector lanes (float32x4)`;

/** The TypedArrays whose elements are numbers: every dtype's storage but int64's. */
export type NumberArray =
  | Float32Array
  | Float64Array
  | Float16Array
  | Int8Array
  | Int16Array
  | Int32Array
  | Uint8Array
  | Uint16Array
  | Uint32Array;

/** Any of the TypedArrays backing a tensor, or returned by `data()`. */
export type TypedArray = NumberArray | BigInt64Array;

const DATA_TYPE_BRAND = brandKey("DataType");

/**
 * A data type such as `float32`, as DLPack's code/bits/lanes triple.
 * Usable as an `emit_call` argument (it becomes a constant).
 *
 * @example
 * ```ts
 * import { dtype } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const f = dtype("float32");
 * assertEquals([f.code, f.bits, f.lanes], [2, 32, 1]);
 * assertEquals(String(f), "float32");
 * ```
 */
export class DataType {
  static {
    brand(this, DATA_TYPE_BRAND);
  }

  /**
   * True for a `DataType` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static [Symbol.hasInstance](v: unknown): v is DataType {
    return typeof v === "object" && v !== null && (v as Branded)[DATA_TYPE_BRAND] === true;
  }

  /** DLPack type code: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool. */
  readonly code: number;
  /** Bits per lane. */
  readonly bits: number;
  /** Vector lanes (1 for scalars). */
  readonly lanes: number;

  /** Makes a data type from its DLPack triple. */
  constructor(code: number, bits: number, lanes = 1) {
    this.code = code;
    this.bits = bits;
    this.lanes = lanes;
  }

  /** Parses a TVM dtype string: `float32`, `int64`, `uint8`, `bool`, `bfloat16`, `float32x4`. */
  static parse(text: string): DataType {
    const m = /^(int|uint|float|bfloat|bool)(\d*)(?:x(\d+))?$/.exec(text);
    if (m === null) throw new TypeError(`Unknown dtype "${text}": ${DTYPE_NAMES_TEXT}`);
    const [, kind, bitsText, lanesText] = m;
    const code = kind === "int"
      ? DTypeCode.Int
      : kind === "uint"
      ? DTypeCode.UInt
      : kind === "float"
      ? DTypeCode.Float
      : kind === "bfloat"
      ? DTypeCode.BFloat
      : DTypeCode.Bool;
    const bits = bitsText === ""
      ? (kind === "bool" ? 8 : kind === "bfloat" ? 16 : 32)
      : Number(bitsText);
    if (
      ![8, 16, 32, 64].includes(bits) || (kind === "bool" && bits !== 8) ||
      (kind === "bfloat" && bits !== 16)
    ) {
      throw new TypeError(`Unsupported dtype "${text}": ${bits} bits; ${DTYPE_NAMES_TEXT}`);
    }
    return new DataType(code, bits, lanesText === undefined ? 1 : Number(lanesText));
  }

  /** The TVM spelling, e.g. `float32`. */
  toString(): string {
    const base = this.code === DTypeCode.Bool
      ? "bool"
      : `${CODE_NAMES[this.code] ?? `code${this.code}_`}${this.bits}`;
    return this.lanes === 1 ? base : `${base}x${this.lanes}`;
  }

  /** Shown by `console.log` and `deno repl`: `DataType(float32)`. */
  [INSPECT](): string {
    return `DataType(${this})`;
  }

  /** Bytes per element (all lanes). */
  get bytes(): number {
    return (this.bits * this.lanes) / 8;
  }

  /** Structural equality. */
  equals(other: DataType): boolean {
    return this.code === other.code && this.bits === other.bits && this.lanes === other.lanes;
  }
}

/**
 * The scalar spellings `dtype()` accepts: every tensor dtype, `uint64`, and TVM's short forms
 * (`int` and `float` are 32 bits, `bfloat` 16).
 */
export type ScalarDTypeName = TensorDType | "uint64" | "int" | "uint" | "float" | "bfloat";

/**
 * A dtype string `dtype()` accepts: a scalar spelling, optionally with vector lanes
 * (`float32x4`). A literal union, so an editor completes it and `"float17"` does not type-check.
 */
export type DTypeName = ScalarDTypeName | `${ScalarDTypeName}x${number}`;

/**
 * Makes a `DataType` from its TVM spelling. For a string known only at run time (user input),
 * `DataType.parse(text)` takes any string and throws a `TypeError` for one it does not know.
 *
 * @example
 * ```ts
 * import { dtype } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * assertEquals(dtype("int32").bits, 32);
 * ```
 */
export function dtype(text: DTypeName): DataType {
  return DataType.parse(text);
}

/** Normalizes a dtype given as a string or a `DataType` to a tensor dtype string. */
export function tensorDType(value: DTypeName | string | DataType): TensorDType {
  const text = typeof value === "string" ? DataType.parse(value).toString() : value.toString();
  if (!(text in TYPED_ARRAYS)) {
    throw new TypeError(
      `Tensors of dtype "${text}" are not supported: tensors are ${TENSOR_DTYPES.join(", ")}`,
    );
  }
  return text as TensorDType;
}

/** Bytes per element of a tensor dtype. */
export function elementBytes(dt: TensorDType): number {
  return TYPED_ARRAYS[dt].BYTES_PER_ELEMENT;
}
