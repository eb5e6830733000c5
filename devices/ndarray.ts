/**
 * `NDArray`: an n-dimensional tensor viewing a block of device memory.
 *
 * Lifetime: an NDArray is a `VMObject` (ground/object.ts). A tensor made
 * by a builtin starts floating; registers, tuples, closures and the constant
 * pool hold it. A tensor made by `tensor()` or handed out by the VM carries
 * one reference for the user, dropped by `dispose()` (or `using`). Freeing a
 * tensor gives its memory back: at once when it owns its block, or as one
 * reference to the `Storage` it shares with other views, whose last
 * reference returns the block.
 *
 * Ownership: a tensor made by `NDArray.empty` owns its `MemoryBlock`
 * directly and makes a `Storage` for it only when something asks for one
 * (`storage`: a second view of the block, a GPU kernel binding the buffer,
 * the garbage-collection safety net). A tensor made as a view of a storage
 * (`new NDArray(storage, …)`) holds a reference to that storage.
 *
 * Garbage-collection safety net: a tensor the user drops without
 * `dispose()` still gives its memory back when it is collected, through a
 * `FinalizationRegistry`. Registering costs about as much as a small kernel
 * (register plus unregister ≈ 100 ns), so a tensor registers only once it
 * can be dropped that way: when it is made outside a running VM, handed to
 * the user, or held by a tuple, a closure or a saved argument
 * (`heldBeyondFrames`). A tensor that only ever sits in frame registers is
 * always released by the protocol and never registers.
 *
 * These choices come from profiles of the 200-op chain of
 * bench/small_ops_bench.ts (4-element operands, where everything but the
 * arithmetic is overhead): per op, registering cost ~100 ns, freezing a copy
 * of the shape ~70 ns, a Storage object plus its reference counting ~25 ns
 * (more with the garbage it leaves), each TypedArray view ~25 ns. So the
 * shape array is shared when the caller vouches it is frozen, the Storage is
 * lazy, and `cpuView()` reuses a view cached on the tensor, or the one the
 * block kept from its previous tensor.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../ground/brand.ts";
import { VMObject } from "../ground/object.ts";
import { formatNested, INSPECT } from "../ground/inspect.ts";
import { cpu } from "./cpu_device.ts";
import type { Device } from "./device.ts";
import {
  elementBytes,
  elementReader,
  type TensorDType,
  TYPED_ARRAYS,
  type TypedArray,
  valuesOf,
} from "../ground/dtype.ts";
import { allocatorsActive, currentAllocator } from "./allocation_context.ts";
import { type MemoryBlock, Storage } from "./storage.ts";

/** Releases the storage reference of tensors collected without having been freed. */
const collected = new FinalizationRegistry<Storage>((storage) => storage.release());

/** Number of elements of a shape. */
export function shapeSize(shape: readonly number[]): number {
  let n = 1;
  for (let i = 0; i < shape.length; i++) n *= shape[i];
  return n;
}

/**
 * The number of elements of `shape` when it is at most `max` (a safe
 * integer), else -1. Multiplied step by step against `max`, so dimensions
 * read from a file (each up to 2^53) never make an inexact or infinite count:
 * what a loader compares with the bytes the file has left.
 */
export function shapeSizeWithin(shape: readonly number[], max: number): number {
  if (shape.includes(0)) return 0;
  let n = 1;
  for (const d of shape) {
    n *= d;
    if (n > max) return -1;
  }
  return n;
}

const NDARRAY_BRAND = brandKey("NDArray");

/**
 * A tensor. Make one with `tensor()`; read it with `await data()`.
 *
 * @example
 * ```ts
 * import { tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * using t = tensor([[1, 2], [3, 4]]);
 * assertEquals(t.shape, [2, 2]);
 * assertEquals(t.dtype, "float32");
 * assertEquals([...await t.data()], [1, 2, 3, 4]);
 * ```
 */
export class NDArray extends VMObject {
  static {
    brand(this, NDARRAY_BRAND);
  }

  /**
   * True for a `NDArray` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is NDArray {
    return typeof v === "object" && v !== null && (v as Branded)[NDARRAY_BRAND] === true;
  }

  /** Dimensions, outermost first. */
  readonly shape: readonly number[];
  /** Element type, e.g. `"float32"`. */
  readonly dtype: TensorDType;
  /**
   * Where the view starts in its block, in bytes.
   *
   * @ignore
   */
  readonly byteOffset: number;
  /** Number of elements. */
  readonly size: number;

  /** The block this tensor views. */
  readonly #memory: MemoryBlock;
  /** The storage this tensor holds a reference to; null while it owns `#memory` alone. */
  #storage: Storage | null;
  /** The TypedArray view `cpuView()` made, kept for the next call. */
  #view: TypedArray | undefined = undefined;
  /** Registered with the garbage-collection safety net. */
  #collectable = false;

  /**
   * Makes a tensor viewing `source`; use `tensor()` or `NDArray.empty()`
   * instead. A `Storage` is shared: the tensor holds a reference to it. A
   * `MemoryBlock` (fresh from an allocator, `byteOffset` 0) becomes the
   * tensor's own. `shape` is copied, unless the caller passes `size`: then
   * it vouches that `shape` is frozen (another tensor's shape, a cached
   * plan's) and has `size` elements, and the array is shared.
   *
   * @ignore
   */
  constructor(
    source: Storage | MemoryBlock,
    byteOffset: number,
    shape: readonly number[],
    dtype: TensorDType,
    size?: number,
  ) {
    super();
    if (source instanceof Storage) {
      source.retain();
      this.#storage = source;
      this.#memory = source.memory;
    } else {
      this.#storage = null;
      this.#memory = source;
    }
    this.byteOffset = byteOffset;
    if (size === undefined) {
      this.shape = Object.freeze(shape.slice());
      this.size = shapeSize(shape);
    } else {
      this.shape = shape;
      this.size = size;
    }
    this.dtype = dtype;
    // Outside a VM nothing but the caller can hold it.
    if (!allocatorsActive()) this.heldBeyondFrames();
  }

  /**
   * A new tensor of `shape` and `dtype` on `device` (default `cpu()`), with
   * zeroed or leftover contents: write every element before reading. This
   * is how a packed function allocates its result. Inside a running VM the
   * memory comes from that VM's allocator (pooled, and counted in its
   * `memory_stats()`); outside, from the device's default allocator.
   *
   * The tensor is *floating*: nobody holds it yet. Returned from a packed
   * function, the VM takes it and frees it after its last use; a temporary
   * is freed by `dispose()` (or `using`); one dropped outside a VM is freed
   * by the garbage collector at the latest. On the CPU, fill it through
   * `cpuView()`.
   *
   * Ownership rule for packed functions: a result the function creates is
   * floating (make it with `NDArray.empty`) and the VM takes it. `tensor()`
   * makes a tensor the caller owns: right for a value the function keeps
   * across calls, wrong for a result, which would then stay live until
   * the garbage collector finds it. Arguments are lent for the call: read
   * them or return them, never dispose them.
   *
   * @example A packed function that allocates its result
   * ```ts
   * import { ExecBuilder, NDArray, registerFunc, tensor, VirtualMachine } from "@relaxvm/relaxvm";
   * import { assertEquals } from "@std/assert";
   *
   * registerFunc("doc.example.square", (x: NDArray) => {
   *   const out = NDArray.empty(x.shape, "float32", x.device); // floating: the VM takes it
   *   const src = x.cpuView() as Float32Array, dst = out.cpuView() as Float32Array;
   *   for (let i = 0; i < dst.length; i++) dst[i] = src[i] * src[i];
   *   return out;
   * }, { override: true });
   *
   * const ib = new ExecBuilder();
   * ib.function("main", { num_inputs: 1 }, () => {
   *   ib.emit_call("doc.example.square", [ib.r(0)], { dst: ib.r(1) });
   *   ib.emit_ret(ib.r(1));
   * });
   * const vm = new VirtualMachine(ib.get());
   * using x = tensor([1, 2, 3]);
   * {
   *   using y = await vm.invoke("main", x) as NDArray;
   *   assertEquals([...y.dataSync()], [1, 4, 9]);
   * }
   * assertEquals(vm.memory_stats().liveBytes, 0); // nothing left behind
   * ```
   */
  static empty(shape: readonly number[], dtype: TensorDType, device: Device = cpu()): NDArray {
    if (!Array.isArray(shape)) {
      throw new TypeError(`NDArray.empty: shape must be an array of integers, got ${typeof shape}`);
    }
    for (const d of shape) {
      if (!Number.isSafeInteger(d) || d < 0) {
        throw new RangeError(`Invalid tensor shape [${shape.join(", ")}]`);
      }
    }
    if (!Object.hasOwn(TYPED_ARRAYS, dtype)) {
      throw new TypeError(`NDArray.empty: unknown dtype ${JSON.stringify(dtype)}`);
    }
    const nbytes = shapeSize(shape) * elementBytes(dtype);
    return new NDArray(currentAllocator(device).allocBlock(nbytes), 0, shape, dtype);
  }

  /**
   * `empty` for callers that already checked the shape: `shape` is frozen
   * (an input's shape, a cached plan's) and has `size` elements. The
   * operators' output path.
   *
   * @ignore
   */
  static emptyChecked(
    shape: readonly number[],
    size: number,
    dtype: TensorDType,
    device: Device,
  ): NDArray {
    const memory = currentAllocator(device).allocBlock(size * elementBytes(dtype));
    return new NDArray(memory, 0, shape, dtype, size);
  }

  /**
   * The storage this tensor views, made now if the tensor owned its block
   * alone (the tensor then holds the storage's first reference). Throws
   * once the tensor is released.
   *
   * @ignore
   */
  get storage(): Storage {
    if (this.#storage === null) {
      if (super.disposed) throw this.usedAfterFree();
      this.#storage = new Storage(this.#memory, this.size * elementBytes(this.dtype)).retain();
    }
    return this.#storage;
  }

  /**
   * The raw block this tensor views (an `ArrayBuffer`, a `GPUBuffer`), read
   * without making a storage: what kernels bind. Throws once the tensor is
   * released.
   *
   * @ignore
   */
  get block(): unknown {
    if (this.disposed) throw this.usedAfterFree();
    return this.#memory.handle;
  }

  /**
   * Pins the tensor (`kill()` refuses it) and makes its memory read-only for
   * builtins: the block, so every view of it, this one's reshapes included
   * (see `BlockAccess`). What the constants of an executable and
   * the tensors of a tensor cache get: programs share them.
   *
   * @ignore
   */
  override pin(): this {
    super.pin();
    this.#memory.pin();
    return this;
  }

  /**
   * Whether builtins may not write into this tensor's memory: it is, or views, a constant of an
   * executable or a cached tensor (`pin()`).
   */
  get readOnly(): boolean {
    return this.#memory.readOnly;
  }

  /** The device holding the data. */
  get device(): Device {
    return this.#memory.device;
  }

  /** Size of the data in bytes. */
  get nbytes(): number {
    return this.size * elementBytes(this.dtype);
  }

  /**
   * The user becomes a holder (once); returns this tensor.
   *
   * @ignore
   */
  override handToUser(): this {
    super.handToUser();
    return this;
  }

  /**
   * Joins the garbage-collection safety net (once).
   *
   * @ignore
   */
  override heldBeyondFrames(): void {
    if (this.#collectable) return;
    this.#collectable = true;
    // A tensor that is dropped without dispose() still gives its storage back
    // when the garbage collector finds it: later than dispose(), but never never.
    collected.register(this, this.storage, this);
  }

  /** True once the memory has been released; any further use throws. */
  override get disposed(): boolean {
    return super.disposed || (this.#storage !== null && this.#storage.disposed);
  }

  /**
   * The elements as a TypedArray view of the tensor's memory, without
   * copying (CPU tensors only; others throw a `TypeError`): writes change
   * the tensor. What kernels and packed functions read and write. The view
   * is valid until the tensor is freed; do not keep it beyond that.
   *
   * Elements are stored as `dtype` says: a `BigInt64Array` for int64, a
   * `Uint8Array` of 0/1 for bool, a `Uint16Array` of raw bits for bfloat16
   * (and for float16 where the runtime has no `Float16Array`). `dataSync()`
   * and `data()` return copies of the values instead.
   *
   * @example Fill a tensor in place
   * ```ts
   * import { NDArray } from "@relaxvm/relaxvm";
   * import { assertEquals } from "@std/assert";
   *
   * using t = NDArray.empty([2, 2], "int32");
   * (t.cpuView() as Int32Array).set([1, 2, 3, 4]);
   * assertEquals([...t.dataSync()], [1, 2, 3, 4]);
   * ```
   */
  cpuView(): TypedArray {
    // Whoever gets a view may write through it, now or later: a sealed tensor is sealed no more.
    this.#memory.unseal();
    const view = this.#view;
    if (view !== undefined && !this.disposed) return view;
    return this.#makeView();
  }

  /**
   * `cpuView()` for a kernel that only reads the tensor and keeps no view:
   * leaves the tensor sealed (`seal()`), so a weight's copy in the CPU
   * kernels' memory stays usable.
   *
   * @ignore
   */
  readView(): TypedArray {
    const view = this.#view;
    if (view !== undefined && !this.disposed) return view;
    return this.#makeView();
  }

  /**
   * Marks the values as unchanging until someone can write them (a
   * `cpuView()`, an in-place builtin): what the library does for the CPU
   * tensors a tensor cache loads. Only for a tensor no one holds a view of
   * (a view got before the seal could write after it). The CPU kernels may then keep a copy of
   * the tensor in their WebAssembly memory (kernels/cpu/wasm/resident.ts).
   * CPU tensors only; elsewhere it does nothing.
   *
   * @ignore
   */
  seal(): this {
    if (this.device.kind === "cpu" && !this.disposed) this.#memory.seal(this);
    return this;
  }

  /**
   * Whether the tensor is sealed (`seal()`) and nothing has been able to write it since.
   *
   * @ignore
   */
  get sealed(): boolean {
    return this.sealToken !== null;
  }

  /**
   * The current seal (one object per `seal()`, what a kept copy is keyed by),
   * or null when the tensor is not sealed.
   *
   * @ignore
   */
  get sealToken(): object | null {
    return this.disposed ? null : this.#memory.sealFor(this);
  }

  /**
   * Ends the seal before an in-place write (`checkWritable`, builtins/validate.ts).
   *
   * @ignore
   */
  unseal(): void {
    this.#memory.unseal();
  }

  #makeView(): TypedArray {
    this.#assertLive();
    if (this.device.kind !== "cpu") {
      throw new TypeError(`Tensor is on ${this.device}, not on the CPU`);
    }
    const Ctor = TYPED_ARRAYS[this.dtype];
    const memory = this.#memory;
    let view = memory.hostView;
    if (
      view === null || view.constructor !== Ctor || view.byteOffset !== this.byteOffset ||
      view.length !== this.size
    ) {
      view = new Ctor(memory.handle as ArrayBuffer, this.byteOffset, this.size);
      if (this.byteOffset === 0) memory.hostView = view;
    }
    this.#view = view;
    return view;
  }

  /** A copy of the elements (CPU tensors only; use `await data()` for any device). */
  dataSync(): TypedArray {
    if (this.device.kind !== "cpu" && !this.disposed) {
      throw new TypeError(
        `dataSync: ${this} is on ${this.device}, whose memory cannot be read synchronously; use \`await t.data()\` (or copy it to the CPU first)`,
      );
    }
    const view = this.readView(); // a copy: the tensor stays sealed
    const values = valuesOf(this.dtype, view);
    return values === view ? view.slice() : values;
  }

  /**
   * A copy of the elements, from any device (waits for queued GPU work): a
   * TypedArray of the dtype — `BigInt64Array` for int64, `Float16Array` for
   * float16 (a `Float32Array` where the runtime has none), a `Float32Array`
   * of the values for bfloat16. A copy that widens (bfloat16 to float32) is
   * at most 2^30 elements (4 GiB): beyond, a `RangeError` names the size,
   * and `cpuView()` reads the raw bits.
   */
  async data(): Promise<TypedArray> {
    this.#assertLive();
    if (this.device.kind === "cpu") return this.dataSync();
    const bytes = await this.device.readBlock(this.#memory.handle, this.byteOffset, this.nbytes);
    const Ctor = TYPED_ARRAYS[this.dtype];
    return valuesOf(this.dtype, new Ctor(bytes.buffer as ArrayBuffer, bytes.byteOffset, this.size));
  }

  /** A copy of this tensor on `device`, owned by the caller. */
  async copyTo(device: Device): Promise<NDArray> {
    return (await this.copyToFloating(device)).handToUser();
  }

  /**
   * The copy behind `copyTo` and `vm.builtin.to_device`: no user reference.
   * Device-to-device work is queued in order; only GPU→CPU waits.
   *
   * @ignore
   */
  async copyToFloating(device: Device): Promise<NDArray> {
    this.#assertLive();
    const out = NDArray.empty(this.shape, this.dtype, device);
    const from = this.#memory.handle, to = out.#memory.handle;
    if (device === this.device) {
      device.copyBlock(from, this.byteOffset, to, 0, this.nbytes);
    } else if (this.device.kind === "cpu") {
      device.writeBlock(to, 0, new Uint8Array(from as ArrayBuffer, this.byteOffset, this.nbytes));
    } else {
      const bytes = await this.device.readBlock(from, this.byteOffset, this.nbytes);
      device.writeBlock(to, 0, bytes);
    }
    return out;
  }

  /** `NDArray(float32, [2, 2], cpu(0))`. */
  override toString(): string {
    return `NDArray(${this.dtype}, [${this.shape.join(", ")}], ${this.device})`;
  }

  /**
   * Shown by `console.log` and `deno repl`: dtype, shape and device, then on
   * the CPU the values nested like NumPy prints them,
   * `NDArray(float32, [2, 3], cpu(0)) [[1, 2, 3], [4, 5, 6]]`, with the
   * middle of every long axis elided (`...`) beyond 1000 elements, and at
   * most 2000 elements shown (only those are read).
   *
   * @example
   * ```ts
   * import { tensor } from "@relaxvm/relaxvm";
   *
   * using t = tensor([[1, 2, 3], [4, 5, 6]]);
   * console.log(t); // NDArray(float32, [2, 3], cpu(0)) [[1, 2, 3], [4, 5, 6]]
   * ```
   */
  override [INSPECT](): string {
    const head = this.toString();
    if (this.disposed) return `${head} <released>`;
    if (this.device.kind !== "cpu") return `${head} <on ${this.device}: await data() to read>`;
    // Reads only the elements shown: printing a tensor of 2^27 costs what printing 2000 does.
    const read = elementReader(this.dtype, this.readView());
    const at = this.dtype === "bool" ? (i: number) => read(i) !== 0 : read;
    const text = formatNested(at, this.shape, { width: 80 - head.length - 1 });
    return text.includes("\n") ? `${head}\n${text}` : `${head} ${text}`;
  }

  #assertLive(): void {
    if (this.disposed) throw this.usedAfterFree();
  }

  /**
   * Gives the memory back: an owned block to its allocator now, or the
   * storage reference (the block returns with the storage's last one).
   *
   * @ignore
   */
  protected free(): void {
    if (this.#collectable) collected.unregister(this);
    this.#view = undefined;
    if (this.#storage !== null) this.#storage.release();
    else {
      this.#memory.reclaimed();
      this.#memory.owner.reclaim(this.#memory);
    }
  }
}
