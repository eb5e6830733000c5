/**
 * The pooled allocator: requests are rounded up to a size class and released
 * blocks wait in a free list per class, so a program that runs again finds
 * its blocks ready (seed 001: allocation and reuse matter more than dispatch).
 *
 * Size classes: powers of two up to 1 MiB, then multiples of 1 MiB, so the
 * waste stays under half a block for small tensors and under 1 MiB for big
 * ones.
 *
 * @module
 */

import type { Device } from "./device.ts";
import { type Allocator, checkAllocationSize, emptyStats, type MemoryStats } from "./allocator.ts";
import { Storage } from "./storage.ts";

const MIB = 1 << 20;

/** The block size a request of `nbytes` is served with. */
export function sizeClass(nbytes: number): number {
  if (nbytes <= 16) return 16;
  if (nbytes <= MIB) return 2 ** Math.ceil(Math.log2(nbytes));
  return Math.ceil(nbytes / MIB) * MIB;
}

/** Reuses released blocks of the same size class. */
export class PooledAllocator implements Allocator {
  readonly device: Device;
  #free = new Map<number, unknown[]>();
  #stats: MemoryStats = emptyStats();

  /** An allocator for `device`. */
  constructor(device: Device) {
    this.device = device;
  }

  alloc(nbytes: number): Storage {
    checkAllocationSize(this.device, nbytes);
    const blockBytes = sizeClass(nbytes);
    const s = this.#stats;
    const pooled = this.#free.get(blockBytes)?.pop();
    let block: unknown;
    if (pooled !== undefined) {
      block = pooled;
      s.poolHits++;
    } else {
      checkAllocationSize(this.device, blockBytes);
      block = this.device.createBlock(blockBytes);
      s.poolMisses++;
      s.allocatedBytes += blockBytes;
      s.liveBlocks++;
    }
    s.liveBytes += blockBytes;
    if (s.liveBytes > s.peakBytes) s.peakBytes = s.liveBytes;
    return new Storage(this.device, nbytes, blockBytes, block, this);
  }

  /** Called by a storage whose last reference went: its block joins the free list. */
  reclaim(storage: Storage): void {
    this.#stats.liveBytes -= storage.blockBytes;
    let list = this.#free.get(storage.blockBytes);
    if (list === undefined) {
      list = [];
      this.#free.set(storage.blockBytes, list);
    }
    list.push(storage.block);
  }

  stats(): MemoryStats {
    return { ...this.#stats };
  }

  /** Destroys every pooled block. */
  clear(): void {
    for (const list of this.#free.values()) {
      for (const block of list) {
        this.device.destroyBlock(block);
        this.#stats.liveBlocks--;
      }
    }
    this.#free.clear();
  }
}
