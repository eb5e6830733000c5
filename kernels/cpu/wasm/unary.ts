/**
 * Float32 operators on the WebAssembly SIMD path, for their exponentials: `gelu`, the
 * feed-forward activation of MiniLM and GPT, where Math.exp one value at a
 * time was 14% of a MiniLM sentence at batch 1 (gemm_module.ts's `gelu`
 * computes four per step), and `softmax` (below). The values are copied into
 * the calling thread's scratch in chunks that stay in cache, transformed in
 * place, and copied out.
 *
 * @module
 */

import { SCRATCH_BASE_BYTES, scratchView, wasmKernelsFor } from "./runtime.ts";

/** Below this many values `gelu` stays in TypeScript in `"auto"` mode (the copies would cost more). */
export const GELU_WASM_MIN_VALUES = 1024;
/** Values per chunk: 256 KiB, in L2 between the copy in, the kernel and the copy out. */
const CHUNK = 64 * 1024;

/**
 * `o[0 .. n) = gelu(x[0 .. n))` by the WebAssembly kernel; false, having
 * written nothing, where the TypeScript loop should run instead (mode, size,
 * no WebAssembly).
 */
export function wasmGelu(x: Float32Array, o: Float32Array, n: number): boolean {
  const k = wasmKernelsFor(n, GELU_WASM_MIN_VALUES);
  if (k === null || n === 0) return false;
  const space = k.local, base = SCRATCH_BASE_BYTES / 4;
  const first = Math.min(n, CHUNK);
  let view = scratchView(space, (base + Math.ceil(first / 4) * 4) * 4);
  for (let i = 0; i < n; i += CHUNK) {
    const m = Math.min(CHUNK, n - i), padded = Math.ceil(m / 4) * 4;
    view.set(x.subarray(i, i + m), base);
    view.fill(0, base + m, base + padded); // the last vector's lanes past n
    space.exports.gelu(base * 4, base * 4, padded * 4);
    view = scratchView(space, 0);
    o.set(view.subarray(base, base + m), i);
  }
  return true;
}

/** Below this many values `softmax` stays in TypeScript in `"auto"` mode. */
export const SOFTMAX_WASM_MIN_VALUES = 4096;

/**
 * Softmax over rows of `n` values (`rows · n` in all) with the exponentials
 * on the WebAssembly path (gemm_module.ts's `exp`, four a step): each chunk
 * of whole rows is shifted by its rows' maxima into scratch here, raised
 * there in place, then summed and scaled here. Math.exp one value at a time
 * was 19% of MiniLM at batch 32 (attention rows of up to 38 values). False,
 * having written nothing, where the TypeScript kernel should run (mode,
 * size, rows longer than a chunk, no WebAssembly).
 */
export function wasmSoftmax(x: Float32Array, o: Float32Array, rows: number, n: number): boolean {
  const total = rows * n;
  if (total === 0 || n > CHUNK) return false;
  const k = wasmKernelsFor(total, SOFTMAX_WASM_MIN_VALUES);
  if (k === null) return false;
  const space = k.local, base = SCRATCH_BASE_BYTES / 4;
  const rowsPer = Math.floor(CHUNK / n);
  let view = scratchView(space, (base + Math.ceil(Math.min(rows, rowsPer) * n / 4) * 4) * 4);
  for (let r0 = 0; r0 < rows; r0 += rowsPer) {
    const rr = Math.min(rowsPer, rows - r0), m = rr * n, padded = Math.ceil(m / 4) * 4;
    for (let row = 0, src = r0 * n, dst = base; row < rr; row++, src += n, dst += n) {
      let max = -Infinity;
      for (let i = 0; i < n; i++) max = Math.max(max, x[src + i]);
      for (let i = 0; i < n; i++) view[dst + i] = x[src + i] - max;
    }
    view.fill(0, base + m, base + padded);
    space.exports.exp(base * 4, base * 4, padded * 4);
    view = scratchView(space, 0);
    for (let row = 0, src = base, dst = r0 * n; row < rr; row++, src += n, dst += n) {
      let sum = 0;
      for (let i = 0; i < n; i++) sum += view[src + i];
      const inv = 1 / sum;
      for (let i = 0; i < n; i++) o[dst + i] = view[src + i] * inv;
    }
  }
  return true;
}
