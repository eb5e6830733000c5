/**
 * The float32 matrix products on the WebAssembly path: the blocking,
 * packing and copying around gemm_module.ts's `gemm_tiles` and `dot_rows`.
 *
 * - **Products of at least `MR` rows** run as BLIS does, less the packing
 *   of A: B is packed a block of column panels at a time (`[K][NR]` each,
 *   zero-padded past N; a weight stored `[N, K]` is transposed on the way),
 *   A is copied in as it is (rows past M zeroed, each row padded off a
 *   multiple of 2 KiB: `rowStride`) and read a row pointer per tile row,
 *   and `gemm_tiles` computes every tile into a scratch C that is then
 *   copied into the output. K is taken in blocks of about `gemmBlocking.kc`
 *   steps, so that a panel's block of B stays in L1 while a block of A rows
 *   passes over it, as BLIS does (on the 2-core Zen 4 machine this and the
 *   row padding measured no faster than whole-K panels in the same process:
 *   its 8-way L1 and its L2 kept the kernel compute-bound; they are kept for
 *   caches that are not). Packing B is the copy into WebAssembly memory
 *   that this copy-in version needs anyway (an untransposed B is copied in
 *   as it is and packed by WebAssembly, `packPanels`). Work is handed out in
 *   blocks of tile rows sized for L2 (256 KiB of A), each over every block
 *   of k; the B block is sized for L3 (4 MiB, so a 1024-square B is one
 *   block and A is copied once).
 * - **A weight stored `[N, K]` times fewer than `MR` rows** (a decode step's
 *   `linear`) copies the weight in chunks of rows small enough to stay in
 *   L2 (256 KiB) and takes `dot_rows` over each chunk while it is there: the
 *   weight crosses the memory bus once from the tensor, then comes from
 *   cache. It runs on the calling thread alone: the copy bounds it, and only
 *   this thread can copy (workers cannot see the tensor's ArrayBuffer).
 *   Measured on the shared 2-core machine under load: a pipelined pool (the
 *   caller copying the next chunk while workers took the last) 0.6–5 GB/s
 *   on the 64 MiB GEMV against 3.5–6 on one thread, a pool over whole
 *   layers no better for GPT-small's decode (57–117 tokens/s against
 *   95–153), and copying into the pool's shared memory is itself slower
 *   (runtime.ts).
 * - **The same, with a sealed weight** (one a tensor cache loaded, that
 *   nothing can have written since: resident.ts) reads the weight from a
 *   copy kept in the kernels' shared memory, made on its first use, and
 *   splits its rows over the worker pool: no copy per call, and both cores'
 *   bandwidth (weights of 8 MiB and more).
 * - **A product of `MR` rows or more by a sealed weight stored `[N, K]`** (a
 *   prefill, a batch) packs the weight's panels once, keeps them in the
 *   shared memory and runs there, on one thread too: no packing per call
 *   (1.3–2.8× on GPT-small's shapes, 16 and 128 rows).

 * `wasmGemm` returns false for what it does not cover (K = 0, fewer than
 * `MR` rows of an untransposed B, work below the size that repays the
 * call in `"auto"` mode, no WebAssembly); the caller then runs the
 * TypeScript kernel.
 *
 * @module
 */

import { DOT_K_STEP, DOT_ROWS, MR, NR } from "./gemm_module.ts";
import {
  cpuKernelMode,
  type KernelSpace,
  poolFor,
  SCRATCH_BASE_BYTES,
  scratchFor,
  scratchView,
  type WasmKernels,
  wasmKernelsFor,
} from "./runtime.ts";
import { Job, jobArgs, runAlone, type ThreadPool } from "./thread_pool.ts";
import { residentCopy, residentLayout } from "./resident.ts";
import type { NDArray } from "../../../devices/ndarray.ts";

/** Below this many floating-point operations a product stays in TypeScript in `"auto"` mode. */
export const GEMM_WASM_MIN_FLOPS = 2 * 32 * 32 * 32;

/**
 * Products smaller than this stay on the calling thread: handing a job to
 * the pool costs a few microseconds when the workers are spinning and tens
 * when they sleep, as much as 2^20 flops (about 25 µs on one core) take
 * alone. In `"wasm"` mode (tests) every size goes to the pool.
 */
const POOL_MIN_FLOPS = 2 ** 20;

/**
 * The blocking of products of `MR` rows or more, a mutable object so that
 * bench/gemm_blocking_bench.ts can compare settings in one process; nothing
 * else changes it.
 */
export const gemmBlocking = {
  /** Steps of k per block: a B panel's block (`kc · NR · 4` bytes) stays in L1. */
  kc: 256,
  /** Most bytes of A (`MR` rows × kc) per block of tile rows: stays in L2. */
  aBlockBytes: 256 * 1024,
  /** Blocks of work per thread on the pool: more of them balance better when a thread stalls. */
  blocksPerThread: 4,
  /** Whether A's rows are padded off multiples of 2 KiB (`rowStride`). */
  padRows: true,
  /** Products of fewer floating-point operations than this stay on the calling thread. */
  poolMinFlops: POOL_MIN_FLOPS,
  /** Whether a convolution's windows are read in place (`PanelPacker.windows`) where they can be, not packed. */
  windowsInPlace: true,
  /** Whether a convolution's input of many rows is zero-padded by the pool (`pad_planes`, conv_panels.ts), not row by row on the calling thread. */
  padOnPool: true,
};
/** Most bytes of A, and of C, per pass over B. */
const SUPER_BYTES = 16 * 1024 * 1024;
/**
 * B's packing is split over the pool from this many floats of B (1 MiB):
 * below it a hand-off costs about what it saves.
 */
const PACK_POOL_MIN_FLOATS = 2 ** 18;
/** Where scratch starts, in floats (after the pool's control block). */
const BASE = SCRATCH_BASE_BYTES / 4;
const B_BLOCK_BYTES = 4 * 1024 * 1024;
/**
 * A sealed weight's GEMV goes to the pool from this many bytes of weight
 * (x rows times weight) in `"auto"` mode. Below it, handing out the work
 * costs more than the second core gives: on GPT-small's decode (weights of
 * 0.6–6 MiB, 37 products a token, the 2-core machine shared) a threshold
 * of POOL_MIN_FLOPS made a token 1.4× slower than one thread did (5.6
 * against 3.9 ms); with this one, two threads are as fast as one there and
 * a 64 MiB weight still gets both cores.
 */
const RESIDENT_POOL_MIN_BYTES = 8 * 2 ** 20;
/** Bytes of weight rows copied in per `dot_rows` pass: small enough to stay in L2 while read. */
const DOT_CHUNK_BYTES = 256 * 1024;

const roundUp = (n: number, m: number) => Math.ceil(n / m) * m;

/** Whether `"wasm"` mode asks for every size on the WebAssembly path (and its pool). */
const everySize = () => cpuKernelMode() === "wasm";

/**
 * `c[M, N] = a[M, K] @ b[K, N]` (or `@ bᵀ` for `b` stored `[N, K]` when
 * `transB`) on the WebAssembly path, at element offsets into row-major
 * arrays. Returns false, having written nothing, where the TypeScript
 * kernel should run instead. `bTensor` is the tensor `b` views when the
 * caller has it: a sealed weight's copy is then kept (resident.ts).
 */
export function wasmGemm(
  a: Float32Array,
  aOff: number,
  b: Float32Array,
  bOff: number,
  c: Float32Array,
  cOff: number,
  M: number,
  K: number,
  N: number,
  transB: boolean,
  bTensor: NDArray | null = null,
): boolean {
  return tiledGemm(a, aOff, b, bOff, c, cOff, M, K, N, transB, bTensor, null, null);
}

/**
 * What a `PanelPacker` packs with: the scratch, where its own floats start,
 * and a runner for the matrix module's jobs (thread_pool.ts's `Job`) on the
 * product's pool, or on the calling thread where it has none.
 */
export interface PanelContext {
  /** The scratch (remade after the memory grows: read it here each call). */
  view: Float32Array;
  /** The float index of the packer's own `floats` in `view`. */
  own: number;
  /** Threads that take the jobs `run` hands out (1: the calling thread alone). */
  threads: number;
  run(kind: number, args: readonly number[], blocks: number): void;
}

/**
 * A B that is made where it is consumed, never laid out whole (a
 * convolution's windows, kernels/cpu/conv_panels.ts): `place` writes the
 * packer's own `floats` of scratch once (its input), then `pack` writes
 * B's columns `col0 .. col0 + np·NR` as `np` panels `[K][NR]` (zero past N)
 * from float `off` of the scratch.
 */
export interface PanelPacker {
  readonly floats: number;
  place(ctx: PanelContext): void;
  pack(ctx: PanelContext, off: number, col0: number, np: number): void;
  /**
   * Where B can be read in place instead, after `place` (`gemm_windows`,
   * gemm_module.ts): the byte addresses of the padded input, of each row
   * of k's offset in it and of each panel's; absent where it cannot.
   */
  readonly windows?: (ctx: PanelContext) => { src: number; table: number; bases: number };
}

/**
 * What is done to each block of C's rows in the scratch before it is copied
 * out (a convolution's bias and epilogue, kernels/cpu/conv_panels.ts):
 * `place` writes its own `floats` of scratch once, `apply` runs over rows
 * `row0 .. row0 + rows` of the product, `width` values each (a multiple of
 * 4, past the block's last column where N is not), `ldc` floats apart from
 * float `cOff`.
 */
export interface RowFinisher {
  readonly floats: number;
  place(ctx: PanelContext): void;
  apply(
    ctx: PanelContext,
    cOff: number,
    ldc: number,
    row0: number,
    rows: number,
    width: number,
  ): void;
}

/**
 * `c[M, N] = a[M, K] @ B` for a convolution: B `[K, N]` from `b` as
 * `wasmGemm` takes it, or (`panels` given, `b` unread) written block by
 * block by `panels` straight into the scratch the tiles read (no `[K, N]`
 * copy of B exists, nor is one copied in and packed); `finish` (given) run
 * over each block of C before it is copied out. False (nothing written)
 * where `wasmGemm` would be, or for fewer than `MR` rows.
 */
export function wasmConvGemm(
  a: Float32Array,
  aOff: number,
  b: Float32Array,
  bOff: number,
  c: Float32Array,
  cOff: number,
  M: number,
  K: number,
  N: number,
  panels: PanelPacker | null,
  finish: RowFinisher | null,
): boolean {
  if (M < MR) return false;
  return tiledGemm(a, aOff, b, bOff, c, cOff, M, K, N, false, null, panels, finish);
}

/** `wasmGemm`, or `wasmConvGemm` where `panels` or `finish` is given. */
function tiledGemm(
  a: Float32Array,
  aOff: number,
  b: Float32Array,
  bOff: number,
  c: Float32Array,
  cOff: number,
  M: number,
  K: number,
  N: number,
  transB: boolean,
  bTensor: NDArray | null,
  panels: PanelPacker | null,
  finish: RowFinisher | null,
): boolean {
  if (K === 0 || M === 0 || N === 0) return false;
  if (M < MR && (!transB || panels !== null)) return false;
  const k = wasmKernelsFor(2 * M * N * K, GEMM_WASM_MIN_FLOPS);
  if (k === null) return false;
  if (M < MR) {
    if (bTensor !== null && bOff === 0 && K % DOT_K_STEP === 0) {
      const at = residentCopy(k, bTensor, b);
      if (at >= 0 && residentDotRows(k, a, aOff, at, c, cOff, M, K, N)) return true;
    }
    return dotRows(k, a, aOff, b, bOff, c, cOff, M, K, N);
  }
  const nPanels = Math.ceil(N / NR);
  // Blocks of k of about KC steps (a multiple of 4, the kernel's unrolling), so that a B panel's
  // block ([kc][NR], 8 KiB) stays in L1 and a tile row's A ([MR][kc]) in L2.
  const KC = gemmBlocking.kc;
  const kcb = roundUp(Math.ceil(K / Math.ceil(K / KC)), 4);
  const lda = gemmBlocking.padRows ? rowStride(K) : roundUp(K, 4);
  const mct = Math.max(1, Math.floor(gemmBlocking.aBlockBytes / (kcb * MR * 4)));
  const ncp = Math.min(nPanels, Math.max(1, Math.floor(B_BLOCK_BYTES / (K * NR * 4))));
  const ldc = ncp * NR;
  // Rows of A copied in at once: all of them unless they (or their rows of C) pass SUPER_BYTES.
  const superRows = Math.min(
    roundUp(M, MR),
    Math.max(MR, Math.floor(SUPER_BYTES / (Math.max(lda, ldc) * 4) / MR) * MR),
  );
  // Scratch layout, in floats: [control | A rows | B block | C rows × B block | B's rows as they
  // are, for pack_panels (an untransposed B)].
  const apOff = BASE, bpOff = roundUp(apOff + superRows * lda, 16);
  const cpOff = roundUp(bpOff + ncp * NR * K, 16);
  const rawOff = roundUp(cpOff + superRows * ldc, 16);
  const ownOff = rawOff + (panels !== null ? panels.floats : transB ? 0 : K * ldc);
  const total = ownOff + (finish === null ? 0 : finish.floats);
  const pool = 2 * M * N * K >= gemmBlocking.poolMinFlops || everySize() ? poolFor(k) : null;
  // A sealed weight stored [N, K]: its panels are packed once and kept in the shared memory
  // (resident.ts), so this call packs nothing and runs there even on one thread.
  const kept = transB && bTensor !== null && bOff === 0
    ? residentLayout(k, bTensor, "gemm", nPanels * NR * K * 4, (dst, off) => {
      packB(b, 0, K, N, 0, nPanels, dst, off, true);
    })
    : -1;
  const space = pool !== null || kept >= 0 ? k : k.local;
  let view = scratchFor(space, total * 4);
  if (view === null) return false;
  const ctx: PanelContext = {
    view,
    own: rawOff,
    threads: pool === null ? 1 : pool.threads,
    run: (kind, args, blocks) =>
      pool !== null
        ? pool.run(space.exports, kind, args, blocks)
        : runAlone(space.exports, kind, args, blocks),
  };
  panels?.place(ctx);
  // B read in place by gemm_windows: nothing packed.
  const inPlace = gemmBlocking.windowsInPlace ? panels?.windows?.(ctx) ?? null : null;
  const finishCtx: PanelContext = { ...ctx, own: ownOff };
  finish?.place(finishCtx);
  let packedB = -1;
  for (let s0 = 0; s0 < M; s0 += superRows) {
    const rows = Math.min(superRows, M - s0), mTiles = Math.ceil(rows / MR);
    const fullTiles = Math.floor(rows / MR), tailRows = rows - fullTiles * MR;
    // A as it is, `lda` floats a row, rows past M zero: the kernel reads it row-major.
    const from = aOff + s0 * K;
    if (lda === K) view.set(a.subarray(from, from + rows * K), apOff);
    else {
      for (let r = 0; r < rows; r++) {
        view.set(a.subarray(from + r * K, from + (r + 1) * K), apOff + r * lda);
      }
    }
    view.fill(0, apOff + rows * lda, apOff + mTiles * MR * lda);
    for (let j0 = 0; j0 < nPanels; j0 += ncp) {
      const np = Math.min(ncp, nPanels - j0);
      // Byte address of this block's panels: the kept copy's, or the scratch's.
      const bp = kept >= 0 ? kept + j0 * NR * K * 4 : bpOff * 4;
      if (kept < 0 && packedB !== j0 && inPlace === null) {
        if (panels !== null) {
          ctx.view = scratchView(space, 0);
          panels.pack(ctx, bpOff, j0 * NR, np);
        } else if (transB) packB(b, bOff, K, N, j0 * NR, np, view, bpOff, true);
        else packPanels(space, pool, b, bOff, K, N, j0 * NR, np, view, rawOff, bpOff);
        packedB = j0;
      }
      // Every block of k inside each block of work (thread_pool.ts's runBlock): one hand-off
      // per B block, and a block's rows of C stay in cache across its blocks of k.
      const perThread = gemmBlocking.blocksPerThread;
      const product = (per: number) =>
        jobArgs("gemm", {
          ap: apOff * 4,
          bp,
          cp: cpOff * 4,
          fullTiles,
          nPanels: np,
          K,
          kc: kcb,
          lda,
          ldc,
          per,
          MR,
          NR,
          tail: tailRows,
          src: inPlace?.src ?? 0,
          table: inPlace?.table ?? 0,
          bases: inPlace === null ? 0 : inPlace.bases + j0 * 4,
        });
      if (pool !== null && fullTiles < 4 * pool.threads) {
        // Few tile rows (MiniLM at batch 1: 8 to 14 rows): blocks of column panels instead,
        // four per thread, each with the tail rows too.
        const bpb = Math.max(1, Math.ceil(np / (perThread * pool.threads)));
        pool.run(space.exports, Job.gemmPanels, product(bpb), Math.ceil(np / bpb));
      } else {
        // Blocks of at most mct tile rows (A's block in L2), on the pool at least four per
        // thread so that claiming balances; the last one takes the tail rows.
        const bt = pool === null
          ? mct
          : Math.max(1, Math.min(mct, Math.ceil(fullTiles / (perThread * pool.threads))));
        const args = product(bt);
        const blocks = Math.max(1, Math.ceil(fullTiles / bt));
        if (pool !== null) pool.run(space.exports, Job.gemm, args, blocks);
        else runAlone(space.exports, Job.gemm, args, blocks);
      }
      const c0 = j0 * NR, w = Math.min(N, c0 + np * NR) - c0;
      if (finish !== null) {
        finishCtx.view = scratchView(space, 0);
        finish.apply(finishCtx, cpOff, ldc, s0, rows, roundUp(w, 4));
      }
      view = scratchView(space, 0);
      for (let r = 0; r < rows; r++) {
        const from = cpOff + r * ldc;
        c.set(view.subarray(from, from + w), cOff + (s0 + r) * N + c0);
      }
    }
  }
  return true;
}

/**
 * A's row length in the scratch: K padded to a multiple of 4 floats, and by
 * a cache line more when that is a multiple of 2 KiB: rows 4 KiB apart (K =
 * 1024) map a tile's six rows onto one set of the L1 cache, and each load
 * evicts the row before it.
 */
function rowStride(K: number): number {
  const lda = roundUp(K, 4);
  return lda % 512 === 0 ? lda + 16 : lda;
}

/**
 * `packB` through WebAssembly: B's rows (the block's columns) copied in as
 * they are at `rawOff`, then `pack_panels` (split over the pool where there
 * is one and B is large) moves them into the panels with vector loads and
 * stores; a last panel that passes N is packed by `packB`. On a
 * 1024-square B the TypeScript packing took about 2 ms, a twentieth of the
 * product on two cores, on the calling thread while the workers waited.
 */
function packPanels(
  space: KernelSpace,
  pool: ThreadPool | null,
  b: Float32Array,
  bOff: number,
  K: number,
  N: number,
  col0: number,
  np: number,
  view: Float32Array,
  rawOff: number,
  off: number,
): void {
  const full = Math.min(np, Math.floor((N - col0) / NR)), width = full * NR;
  if (full > 0) {
    if (col0 === 0 && width === N) view.set(b.subarray(bOff, bOff + K * N), rawOff);
    else {
      for (let k = 0, src = bOff + col0; k < K; k++, src += N) {
        view.set(b.subarray(src, src + width), rawOff + k * width);
      }
    }
    const threads = pool === null || K * width < PACK_POOL_MIN_FLOATS ? 1 : pool.threads;
    const per = Math.ceil(full / (2 * threads));
    const args = jobArgs("packPanels", {
      src: rawOff * 4,
      dst: off * 4,
      K,
      lds: width,
      nPanels: full,
      per,
      NR,
    });
    if (threads > 1) pool!.run(space.exports, Job.packPanels, args, Math.ceil(full / per));
    else runAlone(space.exports, Job.packPanels, args, Math.ceil(full / per));
  }
  if (full < np) packB(b, bOff, K, N, col0 + width, np - full, view, off + full * K * NR);
}

/**
 * Packs B's columns `col0 .. col0 + np·NR` into `np` panels `[K][NR]` at
 * `off`, zero past N. B is `[K, N]` row-major (`transB` false: a ragged
 * tail `pack_panels` leaves) or stored `[N, K]` (`transB`: a weight, panel
 * column `s` is row `j0 + s` of `b`).
 */
function packB(
  b: Float32Array,
  bOff: number,
  K: number,
  N: number,
  col0: number,
  np: number,
  dst: Float32Array,
  off: number,
  transB = false,
): void {
  const kStep = transB ? 1 : N, jStep = transB ? K : 1;
  for (let p = 0; p < np; p++) {
    const j0 = col0 + p * NR, w = Math.min(NR, N - j0);
    const o = off + p * K * NR;
    for (let s = 0; s < NR; s++) {
      if (s < w) {
        const from = bOff + (j0 + s) * jStep;
        for (let k = 0; k < K; k++) dst[o + k * NR + s] = b[from + k * kStep];
      } else {
        for (let k = 0; k < K; k++) dst[o + k * NR + s] = 0;
      }
    }
  }
}

/** `c[i, j] = a[i] · b[j]` for `i < M` (few rows) with `b` stored `[N, K]`, through `dot_rows`. */
function dotRows(
  k: WasmKernels,
  a: Float32Array,
  aOff: number,
  b: Float32Array,
  bOff: number,
  c: Float32Array,
  cOff: number,
  M: number,
  K: number,
  N: number,
): boolean {
  const Kp = roundUp(K, DOT_K_STEP);
  const chunk = Math.min(
    roundUp(N, DOT_ROWS),
    Math.max(DOT_ROWS, Math.floor(DOT_CHUNK_BYTES / (Kp * 4) / DOT_ROWS) * DOT_ROWS),
  );
  // Scratch layout, in floats: [x rows | weight chunk | outputs], on the calling thread's memory.
  const xOff = BASE, wOff = xOff + M * Kp, oOff = wOff + chunk * Kp;
  const space = k.local;
  const grown = scratchFor(space, (oOff + chunk) * 4);
  if (grown === null) return false;
  let view: Float32Array = grown;
  for (let i = 0; i < M; i++) {
    view.set(a.subarray(aOff + i * K, aOff + (i + 1) * K), xOff + i * Kp);
    view.fill(0, xOff + i * Kp + K, xOff + (i + 1) * Kp);
  }
  // Rows past N in the last chunk hold whatever an earlier chunk left: their outputs are dropped.
  for (let j0 = 0; j0 < N; j0 += chunk) {
    const rows = Math.min(chunk, N - j0);
    if (Kp === K) {
      view.set(b.subarray(bOff + j0 * K, bOff + (j0 + rows) * K), wOff);
    } else {
      for (let r = 0; r < rows; r++) {
        const src = bOff + (j0 + r) * K, to = wOff + r * Kp;
        view.set(b.subarray(src, src + K), to);
        view.fill(0, to + K, to + Kp);
      }
    }
    for (let i = 0; i < M; i++) {
      space.exports.dot_rows((xOff + i * Kp) * 4, wOff * 4, oOff * 4, roundUp(rows, DOT_ROWS), Kp);
      view = scratchView(space, 0);
      c.set(view.subarray(oOff, oOff + rows), cOff + i * N + j0);
    }
  }
  return true;
}

/**
 * `c[i, j] = a[i] · w[j]` with the weight already in the kernels' memory at
 * byte address `at` (resident.ts; K a multiple of `DOT_K_STEP`): nothing to
 * copy but x in and the outputs out, so the weight crosses the memory bus
 * once, and the rows are split over the worker pool (`Job.dot`). Returns
 * false where its scratch cannot be had.
 */
function residentDotRows(
  k: WasmKernels,
  a: Float32Array,
  aOff: number,
  at: number,
  c: Float32Array,
  cOff: number,
  M: number,
  K: number,
  N: number,
): boolean {
  const rows = roundUp(N, DOT_ROWS);
  // Scratch layout, in floats: [control | x rows | outputs per row].
  const xOff = BASE, oOff = xOff + M * K;
  let view = scratchFor(k, (oOff + M * rows) * 4);
  if (view === null) return false;
  view.set(a.subarray(aOff, aOff + M * K), xOff);
  const pool = M * N * K * 4 >= RESIDENT_POOL_MIN_BYTES || everySize() ? poolFor(k) : null;
  // Blocks of rows, four per thread so that claiming balances.
  const br = pool === null ? rows : roundUp(Math.ceil(rows / (4 * pool.threads)), DOT_ROWS);
  for (let i = 0; i < M; i++) {
    const xp = (xOff + i * K) * 4, op = (oOff + i * rows) * 4;
    if (pool !== null) {
      const args = jobArgs("dot", { xp, wp: at, op, rows, Kp: K, br });
      pool.run(k.exports, Job.dot, args, Math.ceil(rows / br));
    } else k.exports.dot_panels(xp, at, op, rows, K);
  }
  view = scratchView(k, 0);
  for (let i = 0; i < M; i++) {
    c.set(view.subarray(oOff + i * rows, oOff + i * rows + N), cOff + i * N);
  }
  return true;
}
