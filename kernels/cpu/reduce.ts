/**
 * CPU reductions: `sum`, `max` and `mean` over a set of axes.
 *
 * The input is walked once, in memory order. Each input axis maps to an
 * output stride (0 for a reduced axis), the axes are collapsed, and then the
 * innermost axis is either reduced — a contiguous run folded into one
 * accumulator — or kept — a row added elementwise into a row of
 * accumulators. Accumulators are float64, so float32 sums over long axes do
 * not drift and int32 sums are exact (stored modulo 2^32, wrapping as on the
 * GPU) while they stay below 2^53.
 *
 * @module
 */

import type { NumberArray } from "../../ground/dtype.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import type { ReduceOp } from "../kernel_backend.ts";
import { collapseDims, contiguousStrides } from "../broadcast.ts";
import { reduceInt64 } from "./int64.ts";
import { ROWS_WASM_MIN_VALUES, rowsMayTake, wasmReduceRows } from "./wasm/rows.ts";

/**
 * Reduces `x` over `axes` (sorted, unique, non-negative) into `out`, which
 * holds the reduced elements in order (keepdims or not). `max` of an empty
 * run is `-Infinity`; `mean` of one is `NaN` (0 / 0), as in NumPy.
 */
export function reduceKernel(
  op: ReduceOp,
  x: NDArray,
  axes: readonly number[],
  out: NDArray,
): void {
  const isMax = op === "max";
  if (x.dtype === "int64") {
    const { shape, strides: [, so] } = collapseDims(x.shape, [
      contiguousStrides(x.shape),
      outputStrides(x.shape, axes),
    ]);
    reduceInt64(isMax, x.readView() as BigInt64Array, out.cpuView() as BigInt64Array, shape, so);
    return;
  }
  const xv = x.readView() as NumberArray, ov = out.cpuView() as NumberArray;
  if (
    xv instanceof Float32Array && ov instanceof Float32Array && x.size > 0 &&
    rowsMayTake(x.size, ROWS_WASM_MIN_VALUES.reduce)
  ) {
    // Reduced axes that collapse to the last one (a row per output element) run in
    // WebAssembly SIMD (kernels/cpu/wasm/rows.ts) when large enough.
    const { shape, strides: [, so] } = collapseDims(x.shape, [
      contiguousStrides(x.shape),
      outputStrides(x.shape, axes),
    ]);
    const rank = shape.length;
    const rowsOnly = so[rank - 1] === 0 && (rank === 1 || (rank === 2 && so[0] === 1));
    if (rowsOnly && wasmReduceRows(op, xv, ov, out.size, shape[rank - 1])) return;
  }
  const acc = new Float64Array(out.size).fill(isMax ? -Infinity : 0);
  if (x.size > 0) {
    const { shape, strides: [, so] } = collapseDims(x.shape, [
      contiguousStrides(x.shape),
      outputStrides(x.shape, axes),
    ]);
    accumulate(isMax, xv, acc, shape, so);
  }
  if (op === "mean") {
    const count = out.size === 0 ? 0 : x.size / out.size;
    for (let i = 0; i < acc.length; i++) ov[i] = acc[i] / count;
  } else {
    ov.set(acc);
  }
}

/** Output strides over x's axes: contiguous over the kept axes, 0 over the reduced ones. */
function outputStrides(shape: readonly number[], axes: readonly number[]): number[] {
  const strides = new Array<number>(shape.length).fill(0);
  let s = 1;
  for (let axis = shape.length - 1; axis >= 0; axis--) {
    if (axes.includes(axis)) continue;
    strides[axis] = s;
    s *= shape[axis];
  }
  return strides;
}

/** Folds every element of `xv` (contiguous, walked in order) into `acc` at the offsets `so` gives. */
function accumulate(
  isMax: boolean,
  xv: NumberArray,
  acc: Float64Array,
  shape: number[],
  so: number[],
): void {
  const rank = shape.length;
  const n = shape[rank - 1];
  const innerKept = so[rank - 1] !== 0;
  const rows = xv.length / n;
  const index = new Array<number>(rank - 1).fill(0);
  let o = 0;
  for (let row = 0, xo = 0; row < rows; row++, xo += n) {
    if (innerKept) {
      if (isMax) {
        for (let i = 0; i < n; i++) acc[o + i] = Math.max(acc[o + i], xv[xo + i]);
      } else {
        for (let i = 0; i < n; i++) acc[o + i] += xv[xo + i];
      }
    } else if (isMax) {
      let m = acc[o];
      for (let i = 0; i < n; i++) m = Math.max(m, xv[xo + i]);
      acc[o] = m;
    } else {
      let t = 0;
      for (let i = 0; i < n; i++) t += xv[xo + i];
      acc[o] += t;
    }
    // Odometer over the outer axes, keeping the output offset current.
    for (let axis = rank - 2; axis >= 0; axis--) {
      o += so[axis];
      if (++index[axis] < shape[axis]) break;
      o -= so[axis] * shape[axis];
      index[axis] = 0;
    }
  }
}
