/**
 * CPU matrix multiplication: `out[..., M, N] = a[..., M, K] @ b[..., K, N]`
 * (float32), batch axes broadcast.
 *
 * Each product is first offered to the WebAssembly SIMD kernels
 * (kernels/cpu/wasm/gemm.ts), which take every product large enough to
 * repay the call; what follows is the TypeScript kernel that computes the
 * rest, and everything where WebAssembly cannot be compiled.
 *
 * Why this shape of kernel. JavaScript has no SIMD and V8 never fuses `a*b+c`,
 * so the ceiling is the scalar floating-point throughput: about two
 * operations per cycle, roughly 5 GFLOP/s on the 2.6 GHz Xeon this was tuned
 * on (a 4×4 kernel on L1-resident data measures 4.7–5.2). What keeps a plain
 * triple loop far below that is memory traffic and loop overhead per
 * multiply-add, so the work is organized as in BLIS/GotoBLAS:
 *
 * - B is packed once per matrix into column panels of `NR` = 4 columns,
 *   each K×4 and contiguous, and A into row panels of `MR` = 4 rows, K×4;
 *   the micro-kernel then reads two sequential streams.
 * - The micro-kernel keeps a 4×4 block of C in 16 local variables, and per
 *   step of k loads 4 values of A and 4 of B for 16 multiply-adds. Measured
 *   on 512×512 against 4×2, 2×4, 8×2, 2×8, 3×4, 4×3, 6×2, 3×3 and 5×2
 *   tiles (3.5–4.7 GFLOP/s in the full product), 4×4 with B loaded one value
 *   at a time was best: 16 accumulators + 4 A values + 1 B value leave
 *   enough of x64's 16 float registers free that spills stay few.
 * - Packs are float64: the loads need no float32→float64 conversion, and C
 *   accumulates in double precision over the whole K (more accurate than
 *   float32 accumulation; rounded once on store).
 * - A is packed `MC` rows at a time, sized so the block stays in L2 while
 *   every B panel (which stays in L1 across the block) passes over it.
 *
 * Products with fewer than 4 rows or columns (matrix-vector) skip packing,
 * which would otherwise compute mostly padding; they add four scaled rows of
 * B per pass (2× over one row on a 768×3072 matrix-vector product).
 * Batches that share one B (heads times a weight) are folded into the rows
 * of a single product first, so a decode step's one-row batches become
 * one product with full tiles.
 *
 * @module
 */

import type { NDArray } from "../../devices/ndarray.ts";
import { broadcastShapes, broadcastStrides } from "../broadcast.ts";
import { wasmGemm } from "./wasm/gemm.ts";

const MR = 4;
const NR = 4;
/** Budget for one packed block of A, in float64 elements (256 KiB: half of a typical L2). */
const A_BLOCK_ELEMENTS = 32 * 1024;

// Pack buffers are reused across calls; JS runs one kernel at a time.
let packA: Float64Array = new Float64Array(0);
let packB: Float64Array = new Float64Array(0);
/** Where edge tiles land before their valid part is copied out. */
const edgeTile = new Float32Array(MR * NR);

function sizeOf(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

function ensurePack(current: Float64Array, size: number): Float64Array {
  return current.length >= size ? current : new Float64Array(Math.max(size, current.length * 2));
}

/** Batched matmul; `a` and `b` are at least 2-D and float32, `out` has the broadcast batch shape. */
export function matmulKernel(a: NDArray, b: NDArray, out: NDArray): void {
  if (out.size === 0) return;
  const ar = a.shape.length, br = b.shape.length, or = out.shape.length;
  const M = a.shape[ar - 2], K = a.shape[ar - 1], N = b.shape[br - 1];
  const av = a.readView() as Float32Array, bv = b.readView() as Float32Array;
  const ov = out.cpuView() as Float32Array;
  const batchShape = out.shape.slice(0, or - 2);
  const aBatch = a.shape.slice(0, ar - 2), bBatch = b.shape.slice(0, br - 2);
  // Matrix-granular strides of each operand over the broadcast batch axes.
  const sa = broadcastStrides(aBatch, broadcastShapes(aBatch, batchShape));
  const sb = broadcastStrides(bBatch, broadcastShapes(bBatch, batchShape));
  const batches = out.size / (M * N);
  if (batches > 1 && sizeOf(bBatch) === 1 && sizeOf(aBatch) === batches) {
    // One B for every batch and a distinct A for each: the batches are rows of one
    // [batches·M, K] matrix (attention heads times a weight, a decode step's rows).
    // One product packs B once and runs full 4×4 tiles where each batch alone
    // would have fewer than 4 rows.
    gemm(av, 0, bv, 0, ov, 0, batches * M, K, N, true);
    return;
  }
  const index = new Array<number>(batchShape.length).fill(0);
  let aMat = 0, bMat = 0, packedB = -1;
  for (let batch = 0; batch < batches; batch++) {
    const repack = packedB !== bMat;
    gemm(av, aMat * M * K, bv, bMat * K * N, ov, batch * M * N, M, K, N, repack);
    packedB = bMat;
    for (let axis = batchShape.length - 1; axis >= 0; axis--) {
      aMat += sa[axis];
      bMat += sb[axis];
      if (++index[axis] < batchShape[axis]) break;
      aMat -= sa[axis] * batchShape[axis];
      bMat -= sb[axis] * batchShape[axis];
      index[axis] = 0;
    }
  }
}

/**
 * One product `c[M, N] = a[M, K] @ b[K, N]` of contiguous row-major matrices
 * at the given element offsets; with `transB`, `b` is stored `[N, K]` and
 * the product is `a @ bᵀ` (a `linear` layer's weight). `repackB` is false
 * when the previous call multiplied by the same B (a shared weight across a
 * batch).
 */
export function gemm(
  a: Float32Array,
  aOff: number,
  b: Float32Array,
  bOff: number,
  c: Float32Array,
  cOff: number,
  M: number,
  K: number,
  N: number,
  repackB: boolean,
  transB = false,
  bTensor: NDArray | null = null,
): void {
  if (N === 1 && !transB && M > 1) {
    // A matrix times a vector is the vector's row times the matrix read as a weight stored
    // [M, K]: dot products of contiguous rows (WebAssembly's dot_rows, or gemvRowsT's four rows
    // a pass), where the tiled kernels would pad the one column to four.
    gemm(b, bOff, a, aOff, c, cOff, 1, K, M, true, true);
    return;
  }
  // The WebAssembly SIMD kernels take what they cover (kernels/cpu/wasm/gemm.ts).
  if (wasmGemm(a, aOff, b, bOff, c, cOff, M, K, N, transB, bTensor)) return;
  if (M < MR || N < NR || K === 0) {
    if (transB) gemvRowsT(a, aOff, b, bOff, c, cOff, M, K, N);
    else gemmRows(a, aOff, b, bOff, c, cOff, M, K, N);
    return;
  }
  const nPanels = Math.ceil(N / NR);
  if (repackB) {
    packB = ensurePack(packB, nPanels * NR * K);
    if (transB) packBPanelsT(b, bOff, K, N, packB);
    else packBPanels(b, bOff, K, N, packB);
  }
  const mc = Math.max(MR, Math.floor(A_BLOCK_ELEMENTS / K / MR) * MR);
  packA = ensurePack(packA, mc * K);
  const ap = packA, bp = packB;
  for (let i0 = 0; i0 < M; i0 += mc) {
    const rows = Math.min(mc, M - i0);
    packAPanels(a, aOff + i0 * K, rows, K, ap);
    for (let jp = 0; jp < nPanels; jp++) {
      const j = jp * NR;
      const full = j + NR <= N;
      for (let ip = 0; ip * MR < rows; ip++) {
        const i = i0 + ip * MR;
        if (full && i + MR <= M) {
          microKernel(ap, ip * K * MR, bp, jp * K * NR, K, c, cOff + i * N + j, N);
        } else {
          microKernel(ap, ip * K * MR, bp, jp * K * NR, K, edgeTile, 0, NR);
          const h = Math.min(MR, M - i), w = Math.min(NR, N - j);
          for (let r = 0; r < h; r++) {
            for (let s = 0; s < w; s++) c[cOff + (i + r) * N + j + s] = edgeTile[r * NR + s];
          }
        }
      }
    }
  }
}

/** Packs B into K×NR column panels, zero-padding the last one. */
function packBPanels(b: Float32Array, bOff: number, K: number, N: number, bp: Float64Array): void {
  let o = 0;
  for (let j0 = 0; j0 < N; j0 += NR) {
    const w = Math.min(NR, N - j0);
    for (let k = 0; k < K; k++, o += NR) {
      const src = bOff + k * N + j0;
      if (w === NR) {
        bp[o] = b[src];
        bp[o + 1] = b[src + 1];
        bp[o + 2] = b[src + 2];
        bp[o + 3] = b[src + 3];
      } else {
        for (let s = 0; s < NR; s++) bp[o + s] = s < w ? b[src + s] : 0;
      }
    }
  }
}

/** As `packBPanels` for a B stored transposed, `[N, K]`: panel `j0` holds rows `j0..j0+3`. */
function packBPanelsT(
  b: Float32Array,
  bOff: number,
  K: number,
  N: number,
  bp: Float64Array,
): void {
  let o = 0;
  for (let j0 = 0; j0 < N; j0 += NR) {
    const w = Math.min(NR, N - j0);
    if (w === NR) {
      const r0 = bOff + j0 * K, r1 = r0 + K, r2 = r1 + K, r3 = r2 + K;
      for (let k = 0; k < K; k++, o += NR) {
        bp[o] = b[r0 + k];
        bp[o + 1] = b[r1 + k];
        bp[o + 2] = b[r2 + k];
        bp[o + 3] = b[r3 + k];
      }
    } else {
      for (let k = 0; k < K; k++, o += NR) {
        for (let s = 0; s < NR; s++) bp[o + s] = s < w ? b[bOff + (j0 + s) * K + k] : 0;
      }
    }
  }
}

/** Packs `rows` rows of A into K×MR row panels (element `k*MR + r`), zero-padding the last one. */
function packAPanels(
  a: Float32Array,
  aOff: number,
  rows: number,
  K: number,
  ap: Float64Array,
): void {
  let o = 0;
  for (let i0 = 0; i0 < rows; i0 += MR) {
    const h = Math.min(MR, rows - i0);
    const r0 = aOff + i0 * K;
    if (h === MR) {
      const r1 = r0 + K, r2 = r1 + K, r3 = r2 + K;
      for (let k = 0; k < K; k++, o += MR) {
        ap[o] = a[r0 + k];
        ap[o + 1] = a[r1 + k];
        ap[o + 2] = a[r2 + k];
        ap[o + 3] = a[r3 + k];
      }
    } else {
      for (let k = 0; k < K; k++, o += MR) {
        for (let r = 0; r < MR; r++) ap[o + r] = r < h ? a[r0 + r * K + k] : 0;
      }
    }
  }
}

/**
 * The 4×4 micro-kernel: `c[o + r*ldc + s] = sum_k ap[pa + 4k + r] * bp[pb + 4k + s]`.
 * One B value is live at a time so the 16 accumulators and 4 A values fit
 * in registers.
 */
function microKernel(
  ap: Float64Array,
  pa: number,
  bp: Float64Array,
  pb: number,
  K: number,
  c: Float32Array,
  o: number,
  ldc: number,
): void {
  let c00 = 0, c01 = 0, c02 = 0, c03 = 0;
  let c10 = 0, c11 = 0, c12 = 0, c13 = 0;
  let c20 = 0, c21 = 0, c22 = 0, c23 = 0;
  let c30 = 0, c31 = 0, c32 = 0, c33 = 0;
  for (let k = 0; k < K; k++, pa += MR, pb += NR) {
    const a0 = ap[pa], a1 = ap[pa + 1], a2 = ap[pa + 2], a3 = ap[pa + 3];
    let bk = bp[pb];
    c00 += a0 * bk;
    c10 += a1 * bk;
    c20 += a2 * bk;
    c30 += a3 * bk;
    bk = bp[pb + 1];
    c01 += a0 * bk;
    c11 += a1 * bk;
    c21 += a2 * bk;
    c31 += a3 * bk;
    bk = bp[pb + 2];
    c02 += a0 * bk;
    c12 += a1 * bk;
    c22 += a2 * bk;
    c32 += a3 * bk;
    bk = bp[pb + 3];
    c03 += a0 * bk;
    c13 += a1 * bk;
    c23 += a2 * bk;
    c33 += a3 * bk;
  }
  c[o] = c00;
  c[o + 1] = c01;
  c[o + 2] = c02;
  c[o + 3] = c03;
  o += ldc;
  c[o] = c10;
  c[o + 1] = c11;
  c[o + 2] = c12;
  c[o + 3] = c13;
  o += ldc;
  c[o] = c20;
  c[o + 1] = c21;
  c[o + 2] = c22;
  c[o + 3] = c23;
  o += ldc;
  c[o] = c30;
  c[o + 1] = c31;
  c[o + 2] = c32;
  c[o + 3] = c33;
}

/**
 * Row-at-a-time product for thin matrices (fewer than 4 rows or columns):
 * each output row accumulates scaled rows of B, in double precision; a
 * single column as plain dot products, without the accumulator row's loads
 * and stores (only for one row: `gemm` takes a matrix times a vector as
 * `gemvRowsT`'s product by a weight stored `[N, K]`).
 */
function gemmRows(
  a: Float32Array,
  aOff: number,
  b: Float32Array,
  bOff: number,
  c: Float32Array,
  cOff: number,
  M: number,
  K: number,
  N: number,
): void {
  if (N === 1) {
    // A matrix times a vector: one dot product a row, its sum in a register.
    for (let i = 0, ai = aOff; i < M; i++, ai += K) {
      let s0 = 0, s1 = 0, k = 0;
      for (; k + 2 <= K; k += 2) {
        s0 += a[ai + k] * b[bOff + k];
        s1 += a[ai + k + 1] * b[bOff + k + 1];
      }
      if (k < K) s0 += a[ai + k] * b[bOff + k];
      c[cOff + i] = s0 + s1;
    }
    return;
  }
  const acc = new Float64Array(N);
  for (let i = 0; i < M; i++) {
    acc.fill(0);
    const ai = aOff + i * K;
    let k = 0;
    // Four rows of B per pass: one load and store of each accumulator per four multiply-adds.
    for (; k + 4 <= K; k += 4) {
      const x0 = a[ai + k], x1 = a[ai + k + 1], x2 = a[ai + k + 2], x3 = a[ai + k + 3];
      const b0 = bOff + k * N, b1 = b0 + N, b2 = b1 + N, b3 = b2 + N;
      for (let j = 0; j < N; j++) {
        acc[j] += x0 * b[b0 + j] + x1 * b[b1 + j] + x2 * b[b2 + j] + x3 * b[b3 + j];
      }
    }
    for (; k < K; k++) {
      const x = a[ai + k];
      const bk = bOff + k * N;
      for (let j = 0; j < N; j++) acc[j] += x * b[bk + j];
    }
    const ci = cOff + i * N;
    for (let j = 0; j < N; j++) c[ci + j] = acc[j];
  }
}

/**
 * `c[M, N] = a[M, K] @ bᵀ` for B stored `[N, K]` and few rows (a decode
 * step's matrix-vector products): every output is the dot product of a row
 * of A and a row of B, both contiguous. Four rows of B per pass, so each
 * element of A is loaded once per four multiply-adds, and the four sums stay
 * in registers (double precision) until they are stored; two rows of A per
 * pass where there are two, so each element of B serves both. Each weight
 * is read once per pair of rows.
 */
function gemvRowsT(
  a: Float32Array,
  aOff: number,
  b: Float32Array,
  bOff: number,
  c: Float32Array,
  cOff: number,
  M: number,
  K: number,
  N: number,
): void {
  let i = 0;
  for (; i + 2 <= M; i += 2) {
    const x = aOff + i * K, y = x + K, ci = cOff + i * N;
    let j = 0;
    for (; j + 4 <= N; j += 4) {
      const r0 = bOff + j * K, r1 = r0 + K, r2 = r1 + K, r3 = r2 + K;
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0, t0 = 0, t1 = 0, t2 = 0, t3 = 0;
      for (let k = 0; k < K; k++) {
        const u = a[x + k], v = a[y + k];
        const w0 = b[r0 + k], w1 = b[r1 + k], w2 = b[r2 + k], w3 = b[r3 + k];
        s0 += u * w0;
        s1 += u * w1;
        s2 += u * w2;
        s3 += u * w3;
        t0 += v * w0;
        t1 += v * w1;
        t2 += v * w2;
        t3 += v * w3;
      }
      c[ci + j] = s0;
      c[ci + j + 1] = s1;
      c[ci + j + 2] = s2;
      c[ci + j + 3] = s3;
      c[ci + N + j] = t0;
      c[ci + N + j + 1] = t1;
      c[ci + N + j + 2] = t2;
      c[ci + N + j + 3] = t3;
    }
    for (; j < N; j++) {
      const r = bOff + j * K;
      let s = 0, t = 0;
      for (let k = 0; k < K; k++) {
        s += a[x + k] * b[r + k];
        t += a[y + k] * b[r + k];
      }
      c[ci + j] = s;
      c[ci + N + j] = t;
    }
  }
  for (; i < M; i++) {
    const x = aOff + i * K, ci = cOff + i * N;
    let j = 0;
    for (; j + 4 <= N; j += 4) {
      const r0 = bOff + j * K, r1 = r0 + K, r2 = r1 + K, r3 = r2 + K;
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (let k = 0; k < K; k++) {
        const u = a[x + k];
        s0 += u * b[r0 + k];
        s1 += u * b[r1 + k];
        s2 += u * b[r2 + k];
        s3 += u * b[r3 + k];
      }
      c[ci + j] = s0;
      c[ci + j + 1] = s1;
      c[ci + j + 2] = s2;
      c[ci + j + 3] = s3;
    }
    for (; j < N; j++) {
      const r = bOff + j * K;
      let s = 0;
      for (let k = 0; k < K; k++) s += a[x + k] * b[r + k];
      c[ci + j] = s;
    }
  }
}
