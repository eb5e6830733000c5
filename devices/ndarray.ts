/**
 * `NDArray`: an n-dimensional tensor viewing a `Storage` on some device.
 *
 * Lifetime (seed 004). An NDArray counts its references. A tensor made by a
 * builtin starts with none ("floating"); each register, tuple, closure or
 * constant pool slot that holds it adds one. A tensor made by `tensor()` or
 * handed out by the VM carries one reference for the user, dropped by
 * `dispose()` (or `using`). When the count returns to zero the tensor gives
 * its storage reference back, and the memory returns to its allocator then.
 *
 * This file is browser-safe: no `Deno.*`.
 *
 * @module
 */

import { cpu, type Device } from "./device.ts";
import {
  type DataType,
  elementBytes,
  type TensorDType,
  tensorDType,
  TYPED_ARRAYS,
  type TypedArray,
} from "../ground/dtype.ts";
import { currentAllocator } from "./allocation_context.ts";
import type { Storage } from "./storage.ts";

/** Releases the storage reference of tensors collected without having been freed. */
const collected = new FinalizationRegistry<Storage>((storage) => storage.release());

/** Number of elements of a shape. */
export function shapeSize(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

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
export class NDArray {
  /** Dimensions, outermost first. */
  readonly shape: readonly number[];
  /** Element type, e.g. `"float32"`. */
  readonly dtype: TensorDType;
  /** The memory this tensor views. @internal */
  readonly storage: Storage;
  /** Where the view starts in the storage, in bytes. @internal */
  readonly byteOffset: number;
  /** Number of elements. */
  readonly size: number;
  #refs = 0;
  #freed = false;
  #userHeld = false;

  /** Makes a view of `storage`; use `tensor()` or `NDArray.empty()` instead. @internal */
  constructor(storage: Storage, byteOffset: number, shape: readonly number[], dtype: TensorDType) {
    this.storage = storage;
    this.byteOffset = byteOffset;
    this.shape = Object.freeze([...shape]);
    this.dtype = dtype;
    this.size = shapeSize(shape);
    storage.retain();
    // A tensor that is dropped without dispose() still gives its storage back
    // when the garbage collector finds it: later than dispose(), but never never.
    collected.register(this, storage, this);
  }

  /**
   * A new tensor with uninitialized contents on `device`, from the active
   * allocator (the running VM's, or the device default). @internal
   */
  static empty(shape: readonly number[], dtype: TensorDType, device: Device = cpu()): NDArray {
    for (const d of shape) {
      if (!Number.isSafeInteger(d) || d < 0) {
        throw new RangeError(`Invalid tensor shape [${shape.join(", ")}]`);
      }
    }
    const nbytes = shapeSize(shape) * elementBytes(dtype);
    const storage = currentAllocator(device).alloc(nbytes);
    return new NDArray(storage, 0, shape, dtype);
  }

  /** The device holding the data. */
  get device(): Device {
    return this.storage.device;
  }

  /** Size of the data in bytes. */
  get nbytes(): number {
    return this.size * elementBytes(this.dtype);
  }

  /** Number of references held now. @internal */
  get refCount(): number {
    return this.#refs;
  }

  /** True once the memory has been released; any further use throws. */
  get disposed(): boolean {
    return this.#freed || this.storage.released;
  }

  /** Adds a reference. @internal */
  retain(): this {
    this.#assertLive();
    this.#refs++;
    return this;
  }

  /** Drops a reference; the last one frees the memory. @internal */
  release(): void {
    if (this.#freed) return;
    if (this.#refs > 0) this.#refs--;
    if (this.#refs === 0) this.#free();
  }

  /**
   * Drops a reference without freeing: the value goes back to "floating",
   * as a builtin's fresh result is. Used when a VM frame hands its result to
   * the caller. @internal
   */
  disown(): void {
    if (this.#refs > 0) this.#refs--;
  }

  /** Frees a tensor nobody holds (a builtin result that was discarded). @internal */
  releaseIfUnowned(): void {
    if (!this.#freed && this.#refs === 0) this.#free();
  }

  /** Marks one reference as the user's, so `dispose()` knows what to drop. @internal */
  handToUser(): this {
    this.retain();
    if (this.#userHeld) {
      // The user already holds one reference; keep the count at one user reference.
      this.#refs--;
    }
    this.#userHeld = true;
    return this;
  }

  /**
   * Drops the user's reference; the memory goes back to its allocator now
   * unless the VM still holds the tensor (a constant, a saved argument).
   * Calling it twice is harmless.
   */
  dispose(): void {
    if (!this.#userHeld || this.#freed) return;
    this.#userHeld = false;
    this.release();
  }

  /** `using t = tensor(...)` disposes at the end of the block. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /**
   * The elements as a TypedArray view without copying (CPU only): what
   * kernels read and write. @internal
   */
  cpuView(): TypedArray {
    this.#assertLive();
    if (this.device.kind !== "cpu") {
      throw new TypeError(`Tensor is on ${this.device}, not on the CPU`);
    }
    const Ctor = TYPED_ARRAYS[this.dtype];
    return new Ctor(this.storage.block as ArrayBuffer, this.byteOffset, this.size);
  }

  /** A copy of the elements (CPU tensors only; use `await data()` for any device). */
  dataSync(): TypedArray {
    return this.cpuView().slice();
  }

  /** A copy of the elements, from any device (waits for queued GPU work). */
  async data(): Promise<TypedArray> {
    this.#assertLive();
    if (this.device.kind === "cpu") return this.dataSync();
    const bytes = await this.device.readBlock(this.storage.block, this.byteOffset, this.nbytes);
    const Ctor = TYPED_ARRAYS[this.dtype];
    return new Ctor(bytes.buffer as ArrayBuffer, bytes.byteOffset, this.size);
  }

  /** A copy of this tensor on `device`, owned by the caller. */
  async copyTo(device: Device): Promise<NDArray> {
    return (await this.copyToFloating(device)).handToUser();
  }

  /**
   * The copy behind `copyTo` and `vm.builtin.to_device`: no user reference.
   * Device-to-device work is queued in order; only GPU→CPU waits. @internal
   */
  async copyToFloating(device: Device): Promise<NDArray> {
    this.#assertLive();
    const out = NDArray.empty(this.shape, this.dtype, device);
    if (device === this.device) {
      device.copyBlock(this.storage.block, this.byteOffset, out.storage.block, 0, this.nbytes);
    } else if (this.device.kind === "cpu") {
      device.writeBlock(
        out.storage.block,
        0,
        new Uint8Array(this.storage.block as ArrayBuffer, this.byteOffset, this.nbytes),
      );
    } else {
      const bytes = await this.device.readBlock(this.storage.block, this.byteOffset, this.nbytes);
      device.writeBlock(out.storage.block, 0, bytes);
    }
    return out;
  }

  /** `NDArray(float32, [2, 2], cpu(0))`. */
  toString(): string {
    return `NDArray(${this.dtype}, [${this.shape.join(", ")}], ${this.device})`;
  }

  /** Shown by `console.log`: dtype, shape, device and, on the CPU, the leading values. */
  [Symbol.for("Deno.customInspect")](): string {
    if (this.#freed) return `NDArray(released)`;
    if (this.device.kind !== "cpu") return this.toString();
    const values = [...this.cpuView().subarray(0, 8)].map((v) => Number(v.toPrecision(6)));
    const more = this.size > 8 ? ", …" : "";
    return `${this.toString().slice(0, -1)}, [${values.join(", ")}${more}])`;
  }

  /**
   * Releases the memory now, whoever still holds the tensor
   * (`vm.builtin.kill`); later uses throw. @internal
   */
  kill(): void {
    if (!this.#freed) this.#free();
  }

  #assertLive(): void {
    if (this.#freed || this.storage.released) {
      throw new ReferenceError(`${this.toString()} was used after its memory was released`);
    }
  }

  #free(): void {
    this.#freed = true;
    collected.unregister(this);
    this.storage.release();
  }
}

/** A (nested) array of numbers. */
export type NestedNumbers = number | boolean | readonly NestedNumbers[];

/** Options of `tensor()`. */
export interface TensorOptions {
  /** Element type; default `"float32"` (a TypedArray input keeps its own type when omitted). */
  dtype?: string | DataType;
  /** Shape; default inferred from the nesting (or 1-D for a TypedArray). */
  shape?: readonly number[];
  /** Where to put the data; default `cpu()`. */
  device?: Device;
}

function inferShape(values: NestedNumbers): number[] {
  const dims: number[] = [];
  let v: NestedNumbers = values;
  while (Array.isArray(v)) {
    dims.push(v.length);
    v = v[0];
  }
  return dims;
}

function flattenInto(values: NestedNumbers, dims: number[], depth: number, out: number[]): void {
  if (depth === dims.length) {
    if (Array.isArray(values)) throw new TypeError("tensor(): ragged nested array");
    out.push(Number(values));
    return;
  }
  if (!Array.isArray(values) || values.length !== dims[depth]) {
    throw new TypeError("tensor(): ragged nested array");
  }
  for (const v of values) flattenInto(v, dims, depth + 1, out);
}

function typedDType(values: ArrayBufferView): TensorDType {
  for (const [name, Ctor] of Object.entries(TYPED_ARRAYS)) {
    if (name !== "bool" && values instanceof Ctor) return name as TensorDType;
  }
  throw new TypeError(`tensor(): unsupported array type ${values.constructor.name}`);
}

/**
 * Makes a tensor from a (nested) number array or a TypedArray. The caller
 * owns it: `dispose()` it (or declare it with `using`) to release its memory
 * at once.
 *
 * @example
 * ```ts
 * import { tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * using a = tensor([1, 2, 3, 4, 5, 6], { shape: [2, 3], dtype: "int32" });
 * assertEquals(a.shape, [2, 3]);
 * assertEquals(a.dataSync(), new Int32Array([1, 2, 3, 4, 5, 6]));
 * ```
 */
export function tensor(
  values: NestedNumbers | ArrayBufferView,
  options: TensorOptions = {},
): NDArray {
  const device = options.device ?? cpu();
  let flat: ArrayLike<number>;
  let inferred: number[];
  let dt: TensorDType;
  if (ArrayBuffer.isView(values)) {
    if (values instanceof DataView) {
      throw new TypeError("tensor(): pass a TypedArray, not a DataView");
    }
    flat = values as unknown as ArrayLike<number>;
    inferred = [flat.length];
    dt = options.dtype === undefined ? typedDType(values) : tensorDType(options.dtype);
  } else {
    inferred = inferShape(values);
    const out: number[] = [];
    flattenInto(values, inferred, 0, out);
    flat = out;
    dt = tensorDType(options.dtype ?? "float32");
  }
  const shape = options.shape ?? inferred;
  if (shapeSize(shape) !== flat.length) {
    throw new RangeError(`tensor(): ${flat.length} values do not fill shape [${shape.join(", ")}]`);
  }
  if (dt === "bool") flat = Array.from(flat, (v) => (v ? 1 : 0)); // bools are stored as 0/1 bytes
  const out = NDArray.empty(shape, dt, device);
  if (device.kind === "cpu") {
    out.cpuView().set(flat); // straight into the tensor's memory, no staging copy
  } else {
    const host = new TYPED_ARRAYS[dt](flat.length);
    host.set(flat);
    device.writeBlock(
      out.storage.block,
      out.byteOffset,
      new Uint8Array(host.buffer, 0, host.byteLength),
    );
  }
  return out.handToUser();
}
