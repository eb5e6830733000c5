/**
 * CPU softmax over the last axis (float32).
 *
 * Numerically stable: each row is shifted by its maximum before `exp`, so
 * the largest term is `exp(0) = 1` and nothing overflows; a row holding
 * `+Infinity` or `NaN` yields `NaN`, as the textbook formula does.
 *
 * @module
 */

import type { NumberArray } from "../../ground/dtype.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import { wasmSoftmaxRows } from "./wasm/rows.ts";

/** `out = exp(x - max) / sum(exp(x - max))` per row of the last axis; a 0-d tensor is one row of one. */
export function softmaxKernel(x: NDArray, out: NDArray): void {
  const xv = x.readView() as NumberArray, ov = out.cpuView() as NumberArray;
  const n = x.shape.length === 0 ? 1 : x.shape[x.shape.length - 1];
  if (n === 0) return;
  // float32 runs wholly in WebAssembly (kernels/cpu/wasm/rows.ts) when large enough.
  if (
    xv instanceof Float32Array && ov instanceof Float32Array &&
    wasmSoftmaxRows(xv, ov, xv.length / n, n)
  ) return;
  for (let row = 0; row < xv.length; row += n) {
    let m = -Infinity;
    for (let i = row; i < row + n; i++) m = Math.max(m, xv[i]);
    let total = 0;
    for (let i = row; i < row + n; i++) {
      const e = Math.exp(xv[i] - m);
      ov[i] = e;
      total += e;
    }
    // The stored exponentials are float32; rounding them before the division
    // costs at most one float32 ulp more than dividing the doubles.
    const inv = 1 / total;
    for (let i = row; i < row + n; i++) ov[i] *= inv;
  }
}
