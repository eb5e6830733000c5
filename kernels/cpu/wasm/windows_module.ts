/**
 * `pack_windows`, in the matrix kernels' module (gemm_module.ts) so that the
 * worker pool runs it: a convolution's windows written as the product's B
 * panels (`[K][NR]`, kernels/cpu/conv_panels.ts) from an input the caller
 * has copied into the shared memory zero-padded, so that every window lies
 * inside and the `NR` outputs of a panel (one output row: the caller asks
 * this only for rows a whole number of panels wide, horizontal stride 1)
 * read `NR` consecutive inputs per kernel element.
 *
 * `pack_windows(src, dst, table, K, n, ox, OW, skip)`: panels `p < n` at
 * `dst` (`K · NR` floats each); row `k` of a panel is the `NR` floats at
 * `src + table[k]` (int32 byte offsets: channel, kernel row and column), and
 * `src` moves `NR` floats a panel, by `skip` bytes more where the output
 * column `ox` reaches `OW` (the next output row). Byte addresses, two
 * vector loads and stores a row where TypeScript moved eight floats one by
 * one on the calling thread alone.
 *
 * `pad_planes(src, dst, planes, rows, rowBytes, srcStep, srcRow, srcPlane,
 * dstRow, dstPlane, dataOff)` makes that zero-padded input from a plain
 * copy of the channels: per plane, the `dstPlane` bytes at `dst` zeroed,
 * then `rows` rows of `rowBytes` to `dst + dataOff` (`dstRow` apart) from
 * `src` (`srcRow` apart), each a value every `srcStep` bytes there (4:
 * consecutive, copied by vectors; 8, a column phase at stride 2: the even
 * lanes of vector pairs; any other, one at a time); both move on a
 * plane's bytes. The calling
 * thread copies the channels in as one block and the pool's threads pad
 * them (conv_panels.ts): a typed-array copy and two fills per input row
 * on the calling thread alone took five times as long as the one copy.
 *
 * @module
 */

import { type ModuleBuilder, Op, SimdOp, ValType } from "./emitter.ts";
import { emitCopyRow, shuffle } from "./depthwise_module.ts";

/** Emits `pack_windows` into `m` for panels `NR` floats wide (a multiple of 4). */
export function emitPackWindows(m: ModuleBuilder, NR: number): void {
  const i32 = ValType.i32;
  const f = m.function("pack_windows", [i32, i32, i32, i32, i32, i32, i32, i32]);
  const [src, dst, table, K, n, ox, OW, skip] = [0, 1, 2, 3, 4, 5, 6, 7];
  const p = f.local(i32), k = f.local(i32), at = f.local(i32), kBytes = f.local(i32);
  f.get(K).i32(2).op(Op.i32Shl).set(kBytes);
  f.forLoop(p, 0, n, 1, () => {
    f.forLoop(k, 0, kBytes, 4, () => {
      f.get(src).get(table).get(k).op(Op.i32Add).mem(Op.i32Load, 2).op(Op.i32Add).set(at);
      for (let v = 0; v < NR / 4; v++) {
        f.get(dst).get(at).simdMem(SimdOp.v128Load, 0, 16 * v).simdMem(SimdOp.v128Store, 2, 16 * v);
      }
      f.get(dst).i32(NR * 4).op(Op.i32Add).set(dst);
    });
    f.get(src).i32(NR * 4).op(Op.i32Add).set(src);
    f.get(ox).i32(NR).op(Op.i32Add).set(ox);
    f.get(ox).get(OW).op(Op.i32GeS).if();
    f.i32(0).set(ox);
    f.get(src).get(skip).op(Op.i32Add).set(src);
    f.end();
  });
}

/** Emits `pad_planes` into `m`. */
export function emitPadPlanes(m: ModuleBuilder): void {
  const i32 = ValType.i32;
  const f = m.function("pad_planes", new Array(11).fill(i32));
  // The parameters, in order.
  const [src, dst, planes, rows, rowBytes, srcStep, srcRow, srcPlane, dstRow, dstPlane, dataOff] =
    Array.from({ length: 11 }, (_, k) => k);
  const p = f.local(i32), r = f.local(i32), i = f.local(i32), vecEnd = f.local(i32);
  const from = f.local(i32), to = f.local(i32), at = f.local(i32);
  const va = f.local(ValType.v128), vb = f.local(ValType.v128);
  f.forLoop(p, 0, planes, 1, () => {
    // The plane zeroed: vectors, then the last floats.
    f.get(dstPlane).i32(-16).op(Op.i32And).set(vecEnd);
    f.forLoop(i, 0, vecEnd, 16, () => {
      f.get(dst).get(i).op(Op.i32Add).f32x4Const([0, 0, 0, 0]).simdMem(SimdOp.v128Store, 0);
    });
    f.get(vecEnd).set(i);
    f.block().loop();
    f.get(i).get(dstPlane).op(Op.i32GeS).brIf(1);
    f.get(dst).get(i).op(Op.i32Add).f32(0).mem(Op.f32Store, 2);
    f.get(i).i32(4).op(Op.i32Add).set(i);
    f.br(0).end().end();
    f.get(src).set(from);
    f.get(dst).get(dataOff).op(Op.i32Add).set(to);
    f.forLoop(r, 0, rows, 1, () => {
      f.get(srcStep).i32(4).op(Op.i32Eq).if();
      emitCopyRow(f, from, to, rowBytes, i, vecEnd);
      f.op(Op.else);
      // A column phase: every srcStep-th value of the row. At stride 2, four a step from two
      // vector loads (their even lanes), while the loads stay inside the row's values; the rest
      // one at a time.
      f.get(from).set(at);
      f.i32(0).set(i);
      f.get(srcStep).i32(8).op(Op.i32Eq).if();
      f.block().loop();
      f.get(i).i32(16).op(Op.i32Add).get(rowBytes).op(Op.i32GeS).brIf(1);
      f.get(at).simdMem(SimdOp.v128Load, 0).set(va);
      f.get(at).simdMem(SimdOp.v128Load, 0, 16).set(vb);
      f.get(to).get(i).op(Op.i32Add);
      shuffle(f, va, vb, [0, 2, 4, 6]);
      f.simdMem(SimdOp.v128Store, 0);
      f.get(i).i32(16).op(Op.i32Add).set(i);
      f.get(at).i32(32).op(Op.i32Add).set(at);
      f.br(0).end().end();
      f.end();
      f.block().loop();
      f.get(i).get(rowBytes).op(Op.i32GeS).brIf(1);
      f.get(to).get(i).op(Op.i32Add).get(at).mem(Op.f32Load, 2).mem(Op.f32Store, 2);
      f.get(at).get(srcStep).op(Op.i32Add).set(at);
      f.get(i).i32(4).op(Op.i32Add).set(i);
      f.br(0).end().end();
      f.end();
      f.get(from).get(srcRow).op(Op.i32Add).set(from);
      f.get(to).get(dstRow).op(Op.i32Add).set(to);
    });
    f.get(src).get(srcPlane).op(Op.i32Add).set(src);
    f.get(dst).get(dstPlane).op(Op.i32Add).set(dst);
  });
}
