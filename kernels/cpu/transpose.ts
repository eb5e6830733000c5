/**
 * CPU transpose: permutes the axes of a tensor of any dtype.
 *
 * The output is written in order while the input is read through permuted
 * strides. Axes that stay neighbours in the permutation are merged first, so
 * a permutation that keeps the innermost axis becomes block copies and a
 * 2-D transpose stays a single strided loop.
 *
 * @module
 */

import type { NumberArray } from "../../ground/dtype.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import { collapseDims, contiguousStrides } from "../broadcast.ts";

/** `out = transpose(x, perm)` with `out.shape[i] = x.shape[perm[i]]`. */
export function transposeKernel(x: NDArray, perm: readonly number[], out: NDArray): void {
  if (out.size === 0) return;
  // Any element type, int64 included: elements are copied as they are.
  const xv = x.readView() as NumberArray, ov = out.cpuView() as NumberArray;
  const inStrides = contiguousStrides(x.shape);
  const { shape, strides: [sx] } = collapseDims(out.shape, [perm.map((p) => inStrides[p])]);
  const rank = shape.length;
  const n = shape[rank - 1], step = sx[rank - 1];
  const index = new Array<number>(rank - 1).fill(0);
  let xo = 0;
  for (let oo = 0; oo < ov.length; oo += n) {
    if (step === 1) {
      ov.set(xv.subarray(xo, xo + n), oo);
    } else {
      for (let i = 0, j = xo; i < n; i++, j += step) ov[oo + i] = xv[j];
    }
    for (let axis = rank - 2; axis >= 0; axis--) {
      xo += sx[axis];
      if (++index[axis] < shape[axis]) break;
      xo -= sx[axis] * shape[axis];
      index[axis] = 0;
    }
  }
}
