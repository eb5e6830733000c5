/**
 * The depthwise convolution kernels of the CPU's WebAssembly path: one
 * channel's 3×3 or 5×5 window of horizontal stride 1 over an input plane
 * the caller has padded with zeros (depthwise.ts), so every output reads
 * its whole window and the loop has no edges.
 *
 * `dw3(xp, wp, op, rows, wpBytes, owBytes, stepBytes, bias)` (and `dw5`):
 * output row `oy < rows`, columns four at a time up to `owBytes / 4`
 * values, is `bias + Σ w[ky, kx] · x[oy·step + ky, ox + kx]`, `x` rows
 * `wpBytes` apart from `xp` (`stepBytes` = vertical stride × `wpBytes`),
 * `w` the `K·K` weights at `wp`, `op` rows `owBytes` apart. The weights
 * are splatted into locals once per call, and the `K·K` loads of each
 * vector of outputs are offsets from `K` row pointers: the kernel reads
 * each input `K` times from L1 where the TypeScript loop of
 * kernels/cpu/conv2d.ts read and added one product at a time (under 1 GMAC/s
 * there; a third of PP-OCRv4's recognizer).
 *
 * SIMD128 only (multiply, then add: float32 products and sums rounded as
 * TypeScript's loop rounds each on store are not promised, only the
 * definition's tolerance), on the memory runtime.ts's local space imports.
 *
 * @module
 */

import { type MemoryImport, ModuleBuilder, Op, SimdOp, ValType } from "./emitter.ts";

const { i32, f32, v128 } = ValType;

/** The window widths (and heights) the module has a kernel for. */
export const DEPTHWISE_WASM_SIZES: readonly number[] = [3, 5];

function emitDepthwise(m: ModuleBuilder, K: number): void {
  const f = m.function(`dw${K}`, [i32, i32, i32, i32, i32, i32, i32, f32]);
  const [xp, wp, op, rows, wpBytes, owBytes, stepBytes, bias] = [0, 1, 2, 3, 4, 5, 6, 7];
  const weights = Array.from({ length: K * K }, () => f.local(v128));
  const rowPtr = Array.from({ length: K }, () => f.local(i32));
  const oy = f.local(i32), ox = f.local(i32), acc = f.local(v128), b = f.local(v128);
  for (const [t, w] of weights.entries()) {
    f.get(wp).simdMem(SimdOp.v128Load32Splat, 2, 4 * t).set(w);
  }
  f.get(bias).simd(SimdOp.f32x4Splat).set(b);
  f.forLoop(oy, 0, rows, 1, () => {
    for (const [ky, r] of rowPtr.entries()) {
      f.get(xp).get(wpBytes).i32(ky).op(Op.i32Mul).op(Op.i32Add).set(r);
    }
    f.forLoop(ox, 0, owBytes, 16, () => {
      f.get(b).set(acc);
      for (let ky = 0; ky < K; ky++) {
        for (let kx = 0; kx < K; kx++) {
          f.get(acc);
          f.get(rowPtr[ky]).get(ox).op(Op.i32Add).simdMem(SimdOp.v128Load, 0, 4 * kx);
          f.get(weights[ky * K + kx]).simd(SimdOp.f32x4Mul).simd(SimdOp.f32x4Add).set(acc);
        }
      }
      f.get(op).get(ox).op(Op.i32Add).get(acc).simdMem(SimdOp.v128Store, 0);
    });
    f.get(xp).get(stepBytes).op(Op.i32Add).set(xp);
    f.get(op).get(owBytes).op(Op.i32Add).set(op);
  });
}

/** The module's bytes: `dw3` and `dw5` over the imported `memory`. */
export function depthwiseModuleBytes(memory: MemoryImport): Uint8Array<ArrayBuffer> {
  const m = new ModuleBuilder(memory);
  for (const K of DEPTHWISE_WASM_SIZES) emitDepthwise(m, K);
  return m.encode();
}
