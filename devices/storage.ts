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
import { cpuKernelHost } from "./cpu_kernel_host.ts";

/**
 * A seal ended (`unseal()`, a new `seal()`, `reclaimed()`): the CPU kernels give the memory
 * of their copy of the sealed values back (`CpuKernelHost.sealEnded`).
 */
function endSeal(seal: object | null): void {
  if (seal !== null) cpuKernelHost().sealEnded(seal);
}

/** Where a block goes when its owner is done with it. */
export interface BlockOwner {
  /** Takes the block back (to a pool, or to the device). */
  reclaim(block: MemoryBlock): void;
}

/**
 * Who may write a block, and whether its values are known not to have changed: the one
 * state `MemoryBlock.access` holds. Two things are said in it.
 *
 * - **Read-only** (to builtins): the memory of an executable's constants and of cached
 *   tensors (`NDArray.pin()`), which programs share. In-place builtins refuse it
 *   (`checkWritable`, builtins/validate.ts); the host may still write through `cpuView()`.
 *   It belongs to the block, not to one tensor over it, so every view of the block (a
 *   reshape, a second tensor over its storage) is read-only too.
 * - **Sealed** (by one tensor): nothing has been able to write the values since
 *   `NDArray.seal()` (a weight a tensor cache loads), so the CPU kernels may keep a copy of
 *   them (kernels/cpu/wasm/resident.ts). Every way to write into the block from outside the
 *   library's kernels ends the seal first: `cpuView()`, an in-place builtin.
 *
 * The states, and the `MemoryBlock` methods that move between them (nothing else does):
 *
 * | state            | builtins may write in place | a kept copy is valid |
 * | ---------------- | --------------------------- | -------------------- |
 * | `writable`       | yes                         | no                   |
 * | `sealed`         | yes, ending the seal        | yes, the sealer's    |
 * | `readOnly`       | no                          | no                   |
 * | `readOnlySealed` | no                          | yes, the sealer's    |
 *
 * - `pin()`: `writable` → `readOnly`, `sealed` → `readOnlySealed` (for good, until freed).
 * - `seal(tensor)`: `writable` → `sealed`, `readOnly` → `readOnlySealed`; a sealed block gets
 *   a new seal, for `tensor`.
 * - `unseal()` (a `cpuView()`, an in-place builtin): `sealed` → `writable`,
 *   `readOnlySealed` → `readOnly`; the others stay.
 * - `reclaimed()` (the block goes back to its allocator): any → `writable`.
 *
 * A tensor cache's weights are `readOnlySealed` (loaded sealed, then pinned by the cache);
 * a user's `cpuView()` of one leaves it `readOnly`.
 */
export type BlockAccess = "writable" | "sealed" | "readOnly" | "readOnlySealed";

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
  /** See `BlockAccess`; changed only by the methods below. */
  #access: BlockAccess = "writable";
  /**
   * In the sealed states, the seal: the one tensor it covers (a tensor made later on the
   * same block, by a pool reusing it, is another object, so it is never taken for the
   * sealed one), in a new object per `seal()`, so that what was kept under one seal is
   * never taken for what the next one covers. Null in the others. The tensor is held weakly:
   * a tensor dropped without `dispose()` is freed by the garbage collector's safety net
   * (devices/ndarray.ts), whose held value reaches this block, so a strong reference here
   * would keep a sealed tensor, its block and the kernels' copy alive for good.
   */
  #seal: { readonly tensor: WeakRef<object> } | null = null;

  /** Made by allocators. */
  constructor(device: Device, bytes: number, handle: unknown, owner: BlockOwner) {
    this.device = device;
    this.bytes = bytes;
    this.handle = handle;
    this.owner = owner;
  }

  /** Who may write the block, and whether a copy of it may be kept (`BlockAccess`). */
  get access(): BlockAccess {
    return this.#access;
  }

  /** Whether builtins may not write into the block: `readOnly` or `readOnlySealed`. */
  get readOnly(): boolean {
    return this.#access === "readOnly" || this.#access === "readOnlySealed";
  }

  /** Makes the block read-only to builtins, keeping a seal it has. */
  pin(): void {
    this.#access = this.#seal === null ? "readOnly" : "readOnlySealed";
  }

  /** Seals the block for `tensor` (a new seal, replacing one it had), keeping read-only. */
  seal(tensor: object): void {
    endSeal(this.#seal);
    this.#seal = { tensor: new WeakRef(tensor) };
    this.#access = this.readOnly ? "readOnlySealed" : "sealed";
  }

  /** Ends the seal, if any, before something may write the block; read-only stays. */
  unseal(): void {
    const seal = this.#seal;
    if (seal === null) return;
    this.#seal = null;
    endSeal(seal);
    this.#access = this.#access === "readOnlySealed" ? "readOnly" : "writable";
  }

  /** The seal covering `tensor`, or null when the block is not sealed for it. */
  sealFor(tensor: object): object | null {
    const s = this.#seal;
    return s !== null && s.tensor.deref() === tensor ? s : null;
  }

  /** Back to `writable` as the block returns to its allocator, for whoever gets it next. */
  reclaimed(): void {
    const seal = this.#seal;
    this.#seal = null;
    this.#access = "writable";
    endSeal(seal);
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

  /** Whether builtins may not write into the block (`MemoryBlock.readOnly`, `BlockAccess`). */
  get readOnly(): boolean {
    return this.memory.readOnly;
  }

  /**
   * Gives the block back to the allocator that made it.
   *
   * @ignore
   */
  protected free(): void {
    this.memory.reclaimed();
    this.memory.owner.reclaim(this.memory);
  }

  /** `Storage(1024 bytes, cpu(0))`. */
  override toString(): string {
    return `Storage(${this.nbytes} bytes, ${this.device})`;
  }
}
