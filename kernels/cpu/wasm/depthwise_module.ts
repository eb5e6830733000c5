/**
 * The depthwise convolution kernels of the CPU's WebAssembly path, in the
 * matrix kernels' module (gemm_module.ts) so that the worker pool runs them
 * (depthwise.ts splits a call's channel planes over its threads): one
 * plane's 1×1, 3×3 or 5×5 window of horizontal stride 1 over a copy of the input
 * plane zero-padded in the calling block's scratch, so every output reads
 * its whole window and the loop has no edges.
 *
 * Every function takes `(desc, scr, index)`: `desc` the byte address of
 * the call's geometry (int32s, `DW_DESC`, written once by depthwise.ts),
 * `scr` the block's scratch (the padded plane at its start, the plane's
 * outputs `DW_DESC.outOff` bytes on, rows `DW_DESC.owvBytes` apart), and
 * the plane the step is for:
 *
 * - `dw_zero(desc, scr)` zeroes the block's padded plane, once per block
 *   (on the block's thread: zeroing every block's on the calling thread cost
 *   as much as a thread saved where planes are large and few);
 * - `dw_in(desc, scr, q)` copies input plane `q`'s rows that land in the
 *   padded plane (the padding stays zero: every plane writes the same
 *   interior);
 * - `dw3(desc, scr, m)` (and `dw1`, `dw5`): output row `oy < OH`, columns four at
 *   a time, is `bias[m] + Σ w[m, ky, kx] · x[oy·sh + ky, ox + kx]`. The
 *   weights are splatted into locals once per plane, and the `K·K` loads of
 *   each vector of outputs are offsets from `K` row pointers: each input is
 *   read `K` times from L1 where the TypeScript loop of kernels/cpu/conv2d.ts
 *   read and added one product at a time;
 * - `dw_out(desc, scr, p)` copies the outputs into output plane `p`.
 *
 * At horizontal stride 2 (`DW_DESC.sw`) `dw_in` writes each padded row as
 * its even columns, then its odd ones (`wpBytes / 2` apart), and the
 * kernel reads window column `kx` of output `ox` as element `ox + ⌊kx/2⌋`
 * of half `kx mod 2`: consecutive outputs read consecutive values, so only
 * the outputs kept are computed.
 *
 * A multiply-add is one `f32x4.relaxed_madd` where the module has relaxed
 * SIMD (fused or not as the hardware does it), a multiply then an add
 * otherwise; either way a plane's values are the same whichever thread
 * computes it and however the planes are split. At vertical stride 1 the
 * kernel computes two output rows at once: each input vector it loads
 * serves both (`K + 1` rows of loads for two rows of outputs, not `2K`).
 *
 * @module
 */

import { type FunctionCode, type ModuleBuilder, Op, SimdOp, ValType } from "./emitter.ts";

const { i32, v128 } = ValType;

/** The window widths (and heights) the module has a kernel for. */
export const DEPTHWISE_WASM_SIZES: readonly number[] = [1, 3, 5];

/**
 * The byte offsets of the geometry's int32 fields at `desc` (all sizes
 * and addresses in bytes): the input (`xp`, a plane `planeBytes`, a row
 * `wBytes`), the part of each input plane that is copied (`padRows` rows of
 * `padBytes` from `srcOff` into the padded plane at `dstOff`, rows
 * `wpBytes` apart there), the weights (`wp`, `kkBytes` a plane) and biases
 * (`bp`), the outputs in the scratch (`outOff`, `oh` rows of `owvBytes`,
 * input rows `stepBytes` apart: vertical stride × `wpBytes`), the output
 * (`op`, `oPlaneBytes` a plane, `owBytes` a row), the horizontal stride,
 * and at stride 2 the padded column of each row's first copied value
 * (`col0`; `dstOff` is then the row's start).
 */
export const DW_DESC = {
  xp: 0,
  planeBytes: 4,
  srcOff: 8,
  wBytes: 12,
  dstOff: 16,
  padRows: 20,
  padBytes: 24,
  wpBytes: 28,
  wp: 32,
  kkBytes: 36,
  bp: 40,
  outOff: 44,
  oh: 48,
  owvBytes: 52,
  stepBytes: 56,
  op: 60,
  oPlaneBytes: 64,
  owBytes: 68,
  sw: 72,
  col0: 76,
} as const;

/** Int32s the geometry takes. */
export const DW_DESC_INTS = 20;

/** Loads the geometry's field `field` (an i32 on the stack). */
function field(f: FunctionCode, desc: number, at: number): void {
  f.get(desc).mem(Op.i32Load, 2, at);
}

/**
 * `n` bytes (a multiple of 4) from `src` to `dst`: vectors, then the last
 * floats one by one (also windows_module.ts's `pad_planes`).
 */
export function emitCopyRow(
  f: FunctionCode,
  src: number,
  dst: number,
  n: number,
  i: number,
  vecEnd: number,
): void {
  f.get(n).i32(-16).op(Op.i32And).set(vecEnd);
  f.forLoop(i, 0, vecEnd, 16, () => {
    f.get(dst).get(i).op(Op.i32Add);
    f.get(src).get(i).op(Op.i32Add).simdMem(SimdOp.v128Load, 0);
    f.simdMem(SimdOp.v128Store, 0);
  });
  f.get(vecEnd).set(i);
  f.block().loop();
  f.get(i).get(n).op(Op.i32GeS).brIf(1);
  f.get(dst).get(i).op(Op.i32Add);
  f.get(src).get(i).op(Op.i32Add).mem(Op.f32Load, 2);
  f.mem(Op.f32Store, 2);
  f.get(i).i32(4).op(Op.i32Add).set(i);
  f.br(0).end().end();
}

function emitZero(m: ModuleBuilder): void {
  const f = m.function("dw_zero", [i32, i32]);
  const [desc, scr] = [0, 1];
  const i = f.local(i32), end = f.local(i32);
  field(f, desc, DW_DESC.outOff);
  f.set(end);
  f.forLoop(i, 0, end, 16, () => {
    f.get(scr).get(i).op(Op.i32Add).f32x4Const([0, 0, 0, 0]).simdMem(SimdOp.v128Store, 0);
  });
}

function emitIn(m: ModuleBuilder): void {
  const f = m.function("dw_in", [i32, i32, i32]);
  const [desc, scr, q] = [0, 1, 2];
  const src = f.local(i32), dst = f.local(i32), r = f.local(i32), rows = f.local(i32);
  const n = f.local(i32), i = f.local(i32), vecEnd = f.local(i32);
  const wBytes = f.local(i32), wpBytes = f.local(i32);
  const D = DW_DESC;
  field(f, desc, D.xp);
  f.get(q);
  field(f, desc, D.planeBytes);
  f.op(Op.i32Mul).op(Op.i32Add);
  field(f, desc, D.srcOff);
  f.op(Op.i32Add).set(src);
  f.get(scr);
  field(f, desc, D.dstOff);
  f.op(Op.i32Add).set(dst);
  field(f, desc, D.padRows);
  f.set(rows);
  field(f, desc, D.padBytes);
  f.set(n);
  field(f, desc, D.wBytes);
  f.set(wBytes);
  field(f, desc, D.wpBytes);
  f.set(wpBytes);
  field(f, desc, D.sw);
  f.i32(1).op(Op.i32Eq).if();
  f.forLoop(r, 0, rows, 1, () => {
    emitCopyRow(f, src, dst, n, i, vecEnd);
    f.get(src).get(wBytes).op(Op.i32Add).set(src);
    f.get(dst).get(wpBytes).op(Op.i32Add).set(dst);
  });
  f.op(Op.else);
  // Stride 2: padded column c goes to the row's even half (c / 2) or odd half (wpBytes / 2
  // on); `dst` is the row's start, `col0` the padded column of the first value copied.
  const half = f.local(i32), c = f.local(i32), j = f.local(i32), at = f.local(i32);
  const a = f.local(v128), b = f.local(v128);
  f.get(wpBytes).i32(1).op(Op.i32ShrU).set(half);
  /** One value: source byte `j` to padded column `c`; both moved on. */
  const one = () => {
    f.get(dst).get(c).i32(1).op(Op.i32And).get(half).op(Op.i32Mul).op(Op.i32Add);
    f.get(c).i32(1).op(Op.i32ShrU).i32(2).op(Op.i32Shl).op(Op.i32Add);
    f.get(src).get(j).op(Op.i32Add).mem(Op.f32Load, 2);
    f.mem(Op.f32Store, 2);
    f.get(c).i32(1).op(Op.i32Add).set(c);
    f.get(j).i32(4).op(Op.i32Add).set(j);
  };
  f.forLoop(r, 0, rows, 1, () => {
    field(f, desc, D.col0);
    f.set(c);
    f.i32(0).set(j);
    // From an even column on, eight values at a time: their evens to one half, odds to the other.
    f.get(c).i32(1).op(Op.i32And).get(n).i32(0).op(Op.i32GtS).op(Op.i32And).if();
    one();
    f.end();
    f.block().loop();
    f.get(j).i32(32).op(Op.i32Add).get(n).op(Op.i32GtS).brIf(1);
    f.get(src).get(j).op(Op.i32Add).tee(at).simdMem(SimdOp.v128Load, 0).set(a);
    f.get(at).simdMem(SimdOp.v128Load, 0, 16).set(b);
    f.get(dst).get(c).i32(1).op(Op.i32ShrU).i32(2).op(Op.i32Shl).op(Op.i32Add).tee(at);
    shuffle(f, a, b, [0, 2, 4, 6]);
    f.simdMem(SimdOp.v128Store, 0);
    f.get(at).get(half).op(Op.i32Add);
    shuffle(f, a, b, [1, 3, 5, 7]);
    f.simdMem(SimdOp.v128Store, 0);
    f.get(c).i32(8).op(Op.i32Add).set(c);
    f.get(j).i32(32).op(Op.i32Add).set(j);
    f.br(0).end().end();
    f.block().loop();
    f.get(j).get(n).op(Op.i32GeS).brIf(1);
    one();
    f.br(0).end().end();
    f.get(src).get(wBytes).op(Op.i32Add).set(src);
    f.get(dst).get(wpBytes).op(Op.i32Add).set(dst);
  });
  f.end();
}

/**
 * Pushes `i8x16.shuffle` of v128 locals `a` and `b` taking the float32s
 * `floats` (0–3 from `a`, 4–7 from `b`). The emitter has no shuffle of its
 * own; its 16 lane bytes follow the opcode (§5.4.8). Also windows_module.ts's.
 */
export function shuffle(f: FunctionCode, a: number, b: number, floats: readonly number[]): void {
  f.get(a).get(b).simd(0x0d);
  for (const x of floats) f.bytes.push(4 * x, 4 * x + 1, 4 * x + 2, 4 * x + 3);
}

/** Pushes `acc + v · w` and sets `acc`: one fused `relaxed_madd` where the module has it. */
function madd(f: FunctionCode, relaxed: boolean, v: number, w: number, acc: number): void {
  if (relaxed) f.get(v).get(w).get(acc).simd(SimdOp.f32x4RelaxedMadd).set(acc);
  else f.get(acc).get(v).get(w).simd(SimdOp.f32x4Mul).simd(SimdOp.f32x4Add).set(acc);
}

function emitDepthwise(m: ModuleBuilder, K: number, relaxed: boolean): void {
  const f = m.function(`dw${K}`, [i32, i32, i32]);
  const [desc, scr, ch] = [0, 1, 2];
  const xp = f.local(i32), wp = f.local(i32), op = f.local(i32), rows = f.local(i32);
  const wpBytes = f.local(i32), owBytes = f.local(i32), stepBytes = f.local(i32);
  const weights = Array.from({ length: K * K }, () => f.local(v128));
  const rowPtr = Array.from({ length: K + 1 }, () => f.local(i32));
  const oddPtr = Array.from({ length: K + 1 }, () => f.local(i32));
  const oy = f.local(i32), ox = f.local(i32), b = f.local(v128), v = f.local(v128);
  const acc = [f.local(v128), f.local(v128)], pairs = f.local(i32), half = f.local(i32);
  const D = DW_DESC;
  f.get(scr).set(xp);
  field(f, desc, D.wp);
  f.get(ch);
  field(f, desc, D.kkBytes);
  f.op(Op.i32Mul).op(Op.i32Add).set(wp);
  f.get(scr);
  field(f, desc, D.outOff);
  f.op(Op.i32Add).set(op);
  field(f, desc, D.oh);
  f.set(rows);
  field(f, desc, D.wpBytes);
  f.set(wpBytes);
  field(f, desc, D.owvBytes);
  f.set(owBytes);
  field(f, desc, D.stepBytes);
  f.set(stepBytes);
  for (const [t, w] of weights.entries()) {
    f.get(wp).simdMem(SimdOp.v128Load32Splat, 2, 4 * t).set(w);
  }
  field(f, desc, D.bp);
  f.get(ch).i32(2).op(Op.i32Shl).op(Op.i32Add).simdMem(SimdOp.v128Load32Splat, 2).set(b);
  f.get(wpBytes).i32(1).op(Op.i32ShrU).set(half);
  /**
   * Output rows `n` (1 or 2) from `xp` and `op` on, then both moved past them; with `phases`
   * (horizontal stride 2) each padded row is its even columns, then its odd ones, `half`
   * bytes on: window column `kx` of output `ox` is padded column `2·ox + kx`, element
   * `ox + ⌊kx / 2⌋` of half `kx mod 2`.
   */
  const outputRows = (n: number, phases: boolean) => {
    for (let r = 0; r < K + n - 1; r++) {
      f.get(xp).get(wpBytes).i32(r).op(Op.i32Mul).op(Op.i32Add).set(rowPtr[r]);
      if (phases) f.get(rowPtr[r]).get(half).op(Op.i32Add).set(oddPtr[r]);
    }
    f.forLoop(ox, 0, owBytes, 16, () => {
      for (let j = 0; j < n; j++) f.get(b).set(acc[j]);
      // Input row r feeds output row j through kernel row r - j: each load serves both rows.
      for (let r = 0; r < K + n - 1; r++) {
        for (let kx = 0; kx < K; kx++) {
          const [ptr, offset] = !phases
            ? [rowPtr[r], 4 * kx]
            : kx % 2 === 0
            ? [rowPtr[r], 2 * kx]
            : [oddPtr[r], 2 * (kx - 1)];
          f.get(ptr).get(ox).op(Op.i32Add).simdMem(SimdOp.v128Load, 0, offset).set(v);
          for (let j = 0; j < n; j++) {
            if (r - j >= 0 && r - j < K) madd(f, relaxed, v, weights[(r - j) * K + kx], acc[j]);
          }
        }
      }
      f.get(op).get(ox).op(Op.i32Add).get(acc[0]).simdMem(SimdOp.v128Store, 0);
      if (n > 1) {
        f.get(op).get(owBytes).op(Op.i32Add).get(ox).op(Op.i32Add);
        f.get(acc[1]).simdMem(SimdOp.v128Store, 0);
      }
    });
    for (let j = 0; j < n; j++) {
      f.get(xp).get(stepBytes).op(Op.i32Add).set(xp);
      f.get(op).get(owBytes).op(Op.i32Add).set(op);
    }
  };
  // At vertical stride 1 two output rows share K - 1 of their input rows: pairs of them, then
  // the last row alone when their number is odd; at other strides one row at a time.
  const allRows = (phases: boolean) => {
    f.get(stepBytes).get(wpBytes).op(Op.i32Eq).if();
    f.get(rows).i32(1).op(Op.i32ShrU).i32(1).op(Op.i32Shl).set(pairs);
    f.forLoop(oy, 0, pairs, 2, () => outputRows(2, phases));
    f.get(rows).get(pairs).op(Op.i32Ne).if();
    outputRows(1, phases);
    f.end();
    f.op(Op.else);
    f.forLoop(oy, 0, rows, 1, () => outputRows(1, phases));
    f.end();
  };
  field(f, desc, D.sw);
  f.i32(1).op(Op.i32Eq).if();
  allRows(false);
  f.op(Op.else);
  allRows(true);
  f.end();
}

function emitOut(m: ModuleBuilder): void {
  const f = m.function("dw_out", [i32, i32, i32]);
  const [desc, scr, p] = [0, 1, 2];
  const src = f.local(i32), dst = f.local(i32), r = f.local(i32), rows = f.local(i32);
  const n = f.local(i32), i = f.local(i32), vecEnd = f.local(i32), owvBytes = f.local(i32);
  const D = DW_DESC;
  f.get(scr);
  field(f, desc, D.outOff);
  f.op(Op.i32Add).set(src);
  field(f, desc, D.op);
  f.get(p);
  field(f, desc, D.oPlaneBytes);
  f.op(Op.i32Mul).op(Op.i32Add).set(dst);
  field(f, desc, D.oh);
  f.set(rows);
  field(f, desc, D.owBytes);
  f.set(n);
  field(f, desc, D.owvBytes);
  f.set(owvBytes);
  f.forLoop(r, 0, rows, 1, () => {
    emitCopyRow(f, src, dst, n, i, vecEnd);
    f.get(src).get(owvBytes).op(Op.i32Add).set(src);
    f.get(dst).get(n).op(Op.i32Add).set(dst);
  });
}

/**
 * Emits `dw_zero`, `dw_in`, `dw1`, `dw3`, `dw5` and `dw_out` into `m` (the matrix kernels'
 * module), with fused multiply-adds where `relaxed`.
 */
export function emitDepthwiseKernels(m: ModuleBuilder, relaxed: boolean): void {
  emitZero(m);
  emitIn(m);
  for (const K of DEPTHWISE_WASM_SIZES) emitDepthwise(m, K, relaxed);
  emitOut(m);
}
