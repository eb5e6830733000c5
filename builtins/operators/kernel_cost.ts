/**
 * What a kernel costs, and how a long one is made to stop (issue 27, finding
 * 4). `maxMemoryBytes` bounds a kernel's inputs and output, and so the
 * length of a kernel whose work is linear in them, but not of one whose
 * work grows faster: `attention` over `[1, T, 1]` does `T²` work in `T`
 * memory, a matmul `M·K·N` in `M·K + K·N + M·N`. So every `vm.op.*` kernel
 * charges an estimate of its work, in multiply-adds (`*Work` below), to the
 * running call before it runs:
 *
 * - **fuel**: one unit per `MULTIPLY_ADDS_PER_FUEL` multiply-adds, about
 *   what the VM spends on one instruction (work below `MIN_CHARGED_WORK`
 *   counts as the instruction that called it, so small kernels pay nothing);
 * - **time**: a WebGPU kernel cannot be interrupted once dispatched, so one
 *   that could not finish in the time left even at `GPU_WORK_PER_MS` is
 *   refused ("Timed out") before it starts;
 * - **time and the signal, on the CPU**: the super-linear kernels (`attention`,
 *   `matmul`, `linear`) run in chunks of rows (`launchSplit`) when the call
 *   has a deadline or a signal, checking both between chunks, and when the
 *   work is large (`ASYNC_WORK`) the chunks run asynchronously, one
 *   macrotask apart at least every `YIELD_MS`, so that an `AbortSignal` fired
 *   from a timer lands and other tenants' timers run. The call sees a
 *   Promise, which the VM races against its limits as it does any packed
 *   function's.
 *
 * Outside a VM call, or in one with no deadline or signal, a kernel runs
 * whole and synchronously, as before: only fuel is charged.
 *
 * @module
 */

import type { TensorDType } from "../../ground/dtype.ts";
import type { Device } from "../../devices/device.ts";
import type { WorkBudget } from "../../devices/allocator.ts";
import {
  activateAllocators,
  activeAllocators,
  currentWorkBudget,
} from "../../devices/allocation_context.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { backendFor, type OpBackend } from "../../kernels/kernel_backend.ts";

/** Multiply-adds one unit of `fuel` buys (about an instruction's time on the VM's loop). */
export const MULTIPLY_ADDS_PER_FUEL = 64;
/** Work (multiply-adds) below which a kernel charges nothing: it counts as its call. */
export const MIN_CHARGED_WORK = 2 ** 16;
/**
 * Multiply-adds per millisecond a WebGPU kernel is assumed to reach when
 * deciding whether it can finish in the time left: a fast GPU's rate
 * (1 TMAC/s), so that no kernel that could finish is refused; a slower
 * adapter (a software one) can still run past the deadline by the kernel's
 * length.
 */
export const GPU_WORK_PER_MS = 1e9;
/**
 * Multiply-add equivalents of one attention score beyond its dot products:
 * its `exp`, the running maximum and sum (measured: about 5–10 ns a score
 * with a head size of 1, bench in docs/security.md's limits section).
 */
export const ATTENTION_SCORE_WORK = 32;

/** Work of the first chunk of a split kernel; later chunks are sized to take `CHUNK_MS`. */
const FIRST_CHUNK_WORK = 2 ** 20;
/** What each later chunk of a split kernel should take (milliseconds). */
const CHUNK_MS = 4;
/**
 * Work at and above which a kernel is split at all: below it a kernel runs
 * whole (under 1 ms in WebAssembly, about 30 ms in TypeScript at worst), as
 * each chunk has a cost of its own (a matmul packs its B per call).
 */
export const SPLIT_WORK = 2 ** 25;
/** Work at and above which a split kernel's chunks run asynchronously. */
export const ASYNC_WORK = 2 ** 26;
/** An asynchronous kernel gives the event loop a macrotask at least this often (milliseconds). */
const YIELD_MS = 4;

/** Work of `matmul` / `linear`: `M·K·N` multiply-adds over `batches` products. */
export function productWork(batches: number, M: number, K: number, N: number): number {
  return batches * M * Math.max(K, 1) * N;
}

/** Work of fused attention over `units` heads: each score's dot products and softmax. */
export function attentionWork(
  units: number,
  Tq: number,
  Tk: number,
  D: number,
  Dv: number,
): number {
  return units * Tq * Tk * (D + Dv + ATTENTION_SCORE_WORK);
}

/**
 * Charges `work` multiply-adds of kernel `op` on `device` to the running
 * call (fuel; the time left, on a device that cannot be interrupted); throws
 * the call's limit error when they do not fit. Returns the call's budget
 * when the work should be split into chunks that check it (a CPU kernel in
 * a call with a deadline or a signal), else null.
 */
export function chargeWork(op: string, work: number, device: Device): WorkBudget | null {
  if (!(work >= MIN_CHARGED_WORK)) return null;
  const budget = currentWorkBudget();
  if (budget === null) return null;
  budget.chargeFuel(Math.ceil(work / MULTIPLY_ADDS_PER_FUEL));
  if (device.kind !== "cpu") {
    const ms = work / GPU_WORK_PER_MS;
    if (ms > budget.remainingMs()) {
      budget.refuse(
        `${op} on ${device} would do ${work.toExponential(2)} multiply-adds, about ${
          Math.ceil(ms)
        } ms even at ${GPU_WORK_PER_MS / 1e9} TMAC/s, and cannot be interrupted once dispatched`,
      );
    }
    return null;
  }
  return budget.watched ? budget : null;
}

/**
 * A kernel that can run a range of its rows alone: the rows of all its
 * output's heads or batches in a row (`rows` of them, `rowWork`
 * multiply-adds each).
 */
export interface RowSplit {
  /** Rows in all. */
  readonly rows: number;
  /** Work of one row (multiply-adds). */
  readonly rowWork: number;
  /**
   * The fewest rows a chunk takes (default 1): a chunk of a product packs
   * all of B, so one of a few rows would cost more in packing than in work.
   */
  readonly minRows?: number;
  /** What a chunk should take (milliseconds; default `CHUNK_MS`): longer where chunks cost more. */
  readonly chunkMs?: number;
  /** Runs the kernel whole (the unsplit call). */
  whole(backend: OpBackend, out: NDArray): void;
  /** Runs rows `[from, to)` only. */
  part(backend: OpBackend, out: NDArray, from: number, to: number): void;
}

/**
 * `launch` for a kernel whose work grows faster than its memory: charges
 * its work (`chargeWork`), allocates the output and runs it whole, or in
 * chunks of rows that check the call's clock and signal (see the module),
 * asynchronously when the work is at least `ASYNC_WORK`. A kernel that
 * throws or is stopped does not leak the output's memory.
 */
export function launchSplit(
  op: string,
  x: NDArray,
  shape: readonly number[],
  dtype: TensorDType,
  split: RowSplit,
): NDArray | Promise<NDArray> {
  const work = split.rows * split.rowWork;
  const budget = chargeWork(op, work, x.device);
  const backend = backendFor(x.device.kind);
  const out = NDArray.empty(shape, dtype, x.device);
  try {
    if (budget === null || work < SPLIT_WORK || split.rows < 2) {
      split.whole(backend, out);
      return out;
    }
    if (work < ASYNC_WORK) {
      runChunks(split, backend, out, budget);
      return out;
    }
  } catch (e) {
    out.releaseIfUnowned();
    throw e;
  }
  return runChunksAsync(op, split, backend, out, budget);
}

/**
 * Rows of the first chunk, and of the next one after a chunk of `rows` took
 * `ms`: sized to take `CHUNK_MS`, growing at most 8× and shrinking at most
 * 4× a step, never below `minRows`.
 */
function nextChunk(split: RowSplit, rows: number, ms: number): number {
  const least = split.minRows ?? 1;
  if (rows === 0) return Math.max(least, Math.floor(FIRST_CHUNK_WORK / split.rowWork));
  const target = split.chunkMs ?? CHUNK_MS;
  const factor = ms <= 0 ? 8 : Math.min(8, Math.max(0.25, target / ms));
  return Math.max(least, Math.floor(rows * factor));
}

/** Where the chunk from `row` of `per` rows ends: a remainder shorter than `per` joins it. */
function chunkEnd(split: RowSplit, row: number, per: number): number {
  return split.rows - (row + per) < per ? split.rows : row + per;
}

/** The chunks one after another, the call's clock and signal checked between them. */
function runChunks(split: RowSplit, backend: OpBackend, out: NDArray, budget: WorkBudget): void {
  let per = nextChunk(split, 0, 0);
  for (let row = 0; row < split.rows;) {
    const to = chunkEnd(split, row, per);
    const start = performance.now();
    split.part(backend, out, row, to);
    per = nextChunk(split, to - row, performance.now() - start);
    row = to;
    if (row < split.rows) budget.checkNow();
  }
}

/**
 * The chunks with a macrotask between them at least every `YIELD_MS`, each
 * run with the calling VM's allocators active (what a kernel's copies are
 * charged to). When the call stops while a chunk waits, the output is
 * released at once, before the VM reports the stop, and no further chunk
 * runs.
 */
async function runChunksAsync(
  op: string,
  split: RowSplit,
  backend: OpBackend,
  out: NDArray,
  budget: WorkBudget,
): Promise<NDArray> {
  const allocators = activeAllocators();
  const signal = budget.callSignal();
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    out.releaseIfUnowned();
  };
  signal?.addEventListener("abort", release, { once: true });
  try {
    let per = nextChunk(split, 0, 0), yielded = performance.now();
    for (let row = 0; row < split.rows;) {
      if (row > 0) {
        if (performance.now() - yielded >= YIELD_MS) {
          await macrotask();
          yielded = performance.now();
        }
        budget.checkNow();
        if (released) throw new Error(`${op}: the call ended while its kernel ran`);
      }
      const to = chunkEnd(split, row, per);
      const start = performance.now();
      const previous = activateAllocators(allocators);
      try {
        split.part(backend, out, row, to);
      } finally {
        activateAllocators(previous);
      }
      per = nextChunk(split, to - row, performance.now() - start);
      row = to;
    }
    return out;
  } catch (e) {
    release();
    throw e;
  } finally {
    signal?.removeEventListener("abort", release);
  }
}

/**
 * Resolves after the event loop has run a macrotask: a message through a
 * fresh `MessageChannel`, which, unlike a nested `setTimeout(0)`, is not
 * clamped to 4 ms, and lets due timers and I/O run first.
 */
function macrotask(): Promise<void> {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(null);
    channel.port2.close();
  });
}
