/**
 * Float32 `gelu` on the WebAssembly SIMD path, for its exponentials: the
 * feed-forward activation of MiniLM and GPT, where Math.exp one value at a
 * time was 14% of a MiniLM sentence at batch 1 (gemm_module.ts's `gelu`
 * computes four per step). The values are copied into the calling thread's
 * scratch in chunks that stay in cache, transformed in place, and copied
 * out. (Softmax, which took gemm_module.ts's `exp` from here, now runs
 * wholly in rows_module.ts.)
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
