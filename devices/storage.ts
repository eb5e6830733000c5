/**
 * Device memory as tensors hold it.
 *
 * - A `MemoryBlock` is one raw block from an allocator (an `ArrayBuffer`, a
 *   `GPUBuffer`) together with what travels with it: its size class, the
 *   allocator it goes back to, and the TypedArray view last made of it. It
 *   is plain data, not reference-counted: exactly one owner holds it at a
 *   time and gives it back with `block.owner.reclaim(block)`. A pooled
 *   allocator keeps the same `MemoryBlock` object for the block's whole life,
 *   so taking a block from the pool allocates nothing.
 * - A `Storage` is a `VMObject` (ground/object.ts) that owns one block and
 *   counts the tensors (and other holders) that share it; when the last
 *   reference goes, the block goes back to its allocator, at that moment
 *   rather than when the garbage collector runs.
 *
 * A tensor made by `NDArray.empty` owns its block directly and makes its
 * `Storage` only when something asks for one (a second view, a GPU kernel
 * binding the buffer, the garbage-collection safety net): most tensors of a
 * program of small ops never need one, and making one per tensor cost about
 * a fifth of each op of the 200-op chain in bench/small_ops_bench.ts (CPU
 * time per op ~178 → ~145 ns without it; see devices/ndarray.ts).
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../ground/brand.ts";
import { VMObject } from "../ground/object.ts";
import type { TypedArray } from "../ground/dtype.ts";
import type { Device } from "./device.ts";

/** Where a block goes when its owner is done with it. */
export interface BlockOwner {
  /** Takes the block back (to a pool, or to the device). */
  reclaim(block: MemoryBlock): void;
}

/**
 * One raw block of device memory and what travels with it.
 *
 * @ignore
 */
export class MemoryBlock {
  /** The device the block lives on. */
  readonly device: Device;
  /** Size of the block in bytes (a pool rounds requests up to a size class). */
  readonly bytes: number;
  /** The raw block: an ArrayBuffer on the CPU, a GPUBuffer on WebGPU. */
  readonly handle: unknown;
  /** The allocator that made the block and takes it back. */
  readonly owner: BlockOwner;
  /**
   * A TypedArray view of a CPU block from offset 0, made by
   * `NDArray.cpuView()` and kept so that the next tensor viewing the block
   * the same way reuses it (creating a view costs more than a small kernel).
   * Null when there is none.
   */
  hostView: TypedArray | null = null;
  /**
   * Whether builtins may write into the block: false for the memory of an
   * executable's constants and of cached tensors (`NDArray.pin()`), which
   * programs share. It belongs to the block, not to one tensor over it, so
   * every view of it (a reshape, a second tensor over its storage) is
   * read-only too. Cleared when the block goes back to its allocator.
   */
  readOnly = false;
  /**
   * The one tensor whose values are known not to change while this is set
   * (`NDArray.seal()`: a weight loaded from a tensor cache), so that the CPU
   * kernels may keep a copy of them (kernels/cpu/wasm/resident.ts). Every
   * way to write into the block from outside the library's kernels clears it
   * first: `cpuView()`, an in-place builtin (`checkWritable`). A tensor made
   * later on the same block (a pool reusing it) is another object, so it is
   * never taken for the sealed one. A new object per `seal()`, so that what
   * was kept under one seal is never taken for what the next one covers.
   */
  sealedBy: { readonly tensor: object } | null = null;

  /** Made by allocators. */
  constructor(device: Device, bytes: number, handle: unknown, owner: BlockOwner) {
    this.device = device;
    this.bytes = bytes;
    this.handle = handle;
    this.owner = owner;
  }
}

const STORAGE_BRAND = brandKey("Storage");

/** A block of device memory, shared by the tensors that view it. */
export class Storage extends VMObject {
  static {
    brand(this, STORAGE_BRAND);
  }

  /**
   * True for a `Storage` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is Storage {
    return typeof v === "object" && v !== null && (v as Branded)[STORAGE_BRAND] === true;
  }

  /** Usable size in bytes (what was asked for). */
  readonly nbytes: number;
  /**
   * The block, owned by this storage until its last reference goes.
   *
   * @ignore
   */
  readonly memory: MemoryBlock;

  /**
   * Made by allocators and by tensors that owned `memory` until now.
   *
   * @ignore
   */
  constructor(memory: MemoryBlock, nbytes: number) {
    super();
    this.memory = memory;
    this.nbytes = nbytes;
  }

  /** The device the block lives on. */
  get device(): Device {
    return this.memory.device;
  }

  /** Size of the underlying block (a pool may round up). */
  get blockBytes(): number {
    return this.memory.bytes;
  }

  /** The raw block: an ArrayBuffer on the CPU, a GPUBuffer on WebGPU. */
  get block(): unknown {
    return this.memory.handle;
  }

  /** Whether builtins may not write into the block (`MemoryBlock.readOnly`). */
  get readOnly(): boolean {
    return this.memory.readOnly;
  }

  /**
   * Gives the block back to the allocator that made it.
   *
   * @ignore
   */
  protected free(): void {
    this.memory.readOnly = false;
    this.memory.owner.reclaim(this.memory);
  }

  /** `Storage(1024 bytes, cpu(0))`. */
  override toString(): string {
    return `Storage(${this.nbytes} bytes, ${this.device})`;
  }
}
