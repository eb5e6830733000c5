/**
 * The naive allocator: one new block per request, destroyed on release.
 * The baseline the pooled allocator is measured against.
 *
 * @module
 */

import type { Device } from "./device.ts";
import {
  type Allocator,
  checkAllocationSize,
  countNewBlock,
  countServed,
  createLimitedBlock,
  emptyStats,
  LARGE_BLOCK_BYTES,
  type MemoryLimit,
  type MemoryStats,
} from "./allocator.ts";
import { MemoryBlock, Storage } from "./storage.ts";

/** Allocates a fresh block per request and destroys it when released. */
export class NaiveAllocator implements Allocator {
  readonly device: Device;
  readonly #limit: MemoryLimit | null;
  #stats: MemoryStats = emptyStats();

  /** An allocator for `device`, counting its blocks against `limit` when given. */
  constructor(device: Device, limit: MemoryLimit | null = null) {
    this.device = device;
    this.#limit = limit;
  }

  alloc(nbytes: number): Storage {
    return new Storage(this.allocBlock(nbytes), nbytes);
  }

  allocBlock(nbytes: number): MemoryBlock {
    checkAllocationSize(this.device, nbytes);
    if (nbytes >= LARGE_BLOCK_BYTES) this.#limit?.onLargeBlock?.();
    // Zero-byte tensors still get a distinct (4-byte) block so views stay valid everywhere.
    const blockBytes = Math.max(4, Math.ceil(nbytes / 4) * 4);
    const handle = createLimitedBlock(this.device, this.#limit, blockBytes, nbytes);
    countNewBlock(this.#stats, blockBytes);
    countServed(this.#stats, blockBytes);
    return new MemoryBlock(this.device, blockBytes, handle, this);
  }

  /** Every block is exact here: `allocBlock`. */
  allocExactBlock(nbytes: number): MemoryBlock {
    return this.allocBlock(nbytes);
  }

  /** Called by the block's owner when it is done with it: the block is destroyed. */
  reclaim(block: MemoryBlock): void {
    this.#stats.liveBytes -= block.bytes;
    this.#stats.liveBlocks--;
    this.#limit?.give(block.bytes);
    this.device.destroyBlock(block.handle);
  }

  stats(): MemoryStats {
    return { ...this.#stats };
  }

  clear(): void {}

  close(): void {}
}
