/**
 * The matmul template: `out[b, M, N] = a[b, M, K] @ b[b, K, N]` (float32),
 * batch axes broadcast through strides, one dispatch for all batches.
 *
 * Kernel choice, by measurement on the software adapter (Mesa llvmpipe,
 * 256-bit SIMD, 2 shared cores), 1024×1024×1024, compute only:
 *
 * - the classic tiled kernel (tiles staged in workgroup memory,
 *   `workgroupBarrier` per tile) is about 3× *slower* than a naive
 *   one-output-per-thread kernel: llvmpipe runs a workgroup's threads as SIMD
 *   loops on one CPU core, so every barrier splits the shader into separately
 *   scheduled pieces and the staging copies are pure overhead — the CPU cache
 *   already plays the role of shared memory;
 * - register blocking wins, and bigger blocks than a GPU would use: each
 *   thread keeps an `R`-row × `C`-`vec4` block of outputs in registers and,
 *   per step of 4 along K, loads `R` `vec4`s of A (the same address in every
 *   SIMD lane of a workgroup row: a broadcast) and `4·C` `vec4`s of B, with
 *   no barriers at all. Measured (GFLOP/s): 4×1 7.8, 4×2 8.6, 8×1 10.9,
 *   8×2 13.7, 8×4 7.8, 12×2 10.4, 16×1 10.7, 16×2 15–17, 16×4 16.0,
 *   32×2 15.1. 16×2 is used for large M; below 128 rows a 16-row block would
 *   mostly compute clamped duplicate rows, so 4×2 (4×1 for narrow N) is used,
 *   and 1×2 with all 64 threads along N for fewer than 4 rows (matrix-vector:
 *   1.5 ms instead of 2.3 for 1×768 @ 768×3072).
 * - Batches that share one B and each have their own A are folded into the
 *   rows of a single product (`[H, 1, D] @ [D, N]` is `[H, D] @ [D, N]`).
 *
 * The `vec4` variant needs K and N to be multiples of 4 and all three
 * tensors to start at a multiple of 4 elements. Otherwise the `scalar`
 * variant computes 4×4 blocks with scalar loads. Both clamp indices at the
 * edges (loads stay in bounds; out-of-range results are not stored).
 *
 * Threads of a workgroup are laid out `COLS` blocks wide, so neighbouring
 * threads share the rows of A they read and walk adjacent columns of B.
 *
 * @module
 */

import { broadcastShapes, broadcastStrides, collapseDims } from "../broadcast.ts";
import { indexFields, indexValues, wgslIndices } from "./indexing.ts";
import {
  mainHeader,
  type Program,
  storage,
  Uniforms,
  uniformStruct,
  WORKGROUP_SIZE,
} from "../../devices/webgpu/kernel_program.ts";

/** Threads per workgroup row; 8 × 8 threads. */
const COLS = 8;

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
  let M = aShape[ar - 2];
  const K = aShape[ar - 1], N = bShape[br - 1];
  let aBatch = aShape.slice(0, ar - 2), bBatch = bShape.slice(0, br - 2);
  let batchShape = broadcastShapes(aBatch, bBatch);
  let batches = sizeOf(batchShape);
  if (batches > 1 && sizeOf(bBatch) === 1 && sizeOf(aBatch) === batches) {
    // One B for every batch, a distinct A for each: the batches are rows of one
    // [batches·M, K] product, which fills row blocks that M rows alone would
    // leave mostly empty (attention heads times a weight, a decode step).
    M *= batches;
    aBatch = bBatch = batchShape = [];
    batches = 1;
  }
  // Batch strides in elements: matrix strides times the matrix sizes.
  const space = collapseDims(batchShape, [
    broadcastStrides(aBatch, batchShape).map((s) => s * M * K),
    broadcastStrides(bBatch, batchShape).map((s) => s * K * N),
  ]);
  const [offA, offB, offOut] = offsets;
  const vec4 = K % 4 === 0 && N % 4 === 0 && offA % 4 === 0 && offB % 4 === 0 && offOut % 4 === 0;
  const lanes = vec4 ? 4 : 1;
  // Block: R rows × C column groups of 4 per thread; one row when there are fewer than 4
  // (a matrix-vector product would otherwise compute clamped copies of its row).
  const R = vec4 && M >= 128 ? 16 : vec4 && M < 4 ? 1 : 4;
  const C = vec4 && N >= 64 ? 2 : 1;
  // A workgroup is `cols` blocks wide; a one-row product spreads all its threads along N.
  const width = R === 1 ? WORKGROUP_SIZE : COLS;
  const groupsM = Math.ceil(M / (R * (WORKGROUP_SIZE / width)));
  const groupsN = Math.ceil(N / (4 * C * width));
  const rank = space.shape.length;
  const spaceInLanes = {
    shape: space.shape,
    strides: space.strides.map((s) => s.map((v) => v / lanes)),
  };
  return {
    key: vec4 ? `matmul:vec4:${R}x${C}:b${rank}` : `matmul:scalar:b${rank}`,
    source: () => (vec4 ? vec4Source(rank, R, C, width) : scalarSource(rank)),
    inputs: 2,
    uniforms: new Uniforms()
      .u32s([M, K, N, groupsM, groupsN, offOut / lanes])
      .u32s(indexValues([offA / lanes, offB / lanes], spaceInLanes))
      .words(),
    workgroups: batches * groupsM * groupsN,
  };
}

function sizeOf(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

function fields(rank: number): string[] {
  return ["M", "K", "N", "groupsM", "groupsN", "offOut", ...indexFields(rank, 2)];
}

/**
 * WGSL locating this thread's block: batch offsets `i0`/`i1`, first row
 * `row`, first column group `colBlock` (blocks of `R` rows, `C` groups).
 */
function locate(rank: number, R: number, C: number, width = COLS): string {
  return `  let perBatch = u.groupsM * u.groupsN;
  let idx = wg / perBatch;
  let inBatch = wg % perBatch;
${wgslIndices(rank, 2)}  let row = ((inBatch / u.groupsN) * ${
    WORKGROUP_SIZE / width
  }u + lid / ${width}u) * ${R}u;
  let colBlock = ((inBatch % u.groupsN) * ${width}u + lid % ${width}u) * ${C}u;
`;
}

/** Repeats `f(i)` for i in [0, n). */
function each(n: number, f: (i: number) => string): string {
  return Array.from({ length: n }, (_, i) => f(i)).join("");
}

function vec4Source(rank: number, R: number, C: number, width: number): string {
  const rows = Array.from({ length: R }, (_, r) => r);
  const cols = Array.from({ length: C }, (_, c) => c);
  const fma = (r: number, c: number) =>
    `    c${r}_${c} += x${r}.x * b0_${c} + x${r}.y * b1_${c} + x${r}.z * b2_${c} + x${r}.w * b3_${c};\n`;
  return storage(0, "a", "vec4<f32>", false) + storage(1, "b", "vec4<f32>", false) +
    storage(2, "out", "vec4<f32>", true) + uniformStruct(fields(rank), 3) +
    mainHeader(WORKGROUP_SIZE) +
    `
  let K4 = u.K / 4u;
  let N4 = u.N / 4u;
${locate(rank, R, C, width)}  if (row >= u.M || colBlock >= N4) { return; }
  // Rows and columns past the end re-read the last one; their results are not stored.
  let lastRow = u.M - 1u;
  let lastCol = N4 - 1u;
${each(R, (r) => `  let a${r} = i0 + min(row + ${r}u, lastRow) * K4;\n`)}${
      each(C, (c) => `  let n${c} = i1 + min(colBlock + ${c}u, lastCol);\n`)
    }${
      rows.map((r) => each(C, (c) => `  var c${r}_${c} = vec4<f32>(0.0);\n`)).join("")
    }  var bk = 0u;
  for (var k = 0u; k < K4; k++) {
${
      each(4, (j) =>
        each(C, (c) =>
          `    let b${j}_${c} = b[n${c} + bk${j === 0 ? "" : ` + ${j}u * N4`}];\n`))
    }    bk += 4u * N4;
${
      rows.map((r) => `    let x${r} = a[a${r} + k];\n` + cols.map((c) => fma(r, c)).join("")).join(
        "",
      )
    }  }
  let o = u.offOut + idx * u.M * N4 + row * N4 + colBlock;
${
      rows.map((r) =>
        cols.map((c) => {
          const conds = [
            ...(r > 0 ? [`row + ${r}u < u.M`] : []),
            ...(c > 0 ? [`colBlock + ${c}u < N4`] : []),
          ];
          const store = `out[o + ${r === 0 ? "" : `${r}u * N4 + `}${c}u] = c${r}_${c};`;
          return conds.length === 0
            ? `  ${store}\n`
            : `  if (${conds.join(" && ")}) { ${store} }\n`;
        }).join("")
      ).join("")
    }}
`;
}

function scalarSource(rank: number): string {
  return storage(0, "a", "f32", false) + storage(1, "b", "f32", false) +
    storage(2, "out", "f32", true) +
    uniformStruct(fields(rank), 3) + mainHeader(WORKGROUP_SIZE) + `
${locate(rank, 4, 1)}  let col = colBlock * 4u;
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
