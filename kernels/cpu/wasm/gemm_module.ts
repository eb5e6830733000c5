/**
 * The WebAssembly of the float32 matrix kernels, written with emitter.ts.
 *
 * - `gemm_tiles` is the register-blocked core of a BLIS-style product
 *   (kernels/cpu/wasm/gemm.ts drives it): A row-major as copied in (one
 *   pointer per row of the tile, rows `lda` apart), B packed into column
 *   panels of `NR` columns (`[K][NR]`), and for every tile an `MR × NR`
 *   block of C held in `MR · NR / 4` SIMD accumulators over one block of k
 *   (`kc` steps; later blocks add to C). Per step of k it loads `NR / 4`
 *   vectors of B and splats `MR` values of A: with the 6 × 8 tile that is
 *   12 multiply-adds on 12 independent accumulators (enough to hide the add
 *   latency) for 8 loads, in 15 of the 16 vector registers of x64. Four
 *   steps of k per pass, their loads at immediate offsets, so the pointers
 *   move once per four steps. Measured best of 40 on 512 × 512, one thread,
 *   shared machine: A packed `[K][MR]` with a 4 × 8 tile 33–34 GFLOP/s, 6 ×
 *   8 37, 6 × 8 on unpacked A unrolled by four 44–48. Panels are visited
 *   column panel outer, so one B panel's block of k (`kc · NR · 4` bytes)
 *   stays in L1 while the block of A rows (sized by the driver for L2)
 *   passes over it. `gemm_windows` is the same over a B never packed: a
 *   convolution's windows read in place (kernels/cpu/conv_panels.ts).
 * - `dot_rows` is the decode-shaped matrix-vector product: `out[j] = x ·
 *   w[j]` for rows of a weight stored `[N, K]`, four rows and eight values of
 *   K per step (eight accumulators), so each vector of x serves four rows.
 *   `dot_panels` is the same over a weight packed in panels of four rows.
 *
 * With relaxed SIMD a multiply-add is one `f32x4.relaxed_madd` (fused on
 * hardware with FMA); without it, `f32x4.mul` then `f32x4.add`.
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
import { emitPackWindows, emitPadPlanes } from "./windows_module.ts";
import { emitConvEpilogue } from "./epilogue_module.ts";
import { emitDepthwiseKernels } from "./depthwise_module.ts";
import { expOfLocal, pushFold } from "./simd_helpers.ts";

/** Rows of A per micro-tile. */
export const MR = 6;
/** Columns of B per micro-tile (a multiple of 4: whole SIMD vectors). */
export const NR = 8;
/** Rows of the weight per step of `dot_rows`. */
export const DOT_ROWS = 4;
/** `dot_rows` needs K padded to a multiple of this (two vectors per step). */
export const DOT_K_STEP = 8;

/** Pushes `acc + a * b` for locals `a`, `b`, `acc` and sets `acc`. */
function madd(f: FunctionCode, relaxed: boolean, a: number, b: number, acc: number): void {
  if (relaxed) {
    f.get(a).get(b).get(acc).simd(SimdOp.f32x4RelaxedMadd).set(acc);
  } else {
    f.get(acc).get(a).get(b).simd(SimdOp.f32x4Mul).simd(SimdOp.f32x4Add).set(acc);
  }
}

/** Steps of k per pass of `gemm_tiles`' main loop (immediate load offsets instead of pointer updates). */
const K_UNROLL = 4;

/**
 * `gemm_tiles(ap, bp, cp, mTiles, nPanels, kc, lda, ldb, ldc, accumulate)`:
 * for every column panel `jp < nPanels` and tile row `ip < mTiles`, the
 * `MR × NR` product over `kc ≥ 1` steps of k of rows `ip·MR .. ip·MR + MR`
 * of A (row-major, `lda` floats apart, from `ap`: as copied in, no packing)
 * and B panel `jp` (`[kc][NR]` at `bp + jp·ldb·NR·4`: panels packed over
 * `ldb` steps of k, of which this call reads `kc` from `bp` on) is stored at
 * `cp + (ip·MR·ldc + jp·NR)·4`, or added to what is there when `accumulate`
 * is not 0 (the second and later blocks of k). `ldc` is C's row length in
 * floats. Byte addresses; B and C 16-byte aligned.
 *
 * The k loop runs `K_UNROLL` steps per pass, reading A at offsets `4u` from
 * one pointer per row and B at `32u + 16v` from one pointer, then a step at
 * a time for the last `kc mod K_UNROLL`.
 *
 * `gemm_windows(ap, src, table, bases, cp, mTiles, nPanels, kc, lda, ldc,
 * accumulate)` is the same product with B never packed (a convolution's
 * windows, kernels/cpu/conv_panels.ts): row `k` of panel `jp` is the `NR`
 * floats at `src + bases[jp] + table[k]` (int32 byte offsets: the panel's
 * first output, the kernel element's channel, row and column in the
 * zero-padded input), one more load and add a step than a packed panel's
 * immediate offset, where packing wrote and read every B value once more.
 */
function emitGemmTiles(
  m: ModuleBuilder,
  relaxed: boolean,
  MR: number,
  name: string,
  windows = false,
): void {
  const i32 = ValType.i32, v128 = ValType.v128;
  const f = m.function(name, new Array(windows ? 11 : 10).fill(i32));
  // gemm_tiles' parameters, or gemm_windows' (its B is `src`, `table` and `bases` for `bp`).
  const [ap, bp, cp, mTiles, nPanels, kc, lda, ldb, ldc, accumulate] = windows
    ? [0, -1, 4, 5, 6, 7, 8, -1, 9, 10]
    : [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
  const [src, table, bases] = [1, 2, 3];
  const jp = f.local(i32), ip = f.local(i32), pb = f.local(i32), pbEnd = f.local(i32);
  const pbEnd4 = f.local(i32), bPanel = f.local(i32), cTile = f.local(i32);
  const ldcBytes = f.local(i32), rowBytes = f.local(i32), bPanelBytes = f.local(i32);
  const kcBytes = f.local(i32);
  // gemm_windows: the table's pointer (`pt`, what the loops step) and this step's B row (`pb`).
  const pt = windows ? f.local(i32) : pb;
  const pa: number[] = [];
  for (let r = 0; r < MR; r++) pa.push(f.local(i32));
  const acc: number[] = [];
  for (let i = 0; i < MR * NR / 4; i++) acc.push(f.local(v128));
  const bv: number[] = [];
  for (let v = 0; v < NR / 4; v++) bv.push(f.local(v128));
  const av = f.local(v128);

  /** One step of k: B at `pb + bOff` (gemm_windows: at `bPanel + table[k]`), A at `pa[r] + aOff`. */
  const step = (aOff: number, bOff: number, u: number) => {
    if (windows) {
      f.get(bPanel).get(pt).mem(Op.i32Load, 2, 4 * u).op(Op.i32Add).set(pb);
      bOff = 0;
    }
    for (let v = 0; v < NR / 4; v++) {
      f.get(pb).simdMem(SimdOp.v128Load, windows ? 2 : 4, bOff + 16 * v).set(bv[v]);
    }
    for (let r = 0; r < MR; r++) {
      f.get(pa[r]).simdMem(SimdOp.v128Load32Splat, 2, aOff).set(av);
      for (let v = 0; v < NR / 4; v++) madd(f, relaxed, av, bv[v], acc[r * (NR / 4) + v]);
    }
  };
  const advance = (steps: number) => {
    for (let r = 0; r < MR; r++) f.get(pa[r]).i32(4 * steps).op(Op.i32Add).set(pa[r]);
    f.get(pt).i32((windows ? 4 : NR * 4) * steps).op(Op.i32Add).set(pt);
  };
  const kStep = windows ? 4 : NR * 4;

  f.get(ldc).i32(2).op(Op.i32Shl).set(ldcBytes);
  f.get(lda).i32(2).op(Op.i32Shl).set(rowBytes);
  if (!windows) f.get(ldb).i32(NR * 4).op(Op.i32Mul).set(bPanelBytes);
  f.get(kc).i32(kStep).op(Op.i32Mul).set(kcBytes);
  f.forLoop(jp, 0, nPanels, 1, () => {
    if (windows) {
      // The panel's NR outputs read NR consecutive floats from src + bases[jp] + table[k].
      f.get(src).get(bases).get(jp).i32(2).op(Op.i32Shl).op(Op.i32Add).mem(Op.i32Load, 2)
        .op(Op.i32Add).set(bPanel);
    } else f.get(bp).get(jp).get(bPanelBytes).op(Op.i32Mul).op(Op.i32Add).set(bPanel);
    f.forLoop(ip, 0, mTiles, 1, () => {
      for (const a of acc) f.f32x4Const([0, 0, 0, 0]).set(a);
      // Row pointers of this tile: ap + (ip·MR + r)·lda·4.
      f.get(ap).get(ip).i32(MR).op(Op.i32Mul).get(rowBytes).op(Op.i32Mul).op(Op.i32Add)
        .set(pa[0]);
      for (let r = 1; r < MR; r++) f.get(pa[r - 1]).get(rowBytes).op(Op.i32Add).set(pa[r]);
      const first = windows ? table : bPanel;
      f.get(first).tee(pt).get(kcBytes).op(Op.i32Add).set(pbEnd);
      // pbEnd4 = start + (kc - kc mod K_UNROLL)·kStep
      f.get(first).get(kc).i32(-K_UNROLL).op(Op.i32And).i32(kStep).op(Op.i32Mul)
        .op(Op.i32Add).set(pbEnd4);
      // while (pt < pbEnd4) { K_UNROLL steps }
      f.block().loop();
      f.get(pt).get(pbEnd4).op(Op.i32GeU).brIf(1);
      for (let u = 0; u < K_UNROLL; u++) step(4 * u, NR * 4 * u, u);
      advance(K_UNROLL);
      f.br(0).end().end();
      // while (pt < pbEnd) { 1 step }
      f.block().loop();
      f.get(pt).get(pbEnd).op(Op.i32GeU).brIf(1);
      step(0, 0, 0);
      advance(1);
      f.br(0).end().end();
      // C tile at cp + ip·MR·ldc·4 + jp·NR·4.
      f.get(cp).get(ip).i32(MR).op(Op.i32Mul).get(ldcBytes).op(Op.i32Mul).op(Op.i32Add)
        .get(jp).i32(NR * 4).op(Op.i32Mul).op(Op.i32Add).set(cTile);
      // A later block of k adds what the earlier ones left in C.
      f.get(accumulate).if();
      for (let r = 0; r < MR; r++) {
        for (let v = 0; v < NR / 4; v++) {
          const x = acc[r * (NR / 4) + v];
          f.get(x).get(cTile).simdMem(SimdOp.v128Load, 4, 16 * v).simd(SimdOp.f32x4Add)
            .set(x);
        }
        if (r + 1 < MR) f.get(cTile).get(ldcBytes).op(Op.i32Add).set(cTile);
      }
      // Back to the tile's first row.
      f.get(cTile).get(ldcBytes).i32(MR - 1).op(Op.i32Mul).op(Op.i32Sub).set(cTile);
      f.end();
      for (let r = 0; r < MR; r++) {
        for (let v = 0; v < NR / 4; v++) {
          f.get(cTile).get(acc[r * (NR / 4) + v]).simdMem(SimdOp.v128Store, 4, 16 * v);
        }
        if (r + 1 < MR) f.get(cTile).get(ldcBytes).op(Op.i32Add).set(cTile);
      }
    });
  });
}

/**
 * `pack_panels(src, dst, K, lds, nPanels)`: B's column panels for
 * `gemm_tiles` from a row-major copy of B: panel `p < nPanels` (`[K][NR]` at
 * `dst + p·K·NR·4`) holds columns `p·NR .. p·NR + NR` of the `K` rows at
 * `src`, `lds` floats apart. Byte addresses; every panel full (the driver
 * packs a last, partial one itself). Two vector loads and stores per row
 * where TypeScript moves eight floats one by one.
 */
function emitPackPanels(m: ModuleBuilder): void {
  const i32 = ValType.i32;
  const f = m.function("pack_panels", [i32, i32, i32, i32, i32]);
  const src = 0, dst = 1, K = 2, lds = 3, nPanels = 4;
  const p = f.local(i32), k = f.local(i32), from = f.local(i32), to = f.local(i32);
  const ldsBytes = f.local(i32);
  f.get(lds).i32(2).op(Op.i32Shl).set(ldsBytes);
  f.get(dst).set(to);
  f.forLoop(p, 0, nPanels, 1, () => {
    f.get(src).get(p).i32(NR * 4).op(Op.i32Mul).op(Op.i32Add).set(from);
    f.forLoop(k, 0, K, 1, () => {
      for (let v = 0; v < NR / 4; v++) {
        f.get(to).get(from).simdMem(SimdOp.v128Load, 2, 16 * v).simdMem(
          SimdOp.v128Store,
          2,
          16 * v,
        );
      }
      f.get(from).get(ldsBytes).op(Op.i32Add).set(from);
      f.get(to).i32(NR * 4).op(Op.i32Add).set(to);
    });
  });
}

/**
 * `dot_rows(xp, wp, op, rows, Kp)`: `out[j] = Σ_k x[k]·w[j·Kp + k]` for
 * `j < rows` (a multiple of `DOT_ROWS`), with x at `xp`, w at `wp`, out at
 * `op` (float32, byte addresses, 16-byte aligned); `Kp` is a positive
 * multiple of `DOT_K_STEP` and both x and every row are zero-padded to it.
 */
function emitDotRows(m: ModuleBuilder, relaxed: boolean): void {
  const i32 = ValType.i32, v128 = ValType.v128, f32 = ValType.f32;
  const f = m.function("dot_rows", [i32, i32, i32, i32, i32]);
  const [xp, wp, op, rows, Kp] = [0, 1, 2, 3, 4];
  const j = f.local(i32), px = f.local(i32), pxEnd = f.local(i32), rowBytes = f.local(i32);
  const p: number[] = [];
  for (let r = 0; r < DOT_ROWS; r++) p.push(f.local(i32));
  const acc: number[] = [];
  for (let i = 0; i < 2 * DOT_ROWS; i++) acc.push(f.local(v128));
  const x0 = f.local(v128), x1 = f.local(v128), w = f.local(v128);
  const sum = f.local(v128);
  const s = f.local(f32);

  f.get(Kp).i32(2).op(Op.i32Shl).set(rowBytes);
  f.get(xp).get(rowBytes).op(Op.i32Add).set(pxEnd);
  f.forLoop(j, 0, rows, DOT_ROWS, () => {
    f.get(wp).get(j).get(rowBytes).op(Op.i32Mul).op(Op.i32Add).set(p[0]);
    for (let r = 1; r < DOT_ROWS; r++) f.get(p[r - 1]).get(rowBytes).op(Op.i32Add).set(p[r]);
    for (const a of acc) f.f32x4Const([0, 0, 0, 0]).set(a);
    f.get(xp).set(px);
    f.loop();
    f.get(px).simdMem(SimdOp.v128Load, 4, 0).set(x0);
    f.get(px).simdMem(SimdOp.v128Load, 4, 16).set(x1);
    for (let r = 0; r < DOT_ROWS; r++) {
      f.get(p[r]).simdMem(SimdOp.v128Load, 4, 0).set(w);
      madd(f, relaxed, x0, w, acc[2 * r]);
      f.get(p[r]).simdMem(SimdOp.v128Load, 4, 16).set(w);
      madd(f, relaxed, x1, w, acc[2 * r + 1]);
      f.get(p[r]).i32(32).op(Op.i32Add).set(p[r]);
    }
    f.get(px).i32(32).op(Op.i32Add).tee(px).get(pxEnd).op(Op.i32LtU).brIf(0);
    f.end();
    storeRowSums(f, acc, sum, s, op, j);
  });
}

/**
 * The end of `dot_rows` and `dot_panels`: each of the `DOT_ROWS` rows' two
 * accumulators added, folded to one float and stored at `op[j + r]`.
 */
function storeRowSums(
  f: FunctionCode,
  acc: readonly number[],
  sum: number,
  s: number,
  op: number,
  j: number,
): void {
  for (let r = 0; r < DOT_ROWS; r++) {
    f.get(acc[2 * r]).get(acc[2 * r + 1]).simd(SimdOp.f32x4Add).set(sum);
    pushFold(f, sum, Op.f32Add);
    f.set(s);
    f.get(op).get(j).i32(r).op(Op.i32Add).i32(2).op(Op.i32Shl).op(Op.i32Add).get(s)
      .mem(Op.f32Store, 2, 0);
  }
}

/**
 * `dot_panels(xp, wp, op, rows, Kp)`: `dot_rows` over a weight packed in
 * panels of `DOT_ROWS` rows (`[rows / DOT_ROWS][Kp / DOT_K_STEP][DOT_ROWS]
 * [DOT_K_STEP]`, resident.ts packs a sealed weight so), read through one
 * pointer that only moves forward. Row-major rows of a few hundred values
 * are four short streams that the hardware prefetcher does not pick up
 * before each ends: on GPT-small's decode (K = 384) reading them from main
 * memory was slower than copying them into cache first (gemm.ts).
 */
function emitDotPanels(m: ModuleBuilder, relaxed: boolean): void {
  const i32 = ValType.i32, v128 = ValType.v128, f32 = ValType.f32;
  const f = m.function("dot_panels", [i32, i32, i32, i32, i32]);
  const [xp, wp, op, rows, Kp] = [0, 1, 2, 3, 4];
  const j = f.local(i32), px = f.local(i32), pxEnd = f.local(i32), pw = f.local(i32);
  const acc: number[] = [];
  for (let i = 0; i < 2 * DOT_ROWS; i++) acc.push(f.local(v128));
  const x0 = f.local(v128), x1 = f.local(v128), w = f.local(v128);
  const sum = f.local(v128);
  const s = f.local(f32);

  f.get(xp).get(Kp).i32(2).op(Op.i32Shl).op(Op.i32Add).set(pxEnd);
  f.get(wp).set(pw);
  f.forLoop(j, 0, rows, DOT_ROWS, () => {
    for (const a of acc) f.f32x4Const([0, 0, 0, 0]).set(a);
    f.get(xp).set(px);
    f.loop();
    f.get(px).simdMem(SimdOp.v128Load, 4, 0).set(x0);
    f.get(px).simdMem(SimdOp.v128Load, 4, 16).set(x1);
    for (let r = 0; r < DOT_ROWS; r++) {
      f.get(pw).simdMem(SimdOp.v128Load, 4, 32 * r).set(w);
      madd(f, relaxed, x0, w, acc[2 * r]);
      f.get(pw).simdMem(SimdOp.v128Load, 4, 32 * r + 16).set(w);
      madd(f, relaxed, x1, w, acc[2 * r + 1]);
    }
    f.get(pw).i32(32 * DOT_ROWS).op(Op.i32Add).set(pw);
    f.get(px).i32(32).op(Op.i32Add).tee(px).get(pxEnd).op(Op.i32LtU).brIf(0);
    f.end();
    storeRowSums(f, acc, sum, s, op, j);
  });
}

/**
 * `gelu(xp, op, bytes)`: `out = 0.5·x·(1 + erf(x/√2))` over `bytes / 16`
 * vectors of float32 (byte addresses, 16-byte aligned; `bytes` a multiple
 * of 16), with the TypeScript kernel's formula (elementwise.ts: erf by
 * Abramowitz & Stegun 7.1.26) and `exp(-z²)` by `expOfLocal`.
 * Four values per step where Math.exp takes one: the hot non-linear op of
 * MiniLM's feed-forward layers. For `x > 0` the result is `x - h`, for
 * `x ≤ 0` it is `h`, with `h = 0.5·x·t·P(t)·exp(-z²)` and `x` clamped to
 * ±10 in `h` (past it `h` is below float32's resolution of the result), so
 * `±Infinity` map to `Infinity` and 0 and NaN stays NaN.
 */
function emitGelu(m: ModuleBuilder): void {
  const i32 = ValType.i32, v128 = ValType.v128;
  const f = m.function("gelu", [i32, i32, i32]);
  const [xp, op, bytes] = [0, 1, 2];
  const i = f.local(i32);
  const x = f.local(v128), z = f.local(v128), t = f.local(v128), y = f.local(v128);
  const k = f.local(v128), r = f.local(v128), e = f.local(v128), h = f.local(v128);
  const splat = (v: number) => f.f32x4Const([v, v, v, v]);
  const mul = () => f.simd(SimdOp.f32x4Mul), add = () => f.simd(SimdOp.f32x4Add);
  f.forLoop(i, 0, bytes, 16, () => {
    f.get(xp).get(i).op(Op.i32Add).simdMem(SimdOp.v128Load, 4, 0).set(x);
    // z = |x| / √2; t = 1 / (1 + p·z)
    f.get(x).simd(SimdOp.f32x4Abs);
    splat(Math.SQRT1_2);
    mul();
    f.set(z);
    splat(1);
    splat(1).get(z);
    splat(0.3275911);
    mul();
    add();
    f.simd(SimdOp.f32x4Div).set(t);
    // e = exp(-z²)
    f.f32x4Const([0, 0, 0, 0]).get(z).get(z);
    mul();
    f.simd(SimdOp.f32x4Sub).set(y);
    expOfLocal(f, y, k, r);
    f.set(e);
    // h = 0.5 · clamp(x, ±10) · t·(a1 + t(a2 + t(a3 + t(a4 + t·a5)))) · e
    splat(1.061405429);
    for (const c of [-1.453152027, 1.421413741, -0.284496736, 0.254829592]) {
      f.get(t);
      mul();
      splat(c);
      add();
    }
    f.get(t);
    mul();
    f.get(e);
    mul();
    f.get(x);
    splat(-10).simd(SimdOp.f32x4Max);
    splat(10).simd(SimdOp.f32x4Min);
    mul();
    splat(0.5);
    mul();
    f.set(h);
    // x > 0 ? x - h : h (so -0 stays -0)
    f.get(op).get(i).op(Op.i32Add);
    f.get(x).get(h).simd(SimdOp.f32x4Sub).get(h);
    f.get(x).f32x4Const([0, 0, 0, 0]).simd(SimdOp.f32x4Gt);
    f.simd(SimdOp.v128Bitselect);
    f.simdMem(SimdOp.v128Store, 4, 0);
  });
}

/** The module's bytes: `gemm_tiles` (and `gemm_tiles_1` … `_5` for the last rows), `pack_panels`, `pack_windows` and `pad_planes` (windows_module.ts), `conv_epilogue` (epilogue_module.ts), the depthwise kernels (depthwise_module.ts), `dot_rows`, `dot_panels` and `gelu` over the imported `env.memory`. */
export function gemmModuleBytes(relaxed: boolean, memory: MemoryImport): Uint8Array<ArrayBuffer> {
  const m = new ModuleBuilder(memory);
  emitGemmTiles(m, relaxed, MR, "gemm_tiles");
  for (let r = 1; r < MR; r++) emitGemmTiles(m, relaxed, r, `gemm_tiles_${r}`);
  emitGemmTiles(m, relaxed, MR, "gemm_windows", true);
  for (let r = 1; r < MR; r++) emitGemmTiles(m, relaxed, r, `gemm_windows_${r}`, true);
  emitPackPanels(m);
  emitPackWindows(m, NR);
  emitPadPlanes(m);
  emitConvEpilogue(m);
  emitDepthwiseKernels(m, relaxed);
  emitDotRows(m, relaxed);
  emitDotPanels(m, relaxed);
  emitGelu(m);
  return m.encode();
}
