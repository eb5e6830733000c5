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
 * `RESIDENT_BASE` (512 MiB) up to `RESIDENT_BASE + cpu({ residentBytes })`
 * (default 1 GiB), never past the memory's 2 GiB maximum (runtime.ts; 32-bit
 * WebAssembly could address 4 GiB, but the kernels keep addresses in signed
 * 32-bit integers); the kernels' scratch stays below `RESIDENT_BASE`.
 * A copy's range is handed out first fit from a free list of the region
 * (ranges given back, coalesced with their neighbours), else from the end
 * of what was used so far. A copy that fits nowhere is not made (the
 * kernel copies its weight in, as it would without the region); only when
 * the free ranges together would hold it but none alone does is every copy
 * dropped and the region started again. Pages of the region are committed
 * as copies are written and are never given back to the system (a
 * WebAssembly memory cannot shrink), but a range given back is reused, and
 * once the last copy is given back the whole memory is dropped when the
 * kernels are idle (runtime.ts's `trimCpuKernelMemory`).
 *
 * When a copy is given back. When its seal ends: the tensor is freed (its
 * block `reclaimed()`), unsealed (`cpuView()`, an in-place builtin), or
 * sealed anew; `MemoryBlock` tells this module (`releaseSealCopies`, the
 * `sealEnded` of the `CpuKernelHost` kernels/install.ts installs). A sealed
 * tensor dropped without `dispose()` gives its copies back when the garbage
 * collector takes its seal (a `FinalizationRegistry`, the backstop).
 *
 * What is counted where. `memory_stats()` of the CPU device reports the
 * live copies' bytes (`residentBytes`, process-wide: one copy serves every
 * VM reading that weight) and their peak. The VM whose call made a copy
 * charges it to its `maxMemoryBytes` (its `MemoryLimit`, like a block) until
 * it is given back; a copy that would pass the limit is not made, and a
 * tensor of that VM that would pass it takes the VM's copies' memory first
 * (they only save time; the next call copies its weight in, or makes the
 * copy again if it fits). Copies made outside any VM are charged to none.
 *
 * @module
 */

import type { NDArray } from "../../../devices/ndarray.ts";
import { shared } from "../../../ground/shared.ts";
import { activeAllocators, type ActiveLimit } from "../../../devices/allocation_context.ts";
import { cpu, cpuResidentSetting, type ResidentStats } from "../../../devices/cpu_device.ts";
import { DOT_K_STEP, DOT_ROWS } from "./gemm_module.ts";
import {
  grownView,
  requestTrim,
  RESIDENT_BASE,
  RESIDENT_END,
  setCopiesGone,
  type WasmKernels,
} from "./runtime.ts";

/** What a copy is charged to: a VM's `MemoryLimit`. */
type Charge = ActiveLimit;

interface Copy {
  /** Byte address of the copy in the kernels' memory. */
  readonly at: number;
  /** Bytes of its range (a multiple of 64). */
  readonly bytes: number;
  /** The VM limit it is charged to, if any. */
  readonly charge: Charge | null;
}

/** A seal's copies, one per layout. */
interface Entry {
  dot?: Copy;
  gemm?: Copy;
}

interface ResidentState {
  /** The kernels whose memory holds the copies (tests compile them again). */
  kernels: WasmKernels | null;
  /** The end of the region used so far: past it, nothing was handed out. */
  top: number;
  /** Free ranges below `top`, by address, never adjacent (coalesced). */
  free: { at: number; bytes: number }[];
  /** Every live copy (to give them all back on a reset); holds no tensor. */
  live: Set<Copy>;
  /** Per seal, its copies. */
  copies: WeakMap<object, Entry>;
  /** Gives a dropped seal's copies back (the garbage collector's backstop). */
  registry: FinalizationRegistry<Entry>;
  liveBytes: number;
  peakBytes: number;
}

const state: ResidentState = shared("relaxvm.cpuResident.v2", () => ({
  kernels: null,
  top: RESIDENT_BASE,
  free: [],
  live: new Set(),
  copies: new WeakMap(),
  registry: new FinalizationRegistry((e: Entry) => freeEntry(e)),
  liveBytes: 0,
  peakBytes: 0,
}));

// The kernels' memory, grown to hold the region, is dropped only once no copy lives in it.
setCopiesGone(() => state.live.size === 0);

/**
 * Gives back the copies kept under `seal`, which just ended (`CpuKernelHost.sealEnded`,
 * installed by kernels/install.ts; devices/storage.ts calls it).
 */
export function releaseSealCopies(seal: object): void {
  const e = state.copies.get(seal);
  if (e === undefined) return;
  state.copies.delete(seal);
  state.registry.unregister(e);
  freeEntry(e);
}

/**
 * Gives back the copies charged to `limit`, a VM's memory limit a request would otherwise
 * pass: they only save time (`CpuKernelHost.releaseOptionalMemory`).
 */
export function releaseCopiesChargedTo(limit: object): void {
  for (const c of [...state.live]) if (c.charge === limit) freeCopy(c);
}

/**
 * Gives back the copies past the region's end after `cpu({ residentBytes })` changed
 * (`CpuKernelHost.residentSettingChanged`).
 */
export function releaseCopiesPastEnd(): void {
  const end = regionEnd();
  for (const c of [...state.live]) if (c.at + c.bytes > end) freeCopy(c);
}

/** The resident copies' counters (`memory_stats()` of the CPU device). */
export function residentStats(): ResidentStats {
  return { residentBytes: state.liveBytes, residentPeakBytes: state.peakBytes };
}

/**
 * The region's extent now: `[RESIDENT_BASE, end)` and the byte past the
 * last range ever handed out (what the memory was grown to hold), for tests.
 */
export function residentRegion(): { end: number; top: number; freeRanges: number } {
  return { end: regionEnd(), top: state.top, freeRanges: state.free.length };
}

function regionEnd(): number {
  return Math.min(RESIDENT_END, RESIDENT_BASE + Math.floor(cpuResidentSetting() / 64) * 64);
}

/** Drops every copy (the next use of each copies it again). */
export function dropResidentCopies(): void {
  for (const c of state.live) c.charge?.give(c.bytes);
  state.live.clear();
  state.copies = new WeakMap();
  state.free = [];
  state.top = RESIDENT_BASE;
  state.liveBytes = 0;
  requestTrim();
}

function freeEntry(e: Entry): void {
  if (e.dot !== undefined) freeCopy(e.dot);
  if (e.gemm !== undefined) freeCopy(e.gemm);
}

/** Gives `c`'s range back (once: a copy dropped by a reset is not live). */
function freeCopy(c: Copy): void {
  if (!state.live.delete(c)) return;
  state.liveBytes -= c.bytes;
  c.charge?.give(c.bytes);
  giveRange(c.at, c.bytes);
  if (state.live.size === 0) requestTrim();
}

/** Puts `[at, at + bytes)` on the free list, joined with free neighbours (or lowering `top`). */
function giveRange(at: number, bytes: number): void {
  const free = state.free;
  let i = 0;
  while (i < free.length && free[i].at < at) i++;
  const before = i > 0 ? free[i - 1] : null;
  if (before !== null && before.at + before.bytes === at) {
    before.bytes += bytes;
    at = before.at;
    bytes = before.bytes;
    i--;
    free.splice(i, 1);
  }
  if (i < free.length && at + bytes === free[i].at) {
    bytes += free[i].bytes;
    free.splice(i, 1);
  }
  if (at + bytes === state.top) state.top = at;
  else free.splice(i, 0, { at, bytes });
}

/** A range of `bytes` in the region, first fit, or -1 where none is free. */
function takeRange(bytes: number): number {
  const end = regionEnd(), free = state.free;
  for (let i = 0; i < free.length; i++) {
    const r = free[i];
    if (r.bytes >= bytes && r.at + bytes <= end) {
      const at = r.at;
      if (r.bytes === bytes) free.splice(i, 1);
      else {
        r.at += bytes;
        r.bytes -= bytes;
      }
      return at;
    }
  }
  if (state.top + bytes <= end) {
    const at = state.top;
    state.top += bytes;
    return at;
  }
  return -1;
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
 * not there yet; -1 where `w` is not sealed, or the region (`cpu({
 * residentBytes })`), the calling VM's `maxMemoryBytes` or the memory's
 * growth cannot hold it. One seal may have a copy in each layout (a weight
 * a decode step reads as `dot_panels` panels and a prefill as `gemm_tiles`
 * panels).
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
  let entry = state.copies.get(seal);
  const have = entry?.[layout];
  if (have !== undefined && state.live.has(have)) return have.at;
  bytes = Math.ceil(bytes / 64) * 64;
  if (bytes > regionEnd() - RESIDENT_BASE) return -1;
  let at = takeRange(bytes);
  if (at < 0) {
    // Free ranges that together would hold it but are split: start the region again.
    let free = regionEnd() - state.top;
    for (const r of state.free) free += r.bytes;
    if (free < bytes) return -1;
    dropResidentCopies();
    entry = undefined;
    at = takeRange(bytes);
    if (at < 0) return -1;
  }
  const charge = chargeFor(bytes);
  if (charge === false) {
    giveRange(at, bytes);
    return -1;
  }
  const view = grownView(k, at + bytes);
  if (view === null) {
    // The memory cannot grow that far.
    giveRange(at, bytes);
    charge?.give(bytes);
    return -1;
  }
  pack(view, at / 4);
  const copy: Copy = { at, bytes, charge };
  state.live.add(copy);
  state.liveBytes += bytes;
  if (state.liveBytes > state.peakBytes) state.peakBytes = state.liveBytes;
  if (entry === undefined) {
    state.copies.set(seal, entry = {});
    state.registry.register(seal, entry, entry);
  }
  entry[layout] = copy;
  return at;
}

/**
 * Charges `bytes` to the running VM's `maxMemoryBytes`: the limit charged,
 * null outside a VM, false where the copy would pass it.
 */
function chargeFor(bytes: number): Charge | null | false {
  const limit = activeAllocators()?.limit;
  if (limit === undefined) return null;
  try {
    limit.take(bytes, cpu(), bytes);
  } catch (e) {
    if (e instanceof RangeError) return false;
    throw e;
  }
  return limit;
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
