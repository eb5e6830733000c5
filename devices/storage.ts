/**
 * `Storage`: one block of device memory, a `VMObject` (ground/object.ts). Tensors are views into a storage and each holds one
 * reference; when the last reference goes, the block goes back to the
 * allocator that made it, at that moment rather than when the garbage
 * collector runs.
 *
 * @module
 */

import { VMObject } from "../ground/object.ts";
import type { TypedArray } from "../ground/dtype.ts";
import type { Device } from "./device.ts";

/** Where a storage goes when its last reference is released. */
export interface StorageOwner {
  /** Takes the block back (to a pool, or to the device). */
  reclaim(storage: Storage): void;
}

/** A block of device memory, shared by the tensors that view it. */
export class Storage extends VMObject {
  /** The device the block lives on. */
  readonly device: Device;
  /** Usable size in bytes (what was asked for). */
  readonly nbytes: number;
  /** Size of the underlying block (a pool may round up). */
  readonly blockBytes: number;
  /** The raw block: an ArrayBuffer on the CPU, a GPUBuffer on WebGPU. */
  readonly block: unknown;
  /**
   * A TypedArray view of a CPU block from offset 0, made by
   * `NDArray.cpuView()` and kept so that the next tensor viewing the block
   * the same way reuses it; a pooled allocator keeps it with the block.
   * @internal
   */
  hostView: TypedArray | null;
  readonly #owner: StorageOwner;

  /** Made by allocators; `hostView` is a view the block already had. */
  constructor(
    device: Device,
    nbytes: number,
    blockBytes: number,
    block: unknown,
    owner: StorageOwner,
    hostView: TypedArray | null = null,
  ) {
    super();
    this.device = device;
    this.nbytes = nbytes;
    this.blockBytes = blockBytes;
    this.block = block;
    this.#owner = owner;
    this.hostView = hostView;
  }

  /** Gives the block back to the allocator that made it. */
  protected free(): void {
    this.#owner.reclaim(this);
  }

  /** `Storage(1024 bytes, cpu(0))`. */
  override toString(): string {
    return `Storage(${this.nbytes} bytes, ${this.device})`;
  }
}
