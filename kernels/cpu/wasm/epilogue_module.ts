/**
 * `conv_epilogue`, in the matrix kernels' module (gemm_module.ts) so that
 * the worker pool runs it: a convolution's bias and epilogue
 * (`Conv2dGeometry.epilogue`, conv_epilogue.ts's steps) over rows of the
 * product's C while they are still in the scratch, before they are copied
 * out (kernels/cpu/conv_panels.ts's `rowEpilogue`). In TypeScript they were
 * one more pass over each output plane, on the calling thread alone, about
 * 1 ns a value and step.
 *
 * `conv_epilogue(cp, rows, ldc, bytes, bp, sp, nSteps)`: for row `r <
 * rows` (`ldc` floats apart from `cp`), its first `bytes / 4` values (a
 * multiple of 4) get `bias[r]` (float32s at `bp`) added, then each step of
 * the table at `sp` in turn, 16 bytes a step: the op (int32: 0 affine, 1
 * relu, 2 clip, 3 hardsigmoid, 4 hardswish, 5 sigmoid, as `EPILOGUE_OPS`), then `a`
 * and `b` (float32). Each step is one loop over the row (its 4 KiB or so
 * stay in L1), vectors of four.
 *
 * @module
 */

import { type ModuleBuilder, Op, SimdOp, ValType } from "./emitter.ts";
import { pushExp } from "./simd_helpers.ts";

/** The op codes of `conv_epilogue`'s step table. */
export const EPILOGUE_OPS = {
  affine: 0,
  relu: 1,
  clip: 2,
  hardsigmoid: 3,
  hardswish: 4,
  sigmoid: 5,
} as const;

/** Emits `conv_epilogue` into `m`. */
export function emitConvEpilogue(m: ModuleBuilder): void {
  const { i32, v128 } = ValType;
  const f = m.function("conv_epilogue", [i32, i32, i32, i32, i32, i32, i32]);
  const [cp, rows, ldc, bytes, bp, sp, nSteps] = [0, 1, 2, 3, 4, 5, 6];
  const r = f.local(i32), i = f.local(i32), s = f.local(i32), row = f.local(i32);
  const op = f.local(i32), at = f.local(i32);
  const a = f.local(v128), b = f.local(v128), v = f.local(v128);
  const zero = f.local(v128), one = f.local(v128);
  const t = f.local(v128), e = f.local(v128), y = f.local(v128), k = f.local(v128);
  const rr = f.local(v128);
  f.f32x4Const([0, 0, 0, 0]).set(zero);
  f.f32x4Const([1, 1, 1, 1]).set(one);
  /** `body` over every vector of the row: `v` loaded, the body leaves the new value. */
  const overRow = (body: () => void) => {
    f.forLoop(i, 0, bytes, 16, () => {
      f.get(row).get(i).op(Op.i32Add).tee(at);
      f.get(at).simdMem(SimdOp.v128Load, 2).set(v);
      body();
      f.simdMem(SimdOp.v128Store, 2);
    });
  };
  f.forLoop(r, 0, rows, 1, () => {
    f.get(cp).get(r).get(ldc).op(Op.i32Mul).i32(2).op(Op.i32Shl).op(Op.i32Add).set(row);
    f.get(bp).get(r).i32(2).op(Op.i32Shl).op(Op.i32Add).simdMem(SimdOp.v128Load32Splat, 2).set(b);
    overRow(() => f.get(v).get(b).simd(SimdOp.f32x4Add));
    f.forLoop(s, 0, nSteps, 1, () => {
      f.get(sp).get(s).i32(4).op(Op.i32Shl).op(Op.i32Add).set(at);
      f.get(at).mem(Op.i32Load, 2).set(op);
      f.get(at).simdMem(SimdOp.v128Load32Splat, 2, 4).set(a);
      f.get(at).simdMem(SimdOp.v128Load32Splat, 2, 8).set(b);
      const when = (code: number, body: () => void) => {
        f.get(op).i32(code).op(Op.i32Eq).if();
        overRow(body);
        f.end();
      };
      when(EPILOGUE_OPS.affine, () => {
        f.get(v).get(a).simd(SimdOp.f32x4Mul).get(b).simd(SimdOp.f32x4Add);
      });
      when(EPILOGUE_OPS.relu, () => f.get(v).get(zero).simd(SimdOp.f32x4Pmax));
      when(EPILOGUE_OPS.clip, () => {
        f.get(v).get(a).simd(SimdOp.f32x4Max).get(b).simd(SimdOp.f32x4Min);
      });
      when(EPILOGUE_OPS.hardsigmoid, () => {
        f.get(v).get(a).simd(SimdOp.f32x4Mul).get(b).simd(SimdOp.f32x4Add);
        f.get(one).simd(SimdOp.f32x4Min).get(zero).simd(SimdOp.f32x4Max);
      });
      when(EPILOGUE_OPS.hardswish, () => {
        f.get(v).get(v).get(a).simd(SimdOp.f32x4Add).get(zero).simd(SimdOp.f32x4Max);
        f.get(b).simd(SimdOp.f32x4Min).simd(SimdOp.f32x4Mul).get(b).simd(SimdOp.f32x4Div);
      });
      when(EPILOGUE_OPS.sigmoid, () => {
        // e = e^−|v| (the exponential takes arguments ≤ 0), s = 1 / (1 + e): v < 0 ? e·s : s
        // (NaN: s, NaN).
        f.get(zero).get(v).simd(SimdOp.f32x4Abs).simd(SimdOp.f32x4Sub).set(t);
        pushExp(f, t, y, k, rr);
        f.set(e);
        f.get(one).get(one).get(e).simd(SimdOp.f32x4Add).simd(SimdOp.f32x4Div).set(t);
        f.get(t).get(e).simd(SimdOp.f32x4Mul).get(t);
        f.get(v).get(zero).simd(SimdOp.f32x4Lt).simd(SimdOp.v128Bitselect);
      });
    });
  });
}
