/**
 * `Storage`: one block of device memory with a reference count (seed 004's
 * object protocol). Tensors are views into a storage and each holds one
 * reference; when the last reference goes, the block goes back to the
 * allocator that made it, at that moment rather than when the garbage
 * collector runs.
 *
 * @module
 */

import type { Device } from "./device.ts";

/** Where a storage goes when its last reference is released. */
export interface StorageOwner {
  /** Takes the block back (to a pool, or to the device). */
  reclaim(storage: Storage): void;
}

/** A block of device memory, shared by the tensors that view it. */
export class Storage {
  /** The device the block lives on. */
  readonly device: Device;
  /** Usable size in bytes (what was asked for). */
  readonly nbytes: number;
  /** Size of the underlying block (a pool may round up). */
  readonly blockBytes: number;
  /** The raw block: an ArrayBuffer on the CPU, a GPUBuffer on WebGPU. */
  readonly block: unknown;
  #refs = 0;
  #owner: StorageOwner;

  /** Made by allocators. */
  constructor(
    device: Device,
    nbytes: number,
    blockBytes: number,
    block: unknown,
    owner: StorageOwner,
  ) {
    this.device = device;
    this.nbytes = nbytes;
    this.blockBytes = blockBytes;
    this.block = block;
    this.#owner = owner;
  }

  /** Current number of references. */
  get refCount(): number {
    return this.#refs;
  }

  /** True once the block has been given back. */
  get released(): boolean {
    return this.#refs < 0;
  }

  /** Adds a reference. */
  retain(): void {
    if (this.#refs < 0) throw new Error("Storage used after it was released");
    this.#refs++;
  }

  /** Drops a reference; the last one gives the block back. */
  release(): void {
    if (this.#refs <= 0) return;
    if (--this.#refs === 0) this.kill();
  }

  /** Drops a reference without giving the block back (back to floating). */
  disown(): void {
    if (this.#refs > 0) this.#refs--;
  }

  /** Gives the block back if nothing holds the storage (a discarded result). */
  releaseIfUnowned(): void {
    if (this.#refs === 0) this.kill();
  }

  /**
   * Gives the block back now, whoever still holds the storage
   * (`vm.builtin.kill`); views used afterwards throw.
   */
  kill(): void {
    if (this.#refs < 0) return;
    this.#refs = -1;
    this.#owner.reclaim(this);
  }
}
