/**
 * The matmul template: `out[b, M, N] = a[b, M, K] @ b[b, K, N]` (float32),
 * batch axes broadcast through strides, one dispatch for all batches.
 *
 * Kernel choice, by measurement on the software adapter (Mesa llvmpipe,
 * 256-bit SIMD, 2 cores), 1024×1024×1024:
 *
 * - the classic tiled kernel (tiles staged in workgroup memory,
 *   `workgroupBarrier` per tile) is about 3× *slower* than even a naive
 *   one-output-per-thread kernel: llvmpipe runs a workgroup's threads as SIMD
 *   loops on one CPU core, so every barrier splits the shader into separately
 *   scheduled pieces and the staging copies are pure overhead — the CPU cache
 *   already plays the role of shared memory;
 * - register blocking wins: each thread keeps a 4×4 block of outputs in four
 *   `vec4` accumulators and, per step of 4 along K, loads four `vec4` rows of
 *   A and four of B for 64 multiply-adds, with no barriers at all
 *   (`vec4` variant, about 6 GFLOP/s; see bench/webgpu_ops_bench.ts).
 *
 * The `vec4` variant needs K and N to be multiples of 4 and all three
 * tensors to start at a multiple of 4 elements. Otherwise the `scalar`
 * variant computes the same 4×4 blocks with scalar loads, clamping indices at
 * the edges (loads stay in bounds; out-of-range results are not stored).
 *
 * Threads of a workgroup are laid out `COLS` blocks wide, so neighbouring
 * threads share the rows of A they read and walk adjacent columns of B.
 *
 * This file is browser-safe: no `Deno.*`.
 *
 * @module
 */

import { broadcastShapes, broadcastStrides, collapseDims } from "../ops/broadcast.ts";
import { indexFields, indexValues, wgslIndices } from "./indexing.ts";
import { mainHeader, type Program, storage, Uniforms, uniformStruct } from "./program.ts";

const WORKGROUP = 64;
/** Thread blocks per workgroup row: 16 × 4 threads cover 16 rows × 64 columns. */
const COLS = 16;
const ROWS = WORKGROUP / COLS;

/** Shapes and element offsets of one matmul. */
export interface MatmulArgs {
  /** Shape of A, `[..., M, K]`. */
  aShape: readonly number[];
  /** Shape of B, `[..., K, N]`. */
  bShape: readonly number[];
  /** Element offsets of A, B and the output. */
  offsets: readonly [number, number, number];
}

/** The program for one (possibly batched) matmul. */
export function matmulProgram({ aShape, bShape, offsets }: MatmulArgs): Program {
  const ar = aShape.length, br = bShape.length;
  const M = aShape[ar - 2], K = aShape[ar - 1], N = bShape[br - 1];
  const aBatch = aShape.slice(0, ar - 2), bBatch = bShape.slice(0, br - 2);
  const batchShape = broadcastShapes(aBatch, bBatch);
  let batches = 1;
  for (const d of batchShape) batches *= d;
  // Batch strides in elements: matrix strides times the matrix sizes.
  const space = collapseDims(batchShape, [
    broadcastStrides(aBatch, batchShape).map((s) => s * M * K),
    broadcastStrides(bBatch, batchShape).map((s) => s * K * N),
  ]);
  const [offA, offB, offOut] = offsets;
  const vec4 = K % 4 === 0 && N % 4 === 0 && offA % 4 === 0 && offB % 4 === 0 && offOut % 4 === 0;
  const lanes = vec4 ? 4 : 1;
  const blocksM = Math.ceil(M / 4), blocksN = Math.ceil(N / 4);
  const groupsM = Math.ceil(blocksM / ROWS), groupsN = Math.ceil(blocksN / COLS);
  const rank = space.shape.length;
  const spaceInLanes = {
    shape: space.shape,
    strides: space.strides.map((s) => s.map((v) => v / lanes)),
  };
  return {
    key: `matmul:${vec4 ? "vec4" : "scalar"}:b${rank}`,
    source: () => (vec4 ? vec4Source(rank) : scalarSource(rank)),
    inputs: 2,
    uniforms: new Uniforms()
      .u32s([M, K, N, groupsM, groupsN, offOut / lanes])
      .u32s(indexValues([offA / lanes, offB / lanes], spaceInLanes))
      .words(),
    workgroups: batches * groupsM * groupsN,
  };
}

function fields(rank: number): string[] {
  return ["M", "K", "N", "groupsM", "groupsN", "offOut", ...indexFields(rank, 2)];
}

/** WGSL locating this thread's 4×4 block: batch offsets `i0`/`i1`, first row `row`, block column `colBlock`. */
function locate(rank: number): string {
  return `  let perBatch = u.groupsM * u.groupsN;
  let idx = wg / perBatch;
  let inBatch = wg % perBatch;
${wgslIndices(rank, 2)}  let row = ((inBatch / u.groupsN) * ${ROWS}u + lid / ${COLS}u) * 4u;
  let colBlock = (inBatch % u.groupsN) * ${COLS}u + lid % ${COLS}u;
`;
}

function vec4Source(rank: number): string {
  return storage(0, "a", "vec4<f32>", false) + storage(1, "b", "vec4<f32>", false) +
    storage(2, "out", "vec4<f32>", true) + uniformStruct(fields(rank), 3) + mainHeader(WORKGROUP) +
    `
  let K4 = u.K / 4u;
  let N4 = u.N / 4u;
${locate(rank)}  if (row >= u.M || colBlock >= N4) { return; }
  // Rows past the end re-read the last row; their results are not stored.
  let last = u.M - 1u;
  let a0 = i0 + min(row, last) * K4;
  let a1 = i0 + min(row + 1u, last) * K4;
  let a2 = i0 + min(row + 2u, last) * K4;
  let a3 = i0 + min(row + 3u, last) * K4;
  var c0 = vec4<f32>(0.0);
  var c1 = vec4<f32>(0.0);
  var c2 = vec4<f32>(0.0);
  var c3 = vec4<f32>(0.0);
  var bi = i1 + colBlock;
  for (var k = 0u; k < K4; k++) {
    let b0 = b[bi];
    let b1 = b[bi + N4];
    let b2 = b[bi + 2u * N4];
    let b3 = b[bi + 3u * N4];
    bi += 4u * N4;
    let x0 = a[a0 + k];
    let x1 = a[a1 + k];
    let x2 = a[a2 + k];
    let x3 = a[a3 + k];
    c0 += x0.x * b0 + x0.y * b1 + x0.z * b2 + x0.w * b3;
    c1 += x1.x * b0 + x1.y * b1 + x1.z * b2 + x1.w * b3;
    c2 += x2.x * b0 + x2.y * b1 + x2.z * b2 + x2.w * b3;
    c3 += x3.x * b0 + x3.y * b1 + x3.z * b2 + x3.w * b3;
  }
  let o = u.offOut + idx * u.M * N4 + row * N4 + colBlock;
  out[o] = c0;
  if (row + 1u < u.M) { out[o + N4] = c1; }
  if (row + 2u < u.M) { out[o + 2u * N4] = c2; }
  if (row + 3u < u.M) { out[o + 3u * N4] = c3; }
}
`;
}

function scalarSource(rank: number): string {
  return storage(0, "a", "f32", false) + storage(1, "b", "f32", false) +
    storage(2, "out", "f32", true) +
    uniformStruct(fields(rank), 3) + mainHeader(WORKGROUP) + `
${locate(rank)}  let col = colBlock * 4u;
  if (row >= u.M || col >= u.N) { return; }
  let lastRow = u.M - 1u;
  let lastCol = u.N - 1u;
  let a0 = i0 + min(row, lastRow) * u.K;
  let a1 = i0 + min(row + 1u, lastRow) * u.K;
  let a2 = i0 + min(row + 2u, lastRow) * u.K;
  let a3 = i0 + min(row + 3u, lastRow) * u.K;
  let n0 = i1 + col;
  let n1 = i1 + min(col + 1u, lastCol);
  let n2 = i1 + min(col + 2u, lastCol);
  let n3 = i1 + min(col + 3u, lastCol);
  var c0 = vec4<f32>(0.0);
  var c1 = vec4<f32>(0.0);
  var c2 = vec4<f32>(0.0);
  var c3 = vec4<f32>(0.0);
  for (var k = 0u; k < u.K; k++) {
    let kb = k * u.N;
    let bk = vec4<f32>(b[n0 + kb], b[n1 + kb], b[n2 + kb], b[n3 + kb]);
    c0 += a[a0 + k] * bk;
    c1 += a[a1 + k] * bk;
    c2 += a[a2 + k] * bk;
    c3 += a[a3 + k] * bk;
  }
  let o = u.offOut + idx * u.M * u.N + row * u.N + col;
  var rows = array<vec4<f32>, 4>(c0, c1, c2, c3);
  for (var r = 0u; r < 4u; r++) {
    if (row + r < u.M) {
      for (var c = 0u; c < 4u; c++) {
        if (col + c < u.N) { out[o + r * u.N + c] = rows[r][c]; }
      }
    }
  }
}
`;
}
