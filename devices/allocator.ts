/**
 * The allocator contract and its counters. Every tensor the VM or a builtin
 * creates gets its storage from an `Allocator`, so `memory_stats()` sees all
 * of it.
 *
 * @module
 */

import type { Device } from "./device.ts";
import type { MemoryBlock, Storage } from "./storage.ts";

/** Counters reported by `VirtualMachine.memory_stats()`. */
export interface MemoryStats {
  /** Bytes held by live storages right now. */
  liveBytes: number;
  /** The most `liveBytes` has been. */
  peakBytes: number;
  /** Bytes of blocks obtained from the device, in total (pool reuse not counted). */
  allocatedBytes: number;
  /** Allocations served from the pool. */
  poolHits: number;
  /** Allocations that had to create a new block. */
  poolMisses: number;
  /** Raw blocks currently held from the device (live plus pooled). */
  liveBlocks: number;
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
  /** The counters so far. */
  stats(): MemoryStats;
  /** Gives every pooled block back to the device. */
  clear(): void;
}

/** A fresh set of counters. */
export function emptyStats(): MemoryStats {
  return {
    liveBytes: 0,
    peakBytes: 0,
    allocatedBytes: 0,
    poolHits: 0,
    poolMisses: 0,
    liveBlocks: 0,
  };
}

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
