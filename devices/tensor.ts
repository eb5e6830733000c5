/**
 * `tensor()`: makes a CPU or device tensor from JavaScript values — a
 * (nested) array of numbers, bigints or booleans, or a TypedArray — owned by
 * the caller.
 *
 * @module
 */

import {
  type DataType,
  NATIVE_FLOAT16,
  type NumberArray,
  type TensorDType,
  tensorDType,
  TYPED_ARRAYS,
  type TypedArray,
} from "../ground/dtype.ts";
import { float32ToBfloat16BitsRounded, float32ToFloat16Bits } from "../ground/float_formats.ts";
import { cpu } from "./cpu_device.ts";
import type { Device } from "./device.ts";
import { NDArray, shapeSize } from "./ndarray.ts";

/** A (nested) array of numbers, bigints (int64 values) or booleans. */
export type NestedNumbers = number | bigint | boolean | readonly NestedNumbers[];

/** Options of `tensor()`. */
export interface TensorOptions {
  /**
   * Element type; default `"float32"`, or `"int64"` when the values include a
   * bigint (a TypedArray input keeps its own type when omitted).
   */
  dtype?: TensorDType | DataType;
  /** Shape; default inferred from the nesting (or 1-D for a TypedArray). */
  shape?: readonly number[];
  /** Where to put the data; default `cpu()`. */
  device?: Device;
}

type Scalar = number | bigint | boolean;

function inferShape(values: NestedNumbers): number[] {
  const dims: number[] = [];
  let v: NestedNumbers = values;
  while (Array.isArray(v)) {
    dims.push(v.length);
    v = v[0];
  }
  return dims;
}

function flattenInto(values: NestedNumbers, dims: number[], depth: number, out: Scalar[]): void {
  if (depth === dims.length) {
    if (Array.isArray(values)) throw new TypeError("tensor(): ragged nested array");
    const v = values as Scalar;
    out.push(typeof v === "bigint" || typeof v === "boolean" ? v : Number(v));
    return;
  }
  if (!Array.isArray(values) || values.length !== dims[depth]) {
    throw new TypeError("tensor(): ragged nested array");
  }
  for (const v of values) flattenInto(v, dims, depth + 1, out);
}

/** The dtype a TypedArray holds, by its class. */
const TYPED_DTYPES = new Map<unknown, TensorDType>([
  [Float32Array, "float32"],
  [Float64Array, "float64"],
  [Int8Array, "int8"],
  [Int16Array, "int16"],
  [Int32Array, "int32"],
  [BigInt64Array, "int64"],
  [Uint8Array, "uint8"],
  [Uint8ClampedArray, "uint8"],
  [Uint16Array, "uint16"],
  [Uint32Array, "uint32"],
]);
if (NATIVE_FLOAT16) TYPED_DTYPES.set(TYPED_ARRAYS.float16, "float16");

function typedDType(values: ArrayBufferView): TensorDType {
  const dt = TYPED_DTYPES.get(values.constructor);
  if (dt === undefined) {
    throw new TypeError(`tensor(): unsupported array type ${values.constructor.name}`);
  }
  return dt;
}

const INT64_MIN = -(2n ** 63n), INT64_MAX = 2n ** 63n - 1n;

/** An int64 value: a bigint in range, an integral number (beyond 2^53 too), or a boolean. */
function toInt64(v: Scalar): bigint {
  const b = typeof v === "bigint"
    ? v
    : typeof v === "boolean"
    ? (v ? 1n : 0n)
    : Number.isInteger(v)
    ? BigInt(v)
    : null;
  if (b === null || b < INT64_MIN || b > INT64_MAX) {
    throw new RangeError(`tensor(): ${v} is not an int64 value`);
  }
  return b;
}

/**
 * Writes `flat` into `view`, the storage of dtype `dt`: int64 values are
 * checked and exact, booleans become 0/1, float16 and bfloat16 round to
 * nearest even from the float32 value (as `cast` does).
 */
function store(
  dt: TensorDType,
  flat: ArrayLike<Scalar>,
  hasBigint: boolean,
  view: TypedArray,
): void {
  const n = flat.length;
  switch (dt) {
    case "int64": {
      const out = view as BigInt64Array;
      if (flat instanceof BigInt64Array) out.set(flat);
      else for (let i = 0; i < n; i++) out[i] = toInt64(flat[i]);
      return;
    }
    case "bool":
      for (let i = 0; i < n; i++) view[i] = flat[i] ? 1 : 0; // 0/1 bytes; 0n is false
      return;
    case "float16":
      for (let i = 0; i < n; i++) {
        const x = Math.fround(Number(flat[i]));
        view[i] = NATIVE_FLOAT16 ? x : float32ToFloat16Bits(x);
      }
      return;
    case "bfloat16":
      for (let i = 0; i < n; i++) view[i] = float32ToBfloat16BitsRounded(Number(flat[i]));
      return;
    default:
      if (hasBigint) {
        for (let i = 0; i < n; i++) view[i] = Number(flat[i]);
      } else {
        (view as NumberArray).set(flat as ArrayLike<number>); // one native copy
      }
  }
}

/**
 * Makes a tensor from a (nested) array or a TypedArray. The caller owns it:
 * `dispose()` it (or declare it with `using`) to release its memory at once.
 *
 * int64 tensors take numbers or bigints and hold every value exactly (beyond
 * 2^53 too; write those as bigints); `data()` returns a `BigInt64Array`.
 * float16 and bfloat16 values are rounded to nearest even (through float32).
 *
 * @example
 * ```ts
 * import { tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * using a = tensor([1, 2, 3, 4, 5, 6], { shape: [2, 3], dtype: "int32" });
 * assertEquals(a.shape, [2, 3]);
 * assertEquals(a.dataSync(), new Int32Array([1, 2, 3, 4, 5, 6]));
 * using ids = tensor([1n, 2n ** 62n]); // bigints: int64
 * assertEquals([ids.dtype, ...ids.dataSync()], ["int64", 1n, 2n ** 62n]);
 * ```
 */
export function tensor(
  values: NestedNumbers | ArrayBufferView,
  options: TensorOptions = {},
): NDArray {
  const device = options.device ?? cpu();
  let flat: ArrayLike<Scalar>;
  let inferred: number[];
  let dt: TensorDType;
  let hasBigint: boolean;
  if (ArrayBuffer.isView(values)) {
    if (values instanceof DataView) {
      throw new TypeError("tensor(): pass a TypedArray, not a DataView");
    }
    flat = values as unknown as ArrayLike<Scalar>;
    hasBigint = values instanceof BigInt64Array;
    inferred = [flat.length];
    dt = options.dtype === undefined ? typedDType(values) : tensorDType(options.dtype);
  } else {
    inferred = inferShape(values);
    const out: Scalar[] = [];
    flattenInto(values, inferred, 0, out);
    flat = out;
    hasBigint = out.some((v) => typeof v === "bigint");
    dt = tensorDType(options.dtype ?? (hasBigint ? "int64" : "float32"));
  }
  const shape = options.shape ?? inferred;
  if (shapeSize(shape) !== flat.length) {
    throw new RangeError(`tensor(): ${flat.length} values do not fill shape [${shape.join(", ")}]`);
  }
  const out = NDArray.empty(shape, dt, device);
  if (device.kind === "cpu") {
    store(dt, flat, hasBigint, out.cpuView()); // straight into the tensor's memory, no staging copy
  } else {
    const host = new TYPED_ARRAYS[dt](flat.length);
    store(dt, flat, hasBigint, host);
    device.writeBlock(out.block, out.byteOffset, new Uint8Array(host.buffer, 0, host.byteLength));
  }
  return out.handToUser();
}
