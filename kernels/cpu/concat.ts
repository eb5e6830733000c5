/**
 * CPU `concat`: lays tensors (any dtype) one after another along an axis.
 *
 * Around the axis every tensor is `[outer, rows]` with `rows = d_k · inner`
 * contiguous elements per outer index; the output row is the inputs' rows
 * side by side, so each input is `outer` block copies (one when the axis is
 * the first).
 *
 * @module
 */

import type { NumberArray } from "../../ground/dtype.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import { concatLayout } from "../indexing_layout.ts";

/**
 * Rows shorter than this are copied element by element (Silero's
 * convolutions append one time step of 128 channels: 129 rows of 1 and 4).
 */
const SHORT_ROW = 32;

/** `out = concat(inputs, axis)`. */
export function concatKernel(inputs: readonly NDArray[], axis: number, out: NDArray): void {
  if (out.size === 0) return;
  // Any element type, int64 included: elements are copied as they are.
  const ov = out.cpuView() as NumberArray;
  const { outer, outRow, rows, starts } = concatLayout(inputs, axis, out);
  inputs.forEach((x, k) => {
    const row = rows[k];
    if (row === 0) return;
    const xv = x.readView() as NumberArray;
    if (outer === 1) {
      ov.set(xv, starts[k]);
      return;
    }
    if (row < SHORT_ROW) {
      // A subarray and set per row cost more than a few elements copied one by one.
      for (let p = 0, src = 0, dst = starts[k]; p < outer; p++, dst += outRow - row) {
        for (let i = 0; i < row; i++) ov[dst++] = xv[src++];
      }
      return;
    }
    for (let p = 0, src = 0, dst = starts[k]; p < outer; p++, src += row, dst += outRow) {
      ov.set(xv.subarray(src, src + row), dst);
    }
  });
}
