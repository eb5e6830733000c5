/**
 * The allocator contract and its counters. Every tensor the VM or a builtin
 * creates gets its storage from an `Allocator`, so `memory_stats()` sees all
 * of it.
 *
 * @module
 */

import type { Device } from "./device.ts";
import type { MemoryBlock, Storage } from "./storage.ts";
import { cpuKernelHost } from "./cpu_kernel_host.ts";

/** Counters reported by `VirtualMachine.memory_stats()`. */
export interface MemoryStats {
  /** Bytes held by live storages right now. */
  liveBytes: number;
  /** The most `liveBytes` has been. */
  peakBytes: number;
  /** Bytes of blocks obtained from the device, in total (pool reuse not counted). */
  allocatedBytes: number;
  /**
   * Bytes of blocks handed out to tensors and storages, in total, from the
   * pool or new: what the program asked for, rounded up to block sizes
   * (`vm.profile()` reports it per call).
   */
  servedBytes: number;
  /** Allocations served from the pool. */
  poolHits: number;
  /** Allocations that had to create a new block. */
  poolMisses: number;
  /** Raw blocks currently held from the device (live plus pooled). */
  liveBlocks: number;
  /**
   * On the CPU device, bytes of the CPU kernels' copies of sealed weights in
   * their WebAssembly memory (kernels/cpu/wasm/resident.ts, `cpu({
   * residentBytes })`), process-wide: the copies are shared by every VM that
   * reads the same weight, and not part of `liveBytes`. The VM whose call
   * made a copy charges it to its `maxMemoryBytes` until it is given back.
   * Reported by `VirtualMachine.memory_stats()` of a CPU device; absent on
   * other devices and in an allocator's own `stats()`.
   */
  residentBytes?: number;
  /** The most `residentBytes` has been in the process (with it). */
  residentPeakBytes?: number;
}

/** The allocator names `new VirtualMachine(..., { allocator })` accepts. */
export type AllocatorKind = "pooled" | "naive";

/** Hands out storages on one device. */
export interface Allocator {
  /** The device the storages live on. */
  readonly device: Device;
  /** A storage of at least `nbytes` usable bytes, with no references yet. */
  alloc(nbytes: number): Storage;
  /**
   * A block of at least `nbytes` bytes for one owner, who gives it back with
   * `block.owner.reclaim(block)`: what a new tensor owns until it needs a
   * `Storage`. Counted like `alloc`.
   *
   * @ignore
   */
  allocBlock(nbytes: number): MemoryBlock;
  /**
   * `allocBlock` for a tensor that lives long (a weight a tensor-cache load
   * makes): exactly `nbytes` (rounded up to 4), never a pool's larger size
   * class, and given back to the device, not kept in a pool, when released.
   * A pooled allocator rounds 576 KiB up to 1 MiB and 2.25 MiB to 3 MiB,
   * which costs GPT-small's weights 42% more memory than they hold.
   *
   * @ignore
   */
  allocExactBlock(nbytes: number): MemoryBlock;
  /** The counters so far. */
  stats(): MemoryStats;
  /** Gives every pooled block back to the device. */
  clear(): void;
  /**
   * `clear()`, and from now on a block given back goes straight to the
   * device instead of the pool (the VM that owned this allocator was
   * disposed; tensors it handed out may still come back).
   *
   * @ignore
   */
  close(): void;
}

/** A fresh set of counters. */
export function emptyStats(): MemoryStats {
  return {
    liveBytes: 0,
    peakBytes: 0,
    allocatedBytes: 0,
    servedBytes: 0,
    poolHits: 0,
    poolMisses: 0,
    liveBlocks: 0,
  };
}

/**
 * The budgets of one running VM call as a kernel sees them (vm/invocation.ts's
 * `Invocation`): the kernel front end charges a kernel's estimated work to
 * them before it runs and checks them between the chunks of a long one.
 * Every method may throw the call's limit error, which the VM reports as
 * "Out of fuel", "Timed out" or "Aborted".
 */
export interface WorkBudget {
  /** Whether the call has a deadline or a signal to watch (else only its fuel stops it). */
  readonly watched: boolean;
  /** Spends `fuel` of the call's fuel; throws when it runs out or the call has stopped. */
  chargeFuel(fuel: number): void;
  /** Milliseconds left before the call's deadline; Infinity without one. */
  remainingMs(): number;
  /** Checks the clock and the signal; throws when the call must stop. */
  checkNow(): void;
  /** Stops the call as timed out, `why` saying what could not finish in the time left. */
  refuse(why: string): never;
  /** A signal that aborts when the call stops or ends; undefined when `watched` is false. */
  callSignal(): AbortSignal | undefined;
}

/**
 * A budget of device memory shared by the allocators of one VM
 * (`maxMemoryBytes`): every block they take from a device, on any device,
 * counts until they give it back, pooled blocks included. When a new block
 * would pass the limit, the allocators first give their pooled blocks back
 * (`trim`); if it still does not fit, the request fails before any memory is
 * allocated or touched.
 */
export class MemoryLimit {
  /** The most bytes the blocks may hold together. */
  readonly maxBytes: number;
  /** Bytes of the blocks held now (live and pooled). */
  heldBytes = 0;
  /**
   * Called before a block of `LARGE_BLOCK_BYTES` or more is handed out (from
   * the pool or new): the VM checks its call's clock and signal there, so a
   * run of large kernels with no jump or call between them (12 matmuls in a
   * row) stops at its timeout instead of after the last. It may throw: the
   * allocation, and the kernel, then do not happen. Costs one clock read per
   * large block, nothing for small ones.
   */
  onLargeBlock: (() => void) | null = null;
  /**
   * The budgets of the call running now (the VM sets it to its running
   * invocation), or null outside any call: what a kernel's work is charged
   * to before it runs (builtins/operators/kernel_cost.ts).
   */
  workBudget: (() => WorkBudget | null) | null = null;
  readonly #trim: () => void;

  /** A limit of `maxBytes`; `trim` gives pooled blocks back when a request does not fit. */
  constructor(maxBytes: number, trim: () => void = () => {}) {
    this.maxBytes = maxBytes;
    this.#trim = trim;
  }

  /**
   * Counts a new block of `blockBytes`, made for a request of `nbytes` on
   * `device`, or throws a `RangeError` naming the request and the limit.
   */
  take(blockBytes: number, device: Device, nbytes: number): void {
    if (this.heldBytes + blockBytes > this.maxBytes) {
      this.#trim();
      // Then what is charged here only to go faster (the CPU kernels' weight copies) goes too.
      if (this.heldBytes + blockBytes > this.maxBytes) cpuKernelHost().releaseOptionalMemory(this);
      if (this.heldBytes + blockBytes > this.maxBytes) {
        throw new RangeError(
          `Cannot allocate ${nbytes} bytes on ${device}: the VM's memory limit of ${this.maxBytes} bytes (maxMemoryBytes) would be passed, with ${this.heldBytes} bytes in use`,
        );
      }
    }
    this.heldBytes += blockBytes;
  }

  /** A block of `blockBytes` went back to its device. */
  give(blockBytes: number): void {
    this.heldBytes -= blockBytes;
  }
}

/** Blocks this large make the VM check its call's clock (`MemoryLimit.onLargeBlock`): 64 KiB. */
export const LARGE_BLOCK_BYTES = 65536;

/** Throws a clear error when `nbytes` cannot be allocated on `device`. */
export function checkAllocationSize(device: Device, nbytes: number): void {
  if (!Number.isSafeInteger(nbytes) || nbytes < 0) {
    throw new RangeError(
      `Cannot allocate ${nbytes} bytes on ${device}: size must be a non-negative integer`,
    );
  }
  if (nbytes > device.maxAllocationBytes) {
    throw new RangeError(
      `Cannot allocate ${nbytes} bytes on ${device}: the device allows at most ${device.maxAllocationBytes} bytes in one block`,
    );
  }
}

/**
 * The device allocation every allocator makes for a block it has not got:
 * `blockBytes` counted against `limit` first (for a request of `nbytes`),
 * then asked of the device, and given back to the limit if the device
 * refuses. Returns the device's handle.
 */
export function createLimitedBlock(
  device: Device,
  limit: MemoryLimit | null,
  blockBytes: number,
  nbytes: number,
): unknown {
  // Counted (or refused) before the device allocates anything.
  limit?.take(blockBytes, device, nbytes);
  try {
    return device.createBlock(blockBytes);
  } catch (e) {
    limit?.give(blockBytes);
    throw e;
  }
}

/** Counts a block the device just made (a pool miss) in `s`. */
export function countNewBlock(s: MemoryStats, blockBytes: number): void {
  s.poolMisses++;
  s.allocatedBytes += blockBytes;
  s.liveBlocks++;
}

/** Counts `blockBytes` handed out to a tensor, and the peak. */
export function countServed(s: MemoryStats, blockBytes: number): void {
  s.liveBytes += blockBytes;
  s.servedBytes += blockBytes;
  if (s.liveBytes > s.peakBytes) s.peakBytes = s.liveBytes;
}
