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
 * @module
 */

import { type ModuleBuilder, Op, SimdOp, ValType } from "./emitter.ts";

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
