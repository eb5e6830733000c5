/**
 * Scaled dot-product attention of one head in WebAssembly SIMD, for
 * rows_module.ts's module: `attention(qp, kp, vp, op, sp, Tq, Tk, Dp, Dvp,
 * scale, causal, offset, kStride, vStride)`.
 *
 * The operands are packed by the caller (kernels/cpu/wasm/attention.ts):
 * `Tq` query rows of `Dp` floats and `Tq` output rows of `Dvp`, padded with
 * zeros to a multiple of four (zeros add nothing to a dot product, and the
 * padding of the output is never copied out); `Tk` key rows of `Dp` floats
 * and value rows of `Dvp`, `kStride` and `vStride` bytes apart (a packed
 * head, or one head's rows inside a `"BSHD"` block copied whole). `sp` is scratch for one row of scores, `Tk` rounded up
 * to four, plus four.
 *
 * Per query row, as kernels/cpu/attention.ts does: the scores
 * `scale · q·k_j` of the keys the row sees (all, or with `causal` the first
 * `i + offset + 1`), padded to whole vectors with -Infinity; their maximum;
 * `exp(s - max)` and the sum in one pass; then `Σ_j p_j v_j`, four keys per
 * pass over the output row (value rows past the keys a row sees are never
 * read), and one scaling by `1 / sum`. A row that sees
 * no key is NaN (0 · 1/0), as in TypeScript; NaN scores make the row NaN.
 * Scores past float32's range are +Infinity; when the maximum is +Infinity
 * those keys share the row's weight and the others get none (the softmax's
 * limit), as in TypeScript, instead of `Infinity - Infinity`.
 *
 * @module
 */

import { type ModuleBuilder, Op, SimdOp, ValType } from "./emitter.ts";
import { at, pushExp, pushFold } from "./simd_helpers.ts";

const { i32, f32, v128 } = ValType;

/** Adds `attention` (above) to `m`. */
export function emitAttention(m: ModuleBuilder): void {
  const f = m.function("attention", [
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    f32,
    i32,
    i32,
    i32,
    i32,
  ]);
  const [qp, kp, vp, op, sp, Tq, Tk, Dp, Dvp, scale, causal, offset, kStride, vStride] = [
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
    12,
    13,
  ];
  const row = f.local(i32), j = f.local(i32), d = f.local(i32), keys = f.local(i32);
  const padded = f.local(i32), qRow = f.local(i32), kRow = f.local(i32), oRow = f.local(i32);
  const dBytes = f.local(i32), dvBytes = f.local(i32), vRow = f.local(i32), keys4 = f.local(i32);
  const acc = f.local(v128), x = f.local(v128), y = f.local(v128), k = f.local(v128);
  const r = f.local(v128), e = f.local(v128), max = f.local(v128), top = f.local(f32);
  const p0 = f.local(v128), p1 = f.local(v128), p2 = f.local(v128), p3 = f.local(v128);
  const load = (base: number, idx: number) => at(f, base, idx).simdMem(SimdOp.v128Load, 0);
  const store = () => f.simdMem(SimdOp.v128Store, 0);
  const bytesOf = (count: number) => f.get(count).i32(2).op(Op.i32Shl);
  bytesOf(Dp).set(dBytes);
  bytesOf(Dvp).set(dvBytes);
  f.get(qp).set(qRow);
  f.get(op).set(oRow);
  f.forLoop(row, 0, Tq, 1, () => {
    // keys = causal ? clamp(row + offset + 1, 0, Tk) : Tk
    f.get(Tk).set(keys);
    f.get(causal).if();
    f.get(row).get(offset).op(Op.i32Add).i32(1).op(Op.i32Add).set(keys);
    f.get(keys).i32(0).op(Op.i32LtS).if().i32(0).set(keys).end();
    f.get(keys).get(Tk).op(Op.i32GtS).if().get(Tk).set(keys).end();
    f.end();
    // scores, then -Infinity up to a whole vector
    f.get(kp).set(kRow);
    f.forLoop(j, 0, keys, 1, () => {
      f.f32x4Const([0, 0, 0, 0]).set(acc);
      f.forLoop(d, 0, dBytes, 16, () => {
        load(qRow, d);
        load(kRow, d).simd(SimdOp.f32x4Mul).get(acc).simd(SimdOp.f32x4Add).set(acc);
      });
      f.get(sp).get(j).i32(2).op(Op.i32Shl).op(Op.i32Add);
      pushFold(f, acc, Op.f32Add);
      f.get(scale).op(Op.f32Mul).mem(Op.f32Store, 0);
      f.get(kRow).get(kStride).op(Op.i32Add).set(kRow);
    });
    f.get(keys).i32(3).op(Op.i32Add).i32(-4).op(Op.i32And).set(padded);
    f.block().loop();
    f.get(j).get(padded).op(Op.i32GeS).brIf(1);
    f.get(sp).get(j).i32(2).op(Op.i32Shl).op(Op.i32Add).f32(-Infinity).mem(Op.f32Store, 0);
    f.get(j).i32(1).op(Op.i32Add).set(j).br(0);
    f.end().end();
    bytesOf(padded).set(padded);
    // the maximum, then exp(s - max) in place and its sum
    f.f32x4Const([-Infinity, -Infinity, -Infinity, -Infinity]).set(acc);
    f.forLoop(j, 0, padded, 16, () => {
      f.get(acc);
      load(sp, j).simd(SimdOp.f32x4Max).set(acc);
    });
    // A score past float32's range is +Infinity: such keys share the row's weight, the others
    // get none (the limit of the softmax), rather than Infinity - Infinity = NaN.
    pushFold(f, acc, Op.f32Max);
    f.tee(top).f32(Infinity).op(Op.f32Eq).if();
    f.forLoop(j, 0, padded, 16, () => {
      at(f, sp, j);
      f.f32x4Const([0, 0, 0, 0]).f32x4Const([-Infinity, -Infinity, -Infinity, -Infinity]);
      load(sp, j).f32x4Const([Infinity, Infinity, Infinity, Infinity]).simd(SimdOp.f32x4Eq);
      f.simd(SimdOp.v128Bitselect);
      store();
    });
    f.f32(0).set(top);
    f.end();
    f.get(top).simd(SimdOp.f32x4Splat).set(max);
    f.f32x4Const([0, 0, 0, 0]).set(acc);
    f.forLoop(j, 0, padded, 16, () => {
      load(sp, j).get(max).simd(SimdOp.f32x4Sub).set(x);
      at(f, sp, j);
      pushExp(f, x, y, k, r);
      f.tee(e);
      store();
      f.get(acc).get(e).simd(SimdOp.f32x4Add).set(acc);
    });
    // the output row: zero, then Σ p_j v_j four keys a pass (the padded scores are 0)
    f.forLoop(d, 0, dvBytes, 16, () => {
      at(f, oRow, d).f32x4Const([0, 0, 0, 0]);
      store();
    });
    f.get(vp).set(vRow);
    f.get(keys).i32(-4).op(Op.i32And).set(keys4);
    const splatScore = (lane: number, into: number) => {
      f.get(sp).get(j).i32(2).op(Op.i32Shl).op(Op.i32Add);
      f.simdMem(SimdOp.v128Load32Splat, 0, lane * 4).set(into);
    };
    const term = (lane: number, p: number) => {
      at(f, vRow, d);
      if (lane > 0) f.get(vStride).i32(lane).op(Op.i32Mul).op(Op.i32Add);
      f.simdMem(SimdOp.v128Load, 0).get(p).simd(SimdOp.f32x4Mul).simd(SimdOp.f32x4Add);
    };
    f.forLoop(j, 0, keys4, 4, () => {
      splatScore(0, p0);
      splatScore(1, p1);
      splatScore(2, p2);
      splatScore(3, p3);
      f.forLoop(d, 0, dvBytes, 16, () => {
        at(f, oRow, d);
        load(oRow, d);
        term(0, p0);
        term(1, p1);
        term(2, p2);
        term(3, p3);
        store();
      });
      f.get(vRow).get(vStride).i32(2).op(Op.i32Shl).op(Op.i32Add).set(vRow);
    });
    // the last 0–3 keys one at a time (the value rows past `keys` are never read)
    f.get(keys4).set(j);
    f.block().loop();
    f.get(j).get(keys).op(Op.i32GeS).brIf(1);
    splatScore(0, p0);
    f.forLoop(d, 0, dvBytes, 16, () => {
      at(f, oRow, d);
      load(oRow, d);
      term(0, p0);
      store();
    });
    f.get(vRow).get(vStride).op(Op.i32Add).set(vRow);
    f.get(j).i32(1).op(Op.i32Add).set(j).br(0);
    f.end().end();
    // scale by 1 / sum
    f.f32(1);
    pushFold(f, acc, Op.f32Add);
    f.op(Op.f32Div).simd(SimdOp.f32x4Splat).set(acc);
    f.forLoop(d, 0, dvBytes, 16, () => {
      at(f, oRow, d);
      load(oRow, d).get(acc).simd(SimdOp.f32x4Mul);
      store();
    });
    f.get(qRow).get(dBytes).op(Op.i32Add).set(qRow);
    f.get(oRow).get(dvBytes).op(Op.i32Add).set(oRow);
  });
}
