/**
 * `tensor()`: makes a CPU or device tensor from JavaScript numbers — a
 * (nested) array or a TypedArray — owned by the caller.
 *
 * This file is browser-safe: no `Deno.*`.
 *
 * @module
 */

import { type DataType, type TensorDType, tensorDType, TYPED_ARRAYS } from "../ground/dtype.ts";
import { cpu } from "./cpu_device.ts";
import type { Device } from "./device.ts";
import { NDArray, shapeSize } from "./ndarray.ts";

/** A (nested) array of numbers. */
export type NestedNumbers = number | boolean | readonly NestedNumbers[];

/** Options of `tensor()`. */
export interface TensorOptions {
  /** Element type; default `"float32"` (a TypedArray input keeps its own type when omitted). */
  dtype?: string | DataType;
  /** Shape; default inferred from the nesting (or 1-D for a TypedArray). */
  shape?: readonly number[];
  /** Where to put the data; default `cpu()`. */
  device?: Device;
}

function inferShape(values: NestedNumbers): number[] {
  const dims: number[] = [];
  let v: NestedNumbers = values;
  while (Array.isArray(v)) {
    dims.push(v.length);
    v = v[0];
  }
  return dims;
}

function flattenInto(values: NestedNumbers, dims: number[], depth: number, out: number[]): void {
  if (depth === dims.length) {
    if (Array.isArray(values)) throw new TypeError("tensor(): ragged nested array");
    out.push(Number(values));
    return;
  }
  if (!Array.isArray(values) || values.length !== dims[depth]) {
    throw new TypeError("tensor(): ragged nested array");
  }
  for (const v of values) flattenInto(v, dims, depth + 1, out);
}

function typedDType(values: ArrayBufferView): TensorDType {
  for (const [name, Ctor] of Object.entries(TYPED_ARRAYS)) {
    if (name !== "bool" && values instanceof Ctor) return name as TensorDType;
  }
  throw new TypeError(`tensor(): unsupported array type ${values.constructor.name}`);
}

/**
 * Makes a tensor from a (nested) number array or a TypedArray. The caller
 * owns it: `dispose()` it (or declare it with `using`) to release its memory
 * at once.
 *
 * @example
 * ```ts
 * import { tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * using a = tensor([1, 2, 3, 4, 5, 6], { shape: [2, 3], dtype: "int32" });
 * assertEquals(a.shape, [2, 3]);
 * assertEquals(a.dataSync(), new Int32Array([1, 2, 3, 4, 5, 6]));
 * ```
 */
export function tensor(
  values: NestedNumbers | ArrayBufferView,
  options: TensorOptions = {},
): NDArray {
  const device = options.device ?? cpu();
  let flat: ArrayLike<number>;
  let inferred: number[];
  let dt: TensorDType;
  if (ArrayBuffer.isView(values)) {
    if (values instanceof DataView) {
      throw new TypeError("tensor(): pass a TypedArray, not a DataView");
    }
    flat = values as unknown as ArrayLike<number>;
    inferred = [flat.length];
    dt = options.dtype === undefined ? typedDType(values) : tensorDType(options.dtype);
  } else {
    inferred = inferShape(values);
    const out: number[] = [];
    flattenInto(values, inferred, 0, out);
    flat = out;
    dt = tensorDType(options.dtype ?? "float32");
  }
  const shape = options.shape ?? inferred;
  if (shapeSize(shape) !== flat.length) {
    throw new RangeError(`tensor(): ${flat.length} values do not fill shape [${shape.join(", ")}]`);
  }
  if (dt === "bool") flat = Array.from(flat, (v) => (v ? 1 : 0)); // bools are stored as 0/1 bytes
  const out = NDArray.empty(shape, dt, device);
  if (device.kind === "cpu") {
    out.cpuView().set(flat); // straight into the tensor's memory, no staging copy
  } else {
    const host = new TYPED_ARRAYS[dt](flat.length);
    host.set(flat);
    device.writeBlock(
      out.block,
      out.byteOffset,
      new Uint8Array(host.buffer, 0, host.byteLength),
    );
  }
  return out.handToUser();
}
