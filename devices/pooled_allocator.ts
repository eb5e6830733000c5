/**
 * The pooled allocator: requests are rounded up to a size class and released
 * blocks wait in a free list per class, so a program that runs again finds
 * its blocks ready (seed 001: allocation and reuse matter more than dispatch).
 *
 * Size classes: powers of two up to 1 MiB, then multiples of 1 MiB, so the
 * waste stays under half a block for small tensors and under 1 MiB for big
 * ones.
 *
 * A block is represented by the same `MemoryBlock` object for its whole
 * life, so taking one from the pool allocates nothing, and it keeps the
 * TypedArray view a tensor last made of it (`MemoryBlock.hostView`):
 * creating a view costs more than a small kernel, and the next tensor on the
 * block usually wants the same one. The free lists of the power-of-two
 * classes are an array indexed by the class's exponent, so a small
 * allocation does no hashing.
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

const MIB = 1 << 20;

/** The block size a request of `nbytes` is served with. */
export function sizeClass(nbytes: number): number {
  if (nbytes <= 16) return 16;
  if (nbytes <= MIB) return 2 ** (32 - Math.clz32(nbytes - 1));
  return Math.ceil(nbytes / MIB) * MIB;
}

/** Reuses released blocks of the same size class. */
export class PooledAllocator implements Allocator {
  readonly device: Device;
  /** Free lists of the classes up to 1 MiB, by exponent (16 bytes: 4, 1 MiB: 20). */
  readonly #small: MemoryBlock[][] = Array.from({ length: 21 }, () => []);
  /** Free lists of the classes above 1 MiB, by size. */
  readonly #large = new Map<number, MemoryBlock[]>();
  readonly #maxBytes: number;
  readonly #limit: MemoryLimit | null;
  #stats: MemoryStats = emptyStats();
  #closed = false;

  /**
   * An allocator for `device`, counting the blocks it holds (live and
   * pooled) against `limit` when given.
   */
  constructor(device: Device, limit: MemoryLimit | null = null) {
    this.device = device;
    this.#maxBytes = device.maxAllocationBytes;
    this.#limit = limit;
  }

  #list(blockBytes: number, create: boolean): MemoryBlock[] | undefined {
    if (blockBytes <= MIB) return this.#small[31 - Math.clz32(blockBytes)];
    let list = this.#large.get(blockBytes);
    if (list === undefined && create) {
      list = [];
      this.#large.set(blockBytes, list);
    }
    return list;
  }

  alloc(nbytes: number): Storage {
    return new Storage(this.allocBlock(nbytes), nbytes);
  }

  allocBlock(nbytes: number): MemoryBlock {
    // The common request (a whole number of bytes the device can hold) makes no calls.
    if (!(nbytes >= 0 && nbytes <= this.#maxBytes && Number.isSafeInteger(nbytes))) {
      checkAllocationSize(this.device, nbytes);
    }
    if (nbytes >= LARGE_BLOCK_BYTES) this.#limit?.onLargeBlock?.();
    const blockBytes = sizeClass(nbytes);
    const s = this.#stats;
    const list = this.#list(blockBytes, false);
    let block: MemoryBlock;
    if (list !== undefined && list.length > 0) {
      block = list.pop()!;
      s.poolHits++;
    } else {
      checkAllocationSize(this.device, blockBytes);
      const handle = createLimitedBlock(this.device, this.#limit, blockBytes, nbytes);
      block = new MemoryBlock(this.device, blockBytes, handle, this);
      countNewBlock(s, blockBytes);
    }
    countServed(s, blockBytes);
    return block;
  }

  /**
   * A block of exactly `nbytes` (rounded up to 4) from the device, never
   * from a pool: a weight keeps its block for the model's life, so a size
   * class would only waste memory. Counted like any block; given back to the
   * device when released (`reclaim`: its size is no class).
   */
  allocExactBlock(nbytes: number): MemoryBlock {
    checkAllocationSize(this.device, nbytes);
    const blockBytes = Math.max(4, Math.ceil(nbytes / 4) * 4);
    if (sizeClass(blockBytes) === blockBytes) return this.allocBlock(nbytes);
    if (nbytes >= LARGE_BLOCK_BYTES) this.#limit?.onLargeBlock?.();
    const handle = createLimitedBlock(this.device, this.#limit, blockBytes, nbytes);
    countNewBlock(this.#stats, blockBytes);
    countServed(this.#stats, blockBytes);
    return new MemoryBlock(this.device, blockBytes, handle, this);
  }

  /**
   * Called by the block's owner when it is done with it: the block joins its
   * free list, or goes back to the device if the allocator is closed or the
   * block is not of a size class (`allocExactBlock`).
   */
  reclaim(block: MemoryBlock): void {
    this.#stats.liveBytes -= block.bytes;
    if (this.#closed || sizeClass(block.bytes) !== block.bytes) {
      this.#stats.liveBlocks--;
      this.#limit?.give(block.bytes);
      this.device.destroyBlock(block.handle);
      return;
    }
    this.#list(block.bytes, true)!.push(block);
  }

  stats(): MemoryStats {
    return { ...this.#stats };
  }

  /** Destroys every pooled block. */
  clear(): void {
    for (const list of [...this.#small, ...this.#large.values()]) {
      for (const block of list) {
        this.device.destroyBlock(block.handle);
        this.#stats.liveBlocks--;
        this.#limit?.give(block.bytes);
      }
      list.length = 0;
    }
    this.#large.clear();
  }

  /** Destroys every pooled block, and every block given back from now on. */
  close(): void {
    this.#closed = true;
    this.clear();
  }
}
