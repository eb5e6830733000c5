/**
 * The row kernels of the CPU's WebAssembly path: float32 operators that
 * walk a tensor one row of its last axis at a time, four lanes per step.
 *
 * - `layer_norm(xp, gp, bp, rows, n, eps)`: in place over `rows` rows of `n`
 *   values, mean, variance (two passes, as kernels/cpu/layer_norm.ts does,
 *   since `E[x²] - E[x]²` cancels) and the normalize-scale-shift pass;
 * - `softmax(xp, rows, n)`: in place, the row maximum, `exp(x - max)` and
 *   its sum in one pass, then the scaling: the whole operator, where
 *   unary.ts once took only the exponentials into WebAssembly and left the maxima and
 *   sums to TypeScript;
 * - `row_sum(xp, op, rows, n, mean)` and `row_max(xp, op, rows, n)`: one
 *   float32 per row at `op`; sums accumulate in float64 (two pairs of
 *   lanes), as reduce.ts's TypeScript accumulators do, so a long row does not
 *   drift.
 *
 * Rows need not be a multiple of four long. The last, partial vector of a
 * row is read whole (its extra lanes are the next row's values, or the
 * padding the caller leaves after the last row) and masked: ignored by the
 * reductions, and written back unchanged by the in-place kernels, so a row
 * never disturbs the next. Addresses are bytes; rows need no alignment.
 *
 * The module is SIMD128 only (no fused multiply-add is needed) and imports
 * the same ordinary memory as gemm_module.ts's local instance, so both read
 * the scratch that runtime.ts's `scratchView` grows.
 *
 * @module
 */

import {
  type FunctionCode,
  type MemoryImport,
  ModuleBuilder,
  Op,
  SimdOp,
  ValType,
} from "./emitter.ts";
import { emitAttention } from "./attention_module.ts";
import { at, pushExp, pushFold } from "./simd_helpers.ts";

const { i32, f32, f64, v128 } = ValType;

/**
 * The locals every row kernel needs: `full`, the bytes of a row's whole
 * vectors; `rem`, the values left (0–3); `mask`, all-ones lanes below
 * `rem`; and the row pointer `p` and byte index `i`.
 */
function rowLocals(f: FunctionCode, n: number) {
  const full = f.local(i32), rem = f.local(i32), p = f.local(i32), i = f.local(i32);
  const row = f.local(i32), mask = f.local(v128);
  f.get(n).i32(-4).op(Op.i32And).i32(2).op(Op.i32Shl).set(full);
  f.get(n).i32(3).op(Op.i32And).set(rem);
  f.get(rem).simd(SimdOp.i32x4Splat).i32x4Const([0, 1, 2, 3]).simd(SimdOp.i32x4GtS).set(mask);
  return { full, rem, p, i, row, mask };
}

function emitLayerNorm(m: ModuleBuilder): void {
  const f = m.function("layer_norm", [i32, i32, i32, i32, i32, f32]);
  const [xp, gp, bp, rows, n, eps] = [0, 1, 2, 3, 4, 5];
  const { full, rem, p, i, row, mask } = rowLocals(f, n);
  const acc = f.local(v128), d = f.local(v128), mean = f.local(v128), scale = f.local(v128);
  const s1 = f.local(v128), corr = f.local(v128), nf = f.local(f32), c = f.local(f32);
  const amax = f.local(v128), xv = f.local(v128), sv = f.local(v128);
  const am = f.local(f32), s = f.local(f32), epsS = f.local(f32);
  const exponent = f.local(i32), big = f.local(i32);
  const load = (base: number, idx: number) => at(f, base, idx).simdMem(SimdOp.v128Load, 0);
  const zero = () => f.f32x4Const([0, 0, 0, 0]);
  f.get(n).op(Op.f32ConvertI32S).set(nf);
  f.get(xp).set(p);
  f.forLoop(row, 0, rows, 1, () => {
    // the sum, and the largest magnitude
    zero().tee(acc).set(amax);
    const take = () => {
      f.tee(xv).get(acc).simd(SimdOp.f32x4Add).set(acc);
      f.get(amax).get(xv).simd(SimdOp.f32x4Abs).simd(SimdOp.f32x4Max).set(amax);
    };
    f.forLoop(i, 0, full, 16, () => {
      load(p, i);
      take();
    });
    f.get(rem).if();
    load(p, full);
    zero().get(mask).simd(SimdOp.v128Bitselect);
    take();
    f.end();
    // A row whose largest magnitude is 2^60 or more (finite) is scaled by s = 2^(128 - e), e its
    // biased exponent, to [2, 4): exact, and its sum and squares stay in range (else 1e20 squares
    // to Infinity and the row normalizes to 0). eps scales by s² (floored so that a constant row
    // stays 0, not 0 · Infinity).
    pushFold(f, amax, Op.f32Max);
    f.set(am);
    f.get(am).op(Op.i32ReinterpretF32).i32(23).op(Op.i32ShrU).set(exponent);
    f.get(exponent).i32(187).op(Op.i32GeS).get(exponent).i32(255).op(Op.i32Ne).op(Op.i32And);
    f.set(big);
    f.i32(255).get(exponent).op(Op.i32Sub).i32(127).get(big).op(Op.select);
    f.i32(23).op(Op.i32Shl).op(Op.f32ReinterpretI32).tee(s).simd(SimdOp.f32x4Splat).set(sv);
    f.get(eps).set(epsS);
    f.get(big).if();
    zero().set(acc);
    f.forLoop(i, 0, full, 16, () => {
      f.get(acc);
      load(p, i).get(sv).simd(SimdOp.f32x4Mul).simd(SimdOp.f32x4Add).set(acc);
    });
    f.get(rem).if();
    f.get(acc);
    load(p, full);
    zero().get(mask).simd(SimdOp.v128Bitselect).get(sv).simd(SimdOp.f32x4Mul);
    f.simd(SimdOp.f32x4Add).set(acc);
    f.end();
    f.get(eps).get(s).op(Op.f32Mul).get(s).op(Op.f32Mul).f32(1.1754943508222875e-38);
    f.op(Op.f32Max).set(epsS);
    f.end();
    // mean
    pushFold(f, acc, Op.f32Add);
    f.get(nf).op(Op.f32Div).simd(SimdOp.f32x4Splat).set(mean);
    // The deviations d = x - mean: their sum (the float32 mean's rounding error, n times) and
    // their squares. corr = Σd / n corrects the mean, var = Σd² / n - corr² (the corrected
    // two-pass form: float32 accumulators are accurate even where the mean is large).
    zero().tee(acc).set(s1);
    const deviation = () => {
      f.tee(d).get(s1).simd(SimdOp.f32x4Add).set(s1);
      f.get(d).get(d).simd(SimdOp.f32x4Mul).get(acc).simd(SimdOp.f32x4Add).set(acc);
    };
    f.forLoop(i, 0, full, 16, () => {
      load(p, i).get(sv).simd(SimdOp.f32x4Mul).get(mean).simd(SimdOp.f32x4Sub);
      deviation();
    });
    f.get(rem).if();
    load(p, full).get(sv).simd(SimdOp.f32x4Mul).get(mean).simd(SimdOp.f32x4Sub);
    zero().get(mask).simd(SimdOp.v128Bitselect);
    deviation();
    f.end();
    pushFold(f, s1, Op.f32Add);
    f.get(nf).op(Op.f32Div).set(c);
    // scale = 1 / sqrt(max(var, 0) + eps)
    f.f32(1);
    pushFold(f, acc, Op.f32Add);
    f.get(nf).op(Op.f32Div).get(c).get(c).op(Op.f32Mul).op(Op.f32Sub).f32(0).op(Op.f32Max);
    f.get(epsS).op(Op.f32Add).op(Op.f32Sqrt).op(Op.f32Div);
    f.simd(SimdOp.f32x4Splat).set(scale);
    f.get(c).simd(SimdOp.f32x4Splat).set(corr);
    // out = ((x - mean) - corr) · scale · gamma + beta
    const normalized = (idx: number) => {
      load(p, idx).get(sv).simd(SimdOp.f32x4Mul).get(mean).simd(SimdOp.f32x4Sub);
      f.get(corr).simd(SimdOp.f32x4Sub);
      f.get(scale).simd(SimdOp.f32x4Mul);
      load(gp, idx).simd(SimdOp.f32x4Mul);
      load(bp, idx).simd(SimdOp.f32x4Add);
    };
    f.forLoop(i, 0, full, 16, () => {
      at(f, p, i);
      normalized(i);
      f.simdMem(SimdOp.v128Store, 0);
    });
    f.get(rem).if();
    at(f, p, full);
    normalized(full);
    load(p, full).get(mask).simd(SimdOp.v128Bitselect).simdMem(SimdOp.v128Store, 0);
    f.end();
    f.get(p).get(n).i32(2).op(Op.i32Shl).op(Op.i32Add).set(p);
  });
}

function emitSoftmax(m: ModuleBuilder): void {
  const f = m.function("softmax", [i32, i32, i32]);
  const [xp, rows, n] = [0, 1, 2];
  const { full, rem, p, i, row, mask } = rowLocals(f, n);
  const acc = f.local(v128), x = f.local(v128), y = f.local(v128), k = f.local(v128);
  const r = f.local(v128), e = f.local(v128), max = f.local(v128), orig = f.local(v128);
  const load = (idx: number) => at(f, p, idx).simdMem(SimdOp.v128Load, 0);
  const minusInf = () => f.f32x4Const([-Infinity, -Infinity, -Infinity, -Infinity]);
  const zero = () => f.f32x4Const([0, 0, 0, 0]);
  f.get(xp).set(p);
  f.forLoop(row, 0, rows, 1, () => {
    // the row maximum (NaN if any value is NaN: f32x4.max propagates it)
    minusInf().set(acc);
    f.forLoop(i, 0, full, 16, () => {
      f.get(acc);
      load(i).simd(SimdOp.f32x4Max).set(acc);
    });
    f.get(rem).if();
    f.get(acc);
    load(full);
    minusInf().get(mask).simd(SimdOp.v128Bitselect).simd(SimdOp.f32x4Max).set(acc);
    f.end();
    pushFold(f, acc, Op.f32Max);
    f.simd(SimdOp.f32x4Splat).set(max);
    // e = exp(x - max), stored in place, and its sum
    zero().set(acc);
    f.forLoop(i, 0, full, 16, () => {
      load(i).get(max).simd(SimdOp.f32x4Sub).set(x);
      at(f, p, i);
      pushExp(f, x, y, k, r);
      f.tee(e).simdMem(SimdOp.v128Store, 0);
      f.get(acc).get(e).simd(SimdOp.f32x4Add).set(acc);
    });
    f.get(rem).if();
    load(full).tee(orig).get(max).simd(SimdOp.f32x4Sub).set(x);
    pushExp(f, x, y, k, r);
    zero().get(mask).simd(SimdOp.v128Bitselect).set(e);
    f.get(acc).get(e).simd(SimdOp.f32x4Add).set(acc);
    at(f, p, full).get(e).get(orig).get(mask).simd(SimdOp.v128Bitselect);
    f.simdMem(SimdOp.v128Store, 0);
    f.end();
    // scale by 1 / sum
    f.f32(1);
    pushFold(f, acc, Op.f32Add);
    f.op(Op.f32Div).simd(SimdOp.f32x4Splat).set(acc);
    f.forLoop(i, 0, full, 16, () => {
      at(f, p, i);
      load(i).get(acc).simd(SimdOp.f32x4Mul).simdMem(SimdOp.v128Store, 0);
    });
    f.get(rem).if();
    at(f, p, full);
    load(full).tee(orig).get(acc).simd(SimdOp.f32x4Mul).get(orig).get(mask);
    f.simd(SimdOp.v128Bitselect).simdMem(SimdOp.v128Store, 0);
    f.end();
    f.get(p).get(n).i32(2).op(Op.i32Shl).op(Op.i32Add).set(p);
  });
}

function emitRowSum(m: ModuleBuilder): void {
  const f = m.function("row_sum", [i32, i32, i32, i32, i32]);
  const [xp, op, rows, n, mean] = [0, 1, 2, 3, 4];
  const { full, p, i, row } = rowLocals(f, n);
  const a0 = f.local(v128), a1 = f.local(v128), bytes = f.local(i32);
  const s = f.local(f64);
  const half = (offset: number, acc: number) => {
    f.get(acc);
    at(f, p, i).simdMem(SimdOp.v128Load64Zero, 0, offset).simd(SimdOp.f64x2PromoteLowF32x4);
    f.simd(SimdOp.f64x2Add).set(acc);
  };
  f.get(n).i32(2).op(Op.i32Shl).set(bytes);
  f.get(xp).set(p);
  f.forLoop(row, 0, rows, 1, () => {
    f.f32x4Const([0, 0, 0, 0]).tee(a0).set(a1);
    f.forLoop(i, 0, full, 16, () => {
      half(0, a0);
      half(8, a1);
    });
    f.get(a0).get(a1).simd(SimdOp.f64x2Add).set(a0);
    f.get(a0).simdLane(SimdOp.f64x2ExtractLane, 0);
    f.get(a0).simdLane(SimdOp.f64x2ExtractLane, 1).op(Op.f64Add).set(s);
    // the last 0–3 values, one at a time
    f.get(full).set(i);
    f.block().loop();
    f.get(i).get(bytes).op(Op.i32GeS).brIf(1);
    f.get(s);
    at(f, p, i).mem(Op.f32Load, 0).op(Op.f64PromoteF32).op(Op.f64Add).set(s);
    f.get(i).i32(4).op(Op.i32Add).set(i).br(0);
    f.end().end();
    f.get(mean).if();
    f.get(s).get(n).op(Op.f64ConvertI32S).op(Op.f64Div).set(s);
    f.end();
    f.get(op).get(row).i32(2).op(Op.i32Shl).op(Op.i32Add);
    f.get(s).op(Op.f32DemoteF64).mem(Op.f32Store, 0);
    f.get(p).get(bytes).op(Op.i32Add).set(p);
  });
}

function emitRowMax(m: ModuleBuilder): void {
  const f = m.function("row_max", [i32, i32, i32, i32]);
  const [xp, op, rows, n] = [0, 1, 2, 3];
  const { full, rem, p, i, row, mask } = rowLocals(f, n);
  const acc = f.local(v128);
  f.get(xp).set(p);
  f.forLoop(row, 0, rows, 1, () => {
    f.f32x4Const([-Infinity, -Infinity, -Infinity, -Infinity]).set(acc);
    f.forLoop(i, 0, full, 16, () => {
      f.get(acc);
      at(f, p, i).simdMem(SimdOp.v128Load, 0).simd(SimdOp.f32x4Max).set(acc);
    });
    f.get(rem).if();
    f.get(acc);
    at(f, p, full).simdMem(SimdOp.v128Load, 0);
    f.f32x4Const([-Infinity, -Infinity, -Infinity, -Infinity]).get(mask);
    f.simd(SimdOp.v128Bitselect).simd(SimdOp.f32x4Max).set(acc);
    f.end();
    f.get(op).get(row).i32(2).op(Op.i32Shl).op(Op.i32Add);
    pushFold(f, acc, Op.f32Max);
    f.mem(Op.f32Store, 0);
    f.get(p).get(n).i32(2).op(Op.i32Shl).op(Op.i32Add).set(p);
  });
}

/** The binary operators of `binary_<op>`, with their f32x4 instruction. */
export const ROWS_BINARY_OPS = {
  add: SimdOp.f32x4Add,
  subtract: SimdOp.f32x4Sub,
  multiply: SimdOp.f32x4Mul,
  divide: SimdOp.f32x4Div,
} as const;

/**
 * `binary_<op>(ap, aStep, bp, bStep, op, rows, n)`: `o = a <op> b` over
 * `rows` rows of `n` values, the operands' row pointers advancing by
 * `aStep` and `bStep` bytes per row (0 for a row broadcast over every row:
 * a bias add; `rows = 1` for same shapes). Whole vectors: the last vector of
 * a row writes up to three values past it, which the next row overwrites (or
 * the caller's padding absorbs), and reads as many past each operand's row.
 * float32 arithmetic is correctly rounded, so each value equals
 * TypeScript's (computed in double, rounded once on store).
 */
function emitBinary(m: ModuleBuilder, name: string, simdOp: number): void {
  const f = m.function(`binary_${name}`, [i32, i32, i32, i32, i32, i32, i32]);
  const [ap, aStep, bp, bStep, op, rows, n] = [0, 1, 2, 3, 4, 5, 6];
  const row = f.local(i32), i = f.local(i32), bytes = f.local(i32);
  f.get(n).i32(2).op(Op.i32Shl).set(bytes);
  f.forLoop(row, 0, rows, 1, () => {
    f.forLoop(i, 0, bytes, 16, () => {
      at(f, op, i);
      at(f, ap, i).simdMem(SimdOp.v128Load, 0);
      at(f, bp, i).simdMem(SimdOp.v128Load, 0);
      f.simd(simdOp).simdMem(SimdOp.v128Store, 0);
    });
    f.get(ap).get(aStep).op(Op.i32Add).set(ap);
    f.get(bp).get(bStep).op(Op.i32Add).set(bp);
    f.get(op).get(bytes).op(Op.i32Add).set(op);
  });
}

/**
 * The module's bytes: `layer_norm`, `softmax`, `row_sum`, `row_max`,
 * `binary_add` … `binary_divide` and attention_module.ts's `attention` over
 * the imported `memory`.
 */
export function rowsModuleBytes(memory: MemoryImport): Uint8Array<ArrayBuffer> {
  const m = new ModuleBuilder(memory);
  for (const [name, code] of Object.entries(ROWS_BINARY_OPS)) emitBinary(m, name, code);
  emitLayerNorm(m);
  emitSoftmax(m);
  emitRowSum(m);
  emitRowMax(m);
  emitAttention(m);
  return m.encode();
}
