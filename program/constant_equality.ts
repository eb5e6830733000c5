/**
 * When two constants are the same constant: `convert_constant`
 * (builder/constant_pool.ts) gives them one index, and `as_typescript()`
 * (program/typescript_format.ts) refuses an executable that holds both, since
 * the builder would merge them. The same number (`-0` and `NaN` included,
 * compared with `Object.is`), bigint, string, shape or dtype, or tensors with
 * the same dtype, shape and bytes.
 *
 * @module
 */

import { DataType } from "../ground/dtype.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";
import { NDArray } from "../devices/ndarray.ts";
import type { ConstantValue } from "./program_data.ts";

/** Whether `a` and `b` are one constant to the builder. */
export function sameConstant(a: ConstantValue, b: ConstantValue): boolean {
  if (typeof a === "number" || typeof b === "number") return Object.is(a, b);
  if (typeof a === "bigint" || typeof b === "bigint") return a === b;
  if (typeof a === "string" || typeof b === "string") return a === b;
  if (a instanceof ShapeTuple && b instanceof ShapeTuple) return a.equals(b);
  if (a instanceof DataType && b instanceof DataType) return a.equals(b);
  if (a instanceof NDArray && b instanceof NDArray) {
    if (a === b) return true;
    if (a.dtype !== b.dtype || a.shape.join() !== b.shape.join()) return false;
    const x = tensorBytes(a), y = tensorBytes(b);
    return x.length === y.length && x.every((byte, i) => byte === y[i]);
  }
  return false;
}

/** A CPU tensor's element bytes as stored. */
export function tensorBytes(t: NDArray): Uint8Array {
  const v = t.cpuView();
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}
