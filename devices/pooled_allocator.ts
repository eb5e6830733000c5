/**
 * The pooled allocator: requests are rounded up to a size class and released
 * blocks wait in a free list per class, so a program that runs again finds
 * its blocks ready (seed 001: allocation and reuse matter more than dispatch).
 *
 * Size classes: powers of two up to 1 MiB, then multiples of 1 MiB, so the
 * waste stays under half a block for small tensors and under 1 MiB for big
 * ones.
 *
 * A pooled block keeps the TypedArray view a tensor last made of it
 * (`Storage.hostView`): creating a view costs more than a small kernel, and
 * the next tensor on the block usually wants the same one. The free lists of
 * the power-of-two classes are an array indexed by the class's exponent, so
 * a small allocation does no hashing.
 *
 * @module
 */

import type { TypedArray } from "../ground/dtype.ts";
import type { Device } from "./device.ts";
import { type Allocator, checkAllocationSize, emptyStats, type MemoryStats } from "./allocator.ts";
import { Storage } from "./storage.ts";

const MIB = 1 << 20;

/** The block size a request of `nbytes` is served with. */
export function sizeClass(nbytes: number): number {
  if (nbytes <= 16) return 16;
  if (nbytes <= MIB) return 2 ** (32 - Math.clz32(nbytes - 1));
  return Math.ceil(nbytes / MIB) * MIB;
}

/**
 * Released blocks of one size class, each with the view it had or null.
 * (Null, not undefined: V8 pushes and pops `undefined` in an array about
 * five times slower than an object or null.)
 */
class FreeList {
  readonly blocks: unknown[] = [];
  readonly views: (TypedArray | null)[] = [];
}

/** Reuses released blocks of the same size class. */
export class PooledAllocator implements Allocator {
  readonly device: Device;
  /** Free lists of the classes up to 1 MiB, by exponent (16 bytes: 4, 1 MiB: 20). */
  readonly #small: FreeList[] = Array.from({ length: 21 }, () => new FreeList());
  /** Free lists of the classes above 1 MiB, by size. */
  readonly #large = new Map<number, FreeList>();
  readonly #maxBytes: number;
  #stats: MemoryStats = emptyStats();

  /** An allocator for `device`. */
  constructor(device: Device) {
    this.device = device;
    this.#maxBytes = device.maxAllocationBytes;
  }

  #list(blockBytes: number, create: boolean): FreeList | undefined {
    if (blockBytes <= MIB) return this.#small[31 - Math.clz32(blockBytes)];
    let list = this.#large.get(blockBytes);
    if (list === undefined && create) {
      list = new FreeList();
      this.#large.set(blockBytes, list);
    }
    return list;
  }

  alloc(nbytes: number): Storage {
    // The common request (a whole number of bytes the device can hold) takes no calls.
    if (!(nbytes >= 0 && nbytes <= this.#maxBytes && Number.isSafeInteger(nbytes))) {
      checkAllocationSize(this.device, nbytes);
    }
    const blockBytes = sizeClass(nbytes);
    const s = this.#stats;
    const list = this.#list(blockBytes, false);
    let block: unknown, view: TypedArray | null = null;
    if (list !== undefined && list.blocks.length > 0) {
      block = list.blocks.pop();
      view = list.views.pop()!;
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
    return new Storage(this.device, nbytes, blockBytes, block, this, view);
  }

  /** Called by a storage whose last reference went: its block joins the free list. */
  reclaim(storage: Storage): void {
    this.#stats.liveBytes -= storage.blockBytes;
    const list = this.#list(storage.blockBytes, true)!;
    list.blocks.push(storage.block);
    list.views.push(storage.hostView);
  }

  stats(): MemoryStats {
    return { ...this.#stats };
  }

  /** Destroys every pooled block. */
  clear(): void {
    for (const list of [...this.#small, ...this.#large.values()]) {
      for (const block of list.blocks) {
        this.device.destroyBlock(block);
        this.#stats.liveBlocks--;
      }
      list.blocks.length = 0;
      list.views.length = 0;
    }
    this.#large.clear();
  }
}
