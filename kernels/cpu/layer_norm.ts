/**
 * CPU layer normalization (float32) over the trailing `gamma.ndim` axes.
 *
 * Mean and variance come from two passes in float64 (the one-pass
 * `E[x²] - E[x]²` form cancels badly when the mean is large); the variance is
 * the population one (divided by the row length), as in TVM and PyTorch.
 *
 * @module
 */

import type { NumberArray } from "../../ground/dtype.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import { wasmLayerNorm } from "./wasm/rows.ts";

/** `out = (x - mean) / sqrt(var + eps) * gamma + beta` per row of `gamma.size` elements. */
export function layerNormKernel(
  x: NDArray,
  gamma: NDArray,
  beta: NDArray,
  eps: number,
  out: NDArray,
): void {
  const xv = x.readView() as NumberArray, gv = gamma.readView() as NumberArray;
  const bv = beta.readView() as NumberArray, ov = out.cpuView() as NumberArray;
  const n = gamma.size;
  if (n === 0) return;
  // float32 runs in WebAssembly SIMD (kernels/cpu/wasm/rows.ts) when large enough.
  if (
    xv instanceof Float32Array && gv instanceof Float32Array && bv instanceof Float32Array &&
    ov instanceof Float32Array && wasmLayerNorm(xv, gv, bv, ov, xv.length / n, n, eps)
  ) return;
  for (let row = 0; row < xv.length; row += n) {
    let sum = 0;
    for (let i = 0; i < n; i++) sum += xv[row + i];
    const mean = sum / n;
    let sq = 0;
    for (let i = 0; i < n; i++) {
      const d = xv[row + i] - mean;
      sq += d * d;
    }
    const scale = 1 / Math.sqrt(sq / n + eps);
    for (let i = 0; i < n; i++) ov[row + i] = (xv[row + i] - mean) * scale * gv[i] + bv[i];
  }
}
