/**
 * The naive allocator: one new block per request, destroyed on release.
 * The baseline the pooled allocator is measured against.
 *
 * @module
 */

import type { Device } from "./device.ts";
import { type Allocator, checkAllocationSize, emptyStats, type MemoryStats } from "./allocator.ts";
import { MemoryBlock, Storage } from "./storage.ts";

/** Allocates a fresh block per request and destroys it when released. */
export class NaiveAllocator implements Allocator {
  readonly device: Device;
  #stats: MemoryStats = emptyStats();

  /** An allocator for `device`. */
  constructor(device: Device) {
    this.device = device;
  }

  alloc(nbytes: number): Storage {
    return new Storage(this.allocBlock(nbytes), nbytes);
  }

  allocBlock(nbytes: number): MemoryBlock {
    checkAllocationSize(this.device, nbytes);
    // Zero-byte tensors still get a distinct (4-byte) block so views stay valid everywhere.
    const blockBytes = Math.max(4, Math.ceil(nbytes / 4) * 4);
    const handle = this.device.createBlock(blockBytes);
    const s = this.#stats;
    s.poolMisses++;
    s.allocatedBytes += blockBytes;
    s.liveBytes += blockBytes;
    s.liveBlocks++;
    if (s.liveBytes > s.peakBytes) s.peakBytes = s.liveBytes;
    return new MemoryBlock(this.device, blockBytes, handle, this);
  }

  /** Called by the block's owner when it is done with it: the block is destroyed. */
  reclaim(block: MemoryBlock): void {
    this.#stats.liveBytes -= block.bytes;
    this.#stats.liveBlocks--;
    this.device.destroyBlock(block.handle);
  }

  stats(): MemoryStats {
    return { ...this.#stats };
  }

  clear(): void {}
}
