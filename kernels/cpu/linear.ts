/**
 * CPU `linear` (float32): `out[..., N] = x[..., K] @ wᵀ + bias`, with the
 * weight stored `[N, K]` as PyTorch's `nn.Linear` and TVM's
 * `relax.op.linear` keep it. The leading axes of `x` are rows of one
 * product. Few rows (a decode step) take dot products of contiguous rows;
 * more take the packed 4×4 kernel of matmul.ts, which packs the transposed
 * weight into the same column panels it packs an ordinary B into; both go
 * to the WebAssembly SIMD kernels first when they are large enough
 * (matmul.ts's `gemm`). The bias is added as each row is finished.
 *
 * @module
 */

import type { NDArray } from "../../devices/ndarray.ts";
import { gemm } from "./matmul.ts";

/** `out = x @ wᵀ (+ bias)`; shapes checked by the front end. */
export function linearKernel(x: NDArray, w: NDArray, bias: NDArray | null, out: NDArray): void {
  if (out.size === 0) return;
  const N = w.shape[0], K = w.shape[1];
  const M = out.size / N;
  // readView: the weight stays sealed, so a copy the kernels keep of it stays usable.
  const xv = x.readView() as Float32Array, wv = w.readView() as Float32Array;
  const ov = out.cpuView() as Float32Array;
  gemm(xv, 0, wv, 0, ov, 0, M, K, N, true, true, w);
  if (bias === null) return;
  const bv = bias.readView() as Float32Array;
  for (let i = 0; i < M; i++) {
    const o = i * N;
    for (let j = 0; j < N; j++) ov[o + j] += bv[j];
  }
}
