/**
 * CPU `strided_slice`: copies a strided window of a tensor (any dtype) into
 * a contiguous output.
 *
 * The window is an offset and one step per axis in elements of `x`;
 * `collapseDims` merges axes the window walks as one, so a slice that keeps
 * whole rows becomes block copies and only a stepped innermost axis is an
 * element loop.
 *
 * @module
 */

import type { NumberArray } from "../../ground/dtype.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import { collapseDims } from "../broadcast.ts";
import { sliceWindow } from "../indexing_layout.ts";

/** `out[i…] = x[start + i·step …]` per axis. */
export function stridedSliceKernel(
  x: NDArray,
  start: readonly number[],
  step: readonly number[],
  out: NDArray,
): void {
  if (out.size === 0) return;
  // Any element type, int64 included: elements are copied as they are.
  const xv = x.readView() as NumberArray, ov = out.cpuView() as NumberArray;
  const window = sliceWindow(x.shape, start, step);
  const { shape, strides: [sx] } = collapseDims(out.shape, [window.strides]);
  const rank = shape.length;
  const n = shape[rank - 1], inner = sx[rank - 1];
  const index = new Array<number>(rank - 1).fill(0);
  let xo = window.offset;
  for (let oo = 0; oo < ov.length; oo += n) {
    if (inner === 1) {
      ov.set(xv.subarray(xo, xo + n), oo);
    } else {
      for (let i = 0, j = xo; i < n; i++, j += inner) ov[oo + i] = xv[j];
    }
    for (let axis = rank - 2; axis >= 0; axis--) {
      xo += sx[axis];
      if (++index[axis] < shape[axis]) break;
      xo -= sx[axis] * shape[axis];
      index[axis] = 0;
    }
  }
}
