/**
 * Instruction sequences the row kernels (rows_module.ts), attention
 * (attention_module.ts) and gelu (gemm_module.ts) share: the vector exponential, folding a vector's
 * lanes, and address arithmetic.
 *
 * @module
 */

import type { FunctionCode } from "./emitter.ts";
import { Op, SimdOp } from "./emitter.ts";

/**
 * Where the exponential clamps: e^-87.3 is just above float32's smallest
 * normal number, so `2^k` stays a normal number; `pushExp` writes 0 below it.
 */
export const EXP_MIN = -87.3;

/**
 * Pushes `e^y` for the v128 local `y` (clamping `y` at `EXP_MIN` in place):
 * `2^k · e^r` with `k = round(y·log2 e)`, `r = y - k·ln 2` in two parts
 * (Cody–Waite) and `e^r` by its Taylor series to degree 6 (relative error
 * below 1e-7 for |r| ≤ ln2 / 2), `2^k` from its exponent bits. Arguments
 * above 0 are not expected (softmax and attention pass `x - max`, gelu
 * `-z²`). `k`, `r` are v128 scratch locals. NaN stays NaN.
 */
export function expOfLocal(f: FunctionCode, y: number, k: number, r: number): void {
  const splat = (v: number) => f.f32x4Const([v, v, v, v]);
  const mul = () => f.simd(SimdOp.f32x4Mul), add = () => f.simd(SimdOp.f32x4Add);
  f.get(y);
  splat(EXP_MIN).simd(SimdOp.f32x4Max).set(y);
  f.get(y);
  splat(Math.LOG2E);
  mul();
  f.simd(SimdOp.f32x4Nearest).set(k);
  f.get(y).get(k);
  splat(0.693359375);
  mul();
  f.simd(SimdOp.f32x4Sub).get(k);
  splat(-2.12194440e-4);
  mul();
  f.simd(SimdOp.f32x4Sub).set(r);
  splat(1 / 720);
  for (const c of [1 / 120, 1 / 24, 1 / 6, 1 / 2, 1, 1]) {
    f.get(r);
    mul();
    splat(c);
    add();
  }
  f.get(k).simd(SimdOp.i32x4TruncSatF32x4S);
  f.i32(127).simd(SimdOp.i32x4Splat).simd(SimdOp.i32x4Add).i32(23).simd(SimdOp.i32x4Shl);
  mul();
}

/** Pushes `e^x` for the v128 local `x` (at most 0), 0 where `x < EXP_MIN`; `y`, `k`, `r` are scratch. */
export function pushExp(f: FunctionCode, x: number, y: number, k: number, r: number): void {
  f.get(x).set(y);
  f.f32x4Const([0, 0, 0, 0]);
  expOfLocal(f, y, k, r);
  f.get(x).f32x4Const([EXP_MIN, EXP_MIN, EXP_MIN, EXP_MIN]).simd(SimdOp.f32x4Lt);
  f.simd(SimdOp.v128Bitselect);
}

/** Pushes the four float32 lanes of v128 local `v` folded by `op` (f32.add or f32.max), in lane order. */
export function pushFold(f: FunctionCode, v: number, op: number): void {
  f.get(v).simdLane(SimdOp.f32x4ExtractLane, 0);
  for (let lane = 1; lane < 4; lane++) f.get(v).simdLane(SimdOp.f32x4ExtractLane, lane).op(op);
}

/** Pushes the address `p + i`. */
export function at(f: FunctionCode, p: number, i: number): FunctionCode {
  return f.get(p).get(i).op(Op.i32Add);
}
