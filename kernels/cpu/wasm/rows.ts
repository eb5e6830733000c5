/**
 * The calls into rows_module.ts: float32 layer norm, softmax and last-axis
 * sums, means and maxima on the WebAssembly path. Each copies a chunk of
 * whole rows into the calling thread's scratch (runtime.ts's local
 * instance), runs the kernel there and copies the results out, a chunk at a
 * time so that the copy in, the kernel and the copy out stay in L2.
 *
 * Each returns false, having written nothing, where the TypeScript kernel
 * should run instead: `"typescript"` mode, work below its `"auto"`
 * threshold, no WebAssembly, or rows too long for the scratch.
 *
 * @module
 */

import {
  cpuKernelMode,
  kernelModule,
  type KernelSpace,
  SCRATCH_BASE_BYTES,
  scratchFor,
  scratchView,
  wasmKernelsFor,
} from "./runtime.ts";
import { type ROWS_BINARY_OPS, rowsModuleBytes } from "./rows_module.ts";

/** The exported functions of rows_module.ts (byte addresses). */
export interface RowsExports {
  attention(
    qp: number,
    kp: number,
    vp: number,
    op: number,
    sp: number,
    Tq: number,
    Tk: number,
    Dp: number,
    Dvp: number,
    scale: number,
    causal: number,
    offset: number,
    kStride: number,
    vStride: number,
  ): void;
  layer_norm(xp: number, gp: number, bp: number, rows: number, n: number, eps: number): void;
  softmax(xp: number, rows: number, n: number): void;
  row_sum(xp: number, op: number, rows: number, n: number, mean: number): void;
  row_max(xp: number, op: number, rows: number, n: number): void;
  [binary: `binary_${string}`]: (
    ap: number,
    aStep: number,
    bp: number,
    bStep: number,
    op: number,
    rows: number,
    n: number,
  ) => void;
}

/** The binary operators `wasmBinaryRows` covers. */
export type RowsBinaryOp = keyof typeof ROWS_BINARY_OPS;

/**
 * Values per chunk when rows are short: 256 KiB, in L2 between the copy in,
 * the kernel and the copy out. A longer row is one chunk by itself.
 */
const CHUNK = 64 * 1024;
/** The longest row taken (64 MiB of float32): scratch stays far below resident.ts's region. */
const MAX_ROW = 16 * 2 ** 20;
/** Scratch starts here, in floats. */
const BASE = SCRATCH_BASE_BYTES / 4;

/**
 * Below these many values (`rows · n`) each operator stays in TypeScript in
 * `"auto"` mode: the call and the copies cost more than the SIMD saves.
 * Measured with bench/cpu_rows_bench.ts (the README's table).
 */
export const ROWS_WASM_MIN_VALUES = {
  layerNorm: 2048,
  softmax: 2048,
  reduce: 4096,
  binary: 4096,
} as const;

/**
 * Whether work of `values` values might take the WebAssembly path: a check
 * cheap enough for the smallest tensors, made before an operator prepares
 * the call (broadcast plans, views).
 */
export function rowsMayTake(values: number, threshold: number): boolean {
  const mode = cpuKernelMode();
  return mode === "wasm" || (mode === "auto" && values >= threshold);
}

/** rows_module.ts's functions on a kernel space (runtime.ts's `kernelModule`). */
const rowsOn = kernelModule<RowsExports>(rowsModuleBytes);

/**
 * The calling thread's kernel space and rows_module.ts's functions on it, for
 * work of `values` (values or flops) against an `"auto"` `threshold`; null
 * where TypeScript should run.
 */
export function rowsKernels(
  values: number,
  threshold: number,
): [KernelSpace, RowsExports] | null {
  const k = wasmKernelsFor(values, threshold);
  if (k === null) return null;
  const space = k.local;
  const e = rowsOn(space);
  return e === null ? null : [space, e];
}

/** Rows per chunk for rows of `n`: as many as fit in `CHUNK`, at least one. */
function rowsPerChunk(n: number): number {
  return Math.max(1, Math.floor(CHUNK / n));
}

/**
 * The row kernels' copy loop: chunks of `per` rows of `x` (`n` values a
 * row) copied to `xAt` in the scratch, `run(rows)` over each, and the
 * chunk's `outPerRow` values a row copied from `outAt` into `o`.
 */
function byChunks(
  space: KernelSpace,
  view: Float32Array,
  x: Float32Array,
  rows: number,
  n: number,
  per: number,
  xAt: number,
  run: (rows: number) => void,
  o: Float32Array,
  outAt: number,
  outPerRow: number,
): void {
  for (let r0 = 0; r0 < rows; r0 += per) {
    const rr = Math.min(per, rows - r0);
    view.set(x.subarray(r0 * n, (r0 + rr) * n), xAt);
    run(rr);
    view = scratchView(space, 0);
    o.set(view.subarray(outAt, outAt + rr * outPerRow), r0 * outPerRow);
  }
}

/**
 * Layer norm of `rows` rows of `n` values: `o = (x - mean) / sqrt(var + eps) · g + b`.
 */
export function wasmLayerNorm(
  x: Float32Array,
  g: Float32Array,
  b: Float32Array,
  o: Float32Array,
  rows: number,
  n: number,
  eps: number,
): boolean {
  if (rows === 0 || n === 0 || n > MAX_ROW) return false;
  const found = rowsKernels(rows * n, ROWS_WASM_MIN_VALUES.layerNorm);
  if (found === null) return false;
  const [space, e] = found;
  const per = Math.min(rows, rowsPerChunk(n));
  // gamma, beta, then the chunk; 4 floats of padding after each for the masked last vector.
  const gAt = BASE, bAt = gAt + n + 4, xAt = bAt + n + 4;
  const view = scratchFor(space, (xAt + per * n + 4) * 4);
  if (view === null) return false;
  view.set(g.subarray(0, n), gAt);
  view.set(b.subarray(0, n), bAt);
  const run = (rr: number) => e.layer_norm(xAt * 4, gAt * 4, bAt * 4, rr, n, eps);
  byChunks(space, view, x, rows, n, per, xAt, run, o, xAt, n);
  return true;
}

/** Softmax over `rows` rows of `n` values, entirely in WebAssembly. */
export function wasmSoftmaxRows(
  x: Float32Array,
  o: Float32Array,
  rows: number,
  n: number,
): boolean {
  if (rows === 0 || n === 0 || n > MAX_ROW) return false;
  const found = rowsKernels(rows * n, ROWS_WASM_MIN_VALUES.softmax);
  if (found === null) return false;
  const [space, e] = found;
  const per = Math.min(rows, rowsPerChunk(n));
  const view = scratchFor(space, (BASE + per * n + 4) * 4);
  if (view === null) return false;
  byChunks(space, view, x, rows, n, per, BASE, (rr) => e.softmax(BASE * 4, rr, n), o, BASE, n);
  return true;
}

/**
 * `o[r] = sum, mean or max of row r` for `rows` rows of `n` values (`n`
 * at least 1). Sums are accumulated in float64.
 */
export function wasmReduceRows(
  op: "sum" | "mean" | "max",
  x: Float32Array,
  o: Float32Array,
  rows: number,
  n: number,
): boolean {
  if (rows === 0 || n === 0 || n > MAX_ROW) return false;
  const found = rowsKernels(rows * n, ROWS_WASM_MIN_VALUES.reduce);
  if (found === null) return false;
  const [space, e] = found;
  const per = Math.min(rows, rowsPerChunk(n));
  const outAt = BASE + per * n + 4;
  const view = scratchFor(space, (outAt + per) * 4);
  if (view === null) return false;
  const run = op === "max"
    ? (rr: number) => e.row_max(BASE * 4, outAt * 4, rr, n)
    : (rr: number) => e.row_sum(BASE * 4, outAt * 4, rr, n, op === "mean" ? 1 : 0);
  byChunks(space, view, x, rows, n, per, BASE, run, o, outAt, 1);
  return true;
}

/**
 * `o = a <op> b` for float32 `a` of `rows · n` values and `b` of as many
 * (`bRow` false) or of one row of `n` broadcast over every row (`bRow`
 * true; `aRow` likewise for `a`; not both).
 */
export function wasmBinaryRows(
  op: RowsBinaryOp,
  a: Float32Array,
  aRow: boolean,
  b: Float32Array,
  bRow: boolean,
  o: Float32Array,
  rows: number,
  n: number,
): boolean {
  if (rows === 0 || n === 0) return false;
  const found = rowsKernels(rows * n, ROWS_WASM_MIN_VALUES.binary);
  if (found === null) return false;
  const [space, e] = found;
  const kernel = e[`binary_${op}`];
  if (!aRow && !bRow) {
    // Same shapes: chunks of CHUNK values, so one chunk's three arrays stay in L2.
    const total = rows * n, m0 = Math.min(total, CHUNK);
    const aAt = BASE, bAt = aAt + m0 + 4, oAt = bAt + m0 + 4;
    let view = scratchFor(space, (oAt + m0 + 4) * 4);
    if (view === null) return false;
    for (let from = 0; from < total; from += CHUNK) {
      const m = Math.min(CHUNK, total - from);
      view.set(a.subarray(from, from + m), aAt);
      view.set(b.subarray(from, from + m), bAt);
      kernel(aAt * 4, 0, bAt * 4, 0, oAt * 4, 1, m);
      view = scratchView(space, 0);
      o.set(view.subarray(oAt, oAt + m), from);
    }
    return true;
  }
  if (n > CHUNK) return false; // a broadcast row longer than a chunk: rare, TypeScript
  const per = Math.min(rows, rowsPerChunk(n));
  const rowAt = BASE, xAt = rowAt + n + 4, oAt = xAt + per * n + 4;
  const x = aRow ? b : a;
  const view = scratchFor(space, (oAt + per * n + 4) * 4);
  if (view === null) return false;
  view.set((aRow ? a : b).subarray(0, n), rowAt);
  const run = aRow
    ? (rr: number) => kernel(rowAt * 4, 0, xAt * 4, n * 4, oAt * 4, rr, n)
    : (rr: number) => kernel(xAt * 4, n * 4, rowAt * 4, 0, oAt * 4, rr, n);
  byChunks(space, view, x, rows, n, per, xAt, run, o, oAt, n);
  return true;
}
