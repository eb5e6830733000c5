/**
 * Copies of sealed weights kept in the CPU kernels' WebAssembly memory, so
 * that a decode step's `linear` reads its weight once, from there, instead
 * of copying it in on every call (gemm.ts's copy path), and splits the rows
 * over the worker pool.
 *
 * Why it cannot go stale. Only a sealed tensor (`NDArray.seal()`: what a
 * tensor cache loads on the CPU) is copied, and a copy is used only while
 * the seal it was made under holds (a copy is keyed by the seal, a new
 * object per `seal()`). Every way to write into the tensor's block
 * from outside the library's own kernels ends the seal before the write
 * can happen: `cpuView()` (whoever gets a view may keep it and write later,
 * so getting one is enough) and every in-place builtin (`checkWritable`).
 * Kernels that only read a weight take `readView()`, which leaves it sealed;
 * kernels write only into tensors they allocate. A block a pool hands out
 * again belongs to another tensor object, which is not sealed, and a freed
 * tensor is never sealed.
 *
 * Where copies live. In the kernels' shared memory (the pool's), from
 * `RESIDENT_BASE` (512 MiB) up to the memory's 2 GiB maximum; the kernels'
 * scratch stays below `RESIDENT_BASE` (a product needing more runs in
 * TypeScript, as one past 2 GiB did before). Copies are appended; when the
 * next one does not fit, every copy is dropped and the region starts again
 * (a model larger than 1.5 GiB takes the copy path for what does not fit).
 * Pages of the region are committed as copies are written and are never
 * given back (a WebAssembly memory cannot shrink). Like the scratch, the
 * region is outside `maxMemoryBytes` and `memory_stats()`: it is a second
 * copy of weights the tensor cache already holds.
 *
 * @module
 */

import type { NDArray } from "../../../devices/ndarray.ts";
import { shared } from "../../../ground/shared.ts";
import { DOT_K_STEP, DOT_ROWS } from "./gemm_module.ts";
import { scratchView, type WasmKernels } from "./runtime.ts";

/** Where the copies start, in bytes: the kernels' scratch stays below. */
export const RESIDENT_BASE = 512 * 2 ** 20;
/** The memory's maximum (runtime.ts's 2 GiB). */
const RESIDENT_END = 2 ** 31;

interface Copy {
  /** Byte address of the copy in the kernels' memory. */
  readonly at: number;
  /** The region's epoch when it was written: copies from before a reset are gone. */
  readonly epoch: number;
}

interface ResidentState {
  /** The kernels whose memory holds the copies (tests compile them again). */
  kernels: WasmKernels | null;
  /** The next free byte address. */
  next: number;
  epoch: number;
  /** Per seal, its copy in each layout. */
  copies: WeakMap<object, { dot?: Copy; gemm?: Copy }>;
}

const state: ResidentState = shared("relaxvm.cpuResident.v1", () => ({
  kernels: null,
  next: RESIDENT_BASE,
  epoch: 0,
  copies: new WeakMap(),
}));

/** Drops every copy (the next use of each copies it again). */
export function dropResidentCopies(): void {
  state.next = RESIDENT_BASE;
  state.epoch++;
}

/**
 * The byte address in `k.memory` of a copy of the float32 weight `w`
 * (`[N, K]`, read as `rows` rows of K, `rows` ≥ N a multiple of
 * `DOT_ROWS`, packed in panels for `dot_panels` with rows past N zero),
 * made now if there is none; or -1 where `w` is not sealed or
 * the copy cannot be had (then the caller copies as before).
 */
export function residentCopy(k: WasmKernels, w: NDArray, wv: Float32Array): number {
  const N = w.shape[0], K = w.shape[1];
  const bytes = Math.ceil(N / DOT_ROWS) * DOT_ROWS * K * 4;
  return residentLayout(k, w, "dot", bytes, (dst, off) => packPanels(wv, N, K, dst, off));
}

/**
 * The byte address in `k.memory` of `w` (sealed) in the layout named
 * `layout`, `bytes` long, written by `pack(view, floatOffset)` when it is
 * not there yet; -1 where `w` is not sealed or the memory cannot hold it.
 * One seal may have a copy in each layout (a weight a decode step reads as
 * `dot_panels` panels and a prefill as `gemm_tiles` panels).
 */
export function residentLayout(
  k: WasmKernels,
  w: NDArray,
  layout: "dot" | "gemm",
  bytes: number,
  pack: (dst: Float32Array, off: number) => void,
): number {
  const seal = w.sealToken;
  if (seal === null) return -1;
  if (state.kernels !== k) {
    state.kernels = k;
    dropResidentCopies();
  }
  let copies = state.copies.get(seal);
  const have = copies?.[layout];
  if (have !== undefined && have.epoch === state.epoch) return have.at;
  bytes = Math.ceil(bytes / 64) * 64;
  if (bytes > RESIDENT_END - RESIDENT_BASE) return -1;
  if (state.next + bytes > RESIDENT_END) dropResidentCopies();
  const at = state.next;
  let view: Float32Array;
  try {
    view = scratchView(k, at + bytes);
  } catch (e) {
    if (e instanceof RangeError) return -1; // the memory cannot grow that far
    throw e;
  }
  pack(view, at / 4);
  state.next = at + bytes;
  if (copies === undefined) state.copies.set(seal, copies = {});
  copies[layout] = { at, epoch: state.epoch };
  return at;
}

/**
 * Packs `w` (`[N, K]`, K a multiple of `DOT_K_STEP`) into the panels
 * `dot_panels` reads (gemm_module.ts): for each `DOT_ROWS` rows, for each
 * `DOT_K_STEP` values of K, those values of each of the rows in turn; rows
 * past N are zero.
 */
export function packPanels(
  w: Float32Array,
  N: number,
  K: number,
  dst: Float32Array,
  off: number,
): void {
  const step = DOT_K_STEP, group = DOT_ROWS * step;
  for (let j0 = 0; j0 < N; j0 += DOT_ROWS) {
    const base = off + j0 * K;
    for (let r = 0; r < DOT_ROWS; r++) {
      const j = j0 + r;
      let o = base + r * step;
      if (j >= N) {
        for (let k = 0; k < K; k += step, o += group) dst.fill(0, o, o + step);
        continue;
      }
      for (let k = 0, src = j * K; k < K; k += step, o += group, src += step) {
        for (let e = 0; e < step; e++) dst[o + e] = w[src + e];
      }
    }
  }
}
