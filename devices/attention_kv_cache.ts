/**
 * `AttentionKVCache`: TVM's legacy attention KV cache
 * (`relax.vm.AttentionKVCacheLegacy`, `src/runtime/vm/lm_support.cc`), a
 * `VMObject` (ground/object.ts) that owns one tensor of shape
 * `[capacity, ...row]` on a device and counts the rows filled so far.
 *
 * ```text
 * data            [capacity, d1, …, dk]   rows 0..fillCount-1 are valid
 * fillCount       valid rows (a prefix)
 * windowPosition  the write cursor of the sliding-window mode
 * ```
 *
 * Appending grows the tensor by doubling the capacity, as TVM does: a new
 * tensor is allocated, the old one's whole contents are copied to its
 * leading rows, and the old one is released. Every copy is a device copy
 * (`Device.copyBlock`), queued in order on a GPU, so nothing waits for one;
 * only a value on another device than the cache costs a transfer.
 * Storage comes from the active allocator (the running VM's), so a cache
 * shows in `memory_stats()`, and its memory returns to the allocator when the
 * last holder releases it.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../ground/brand.ts";
import { INSPECT } from "../ground/inspect.ts";
import { elementBytes, type TensorDType } from "../ground/dtype.ts";
import { retainValue, VMObject } from "../ground/object.ts";
import type { Device } from "./device.ts";
import { NDArray, shapeSize } from "./ndarray.ts";

/** Copies `rows` rows of `src` from row `srcRow` into `dst` at row `dstRow` (same row size). */
function copyRows(
  src: NDArray,
  srcRow: number,
  dst: NDArray,
  dstRow: number,
  rows: number,
): void | Promise<void> {
  const rowBytes = shapeSize(dst.shape.slice(1)) * elementBytes(dst.dtype);
  const nbytes = rows * rowBytes;
  if (nbytes === 0) return;
  const from = src.byteOffset + srcRow * rowBytes, to = dst.byteOffset + dstRow * rowBytes;
  if (src.device === dst.device) {
    dst.device.copyBlock(src.block, from, dst.block, to, nbytes);
  } else if (src.device.kind === "cpu") {
    dst.device.writeBlock(
      dst.block,
      to,
      new Uint8Array(src.block as ArrayBuffer, from, nbytes),
    );
  } else {
    return src.device.readBlock(src.block, from, nbytes).then((bytes) =>
      dst.device.writeBlock(dst.block, to, bytes)
    );
  }
}

const ATTENTION_KV_CACHE_BRAND = brandKey("AttentionKVCache");

/**
 * A KV cache: a growing tensor of rows. Made by
 * `vm.builtin.attention_kv_cache_create`; the other `attention_kv_cache_*`
 * builtins change it in place.
 *
 * @example A program that creates a cache, appends two rows and returns it
 * ```ts
 * import { type AttentionKVCache, ExecBuilder, shape, tensor, VirtualMachine } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("main", { num_inputs: 2 }, () => {
 *   const create = [ib.r(0), shape(1, 2), ib.imm(0)]; // empty, room for 1 row of [2]
 *   ib.emit_call("vm.builtin.attention_kv_cache_create", create, { dst: ib.r(2) });
 *   ib.emit_call("vm.builtin.attention_kv_cache_append", [ib.r(2), ib.r(1)], { dst: ib.r(2) });
 *   ib.emit_call("vm.builtin.attention_kv_cache_append", [ib.r(2), ib.r(1)], { dst: ib.r(2) });
 *   ib.emit_ret(ib.r(2));
 * });
 * const vm = new VirtualMachine(ib.get());
 * using init = tensor([0, 0], { shape: [1, 2], dtype: "int32" });
 * using row = tensor([7, 8], { shape: [1, 2], dtype: "int32" });
 * using cache = await vm.invoke("main", init, row) as AttentionKVCache;
 * assertEquals([cache.fillCount, cache.capacity], [2, 2]); // grew from 1 row to 2
 * assertEquals(vm.memory_stats().liveBytes, 16); // counted until disposed
 * ```
 */
export class AttentionKVCache extends VMObject {
  static {
    brand(this, ATTENTION_KV_CACHE_BRAND);
  }

  /**
   * True for an `AttentionKVCache` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is AttentionKVCache {
    return typeof v === "object" && v !== null && (v as Branded)[ATTENTION_KV_CACHE_BRAND] === true;
  }

  #data: NDArray;
  #fill = 0;
  #window = 0;

  /**
   * A cache over `data` (which it retains), with no rows filled.
   *
   * @ignore
   */
  constructor(data: NDArray) {
    super();
    if (data.shape.length === 0) throw new RangeError("A KV cache needs at least one dimension");
    retainValue(data); // a holder beyond frames: the tensor joins the GC safety net
    this.#data = data;
  }

  /**
   * A cache for rows like `init`'s, with room for `reserveShape[0]` rows,
   * holding `init`'s rows; then, as TVM's `create`: `initFillCount >= 0`
   * sets both counters to it (0: `init` only gives dtype, device and row
   * shape), a negative one keeps `init`'s rows filled.
   */
  static create(
    init: NDArray,
    reserveShape: readonly number[],
    initFillCount: number,
  ): AttentionKVCache {
    const cache = new AttentionKVCache(NDArray.empty(reserveShape, init.dtype, init.device));
    try {
      cache.append(init, "attention_kv_cache_create"); // same device: a synchronous copy
      if (initFillCount >= 0) {
        if (initFillCount > cache.capacity) {
          throw new RangeError(
            `attention_kv_cache_create: init_fill_count ${initFillCount} exceeds the capacity ${cache.capacity}`,
          );
        }
        cache.#fill = cache.#window = initFillCount;
      }
    } catch (e) {
      cache.releaseIfUnowned();
      throw e;
    }
    return cache;
  }

  /** Rows filled so far. */
  get fillCount(): number {
    return this.#fill;
  }

  /** Where the next sliding-window write goes. */
  get windowPosition(): number {
    return this.#window;
  }

  /** Rows the current tensor can hold. */
  get capacity(): number {
    return this.#data.shape[0];
  }

  /** The shape of one row. */
  get rowShape(): readonly number[] {
    return this.#data.shape.slice(1);
  }

  /** Element type. */
  get dtype(): TensorDType {
    return this.#data.dtype;
  }

  /** Where the rows live. */
  get device(): Device {
    return this.#data.device;
  }

  /**
   * The backing tensor (all `capacity` rows).
   *
   * @ignore
   */
  get data(): NDArray {
    this.#assertLive();
    return this.#data;
  }

  /** Appends `value`'s rows after the filled ones, growing by doubling. */
  append(value: NDArray, who = "attention_kv_cache_append"): void | Promise<void> {
    this.#checkRows(value, who);
    const n = value.shape[0];
    this.#reserve(this.#fill + n);
    const at = this.#fill;
    this.#fill += n;
    return copyRows(value, 0, this.#data, at, n);
  }

  /** Overwrites the filled rows with `value`, which must have exactly that many. */
  update(value: NDArray): void | Promise<void> {
    const who = "attention_kv_cache_update";
    this.#checkRows(value, who);
    if (value.shape[0] !== this.#fill) {
      throw new RangeError(
        `${who}: value has ${value.shape[0]} rows, but the cache has ${this.#fill} filled`,
      );
    }
    return copyRows(value, 0, this.#data, 0, value.shape[0]);
  }

  /**
   * Writes `value` into a sliding window of at most `maxCacheSize` rows whose
   * first `numSinks` rows, once written, are never overwritten (StreamingLLM's
   * attention sinks). The rows are kept in rotated order: logically
   * `rows[0:S]`, then `rows[pos:M]`, then `rows[S:pos]`.
   */
  windowOverride(
    value: NDArray,
    maxCacheSize: number,
    numSinks: number,
    who: string,
  ): void | Promise<void> {
    this.#checkRows(value, who);
    const n = value.shape[0], m = maxCacheSize, s = numSinks, pos = this.#window;
    if (n > m - s) {
      throw new RangeError(
        `${who}: value has ${n} rows, more than max_cache_size ${m} minus ${s} sinks`,
      );
    }
    if (pos > m) {
      throw new RangeError(`${who}: the window position ${pos} is past max_cache_size ${m}`);
    }
    // TVM grows to fill + n only when that fits in the window; growing to the
    // window size otherwise also covers a cache created smaller than the window.
    this.#reserve(Math.min(m, Math.max(this.#fill, pos) + n));
    const k = Math.min(n, m - pos);
    this.#fill = Math.min(this.#fill + n, m);
    const copies: (void | Promise<void>)[] = [copyRows(value, 0, this.#data, pos, k)];
    if (k < n) {
      copies.push(copyRows(value, k, this.#data, s, n - k));
      this.#window = n - k + s;
    } else {
      this.#window = Math.min(pos + n, m);
    }
    return settle(copies);
  }

  /**
   * A view of the filled rows (no copy): later in-place writes show through
   * it; after a growth it keeps the old tensor's rows. `shape` must be
   * `[fillCount, ...rowShape]` when given.
   */
  view(shape?: readonly number[]): NDArray {
    const who = "attention_kv_cache_view";
    const data = this.data;
    const want = shape ?? [this.#fill, ...this.rowShape];
    if (want[0] !== this.#fill) {
      throw new RangeError(
        `${who}: shape [${want.join(", ")}] does not match the ${this.#fill} filled rows`,
      );
    }
    if (want.length !== data.shape.length || want.some((d, i) => i > 0 && d !== data.shape[i])) {
      throw new RangeError(
        `${who}: shape [${want.join(", ")}] does not match the rows of shape [${
          this.rowShape.join(", ")
        }]`,
      );
    }
    return new NDArray(data.storage, data.byteOffset, want, data.dtype);
  }

  /** Drops the last `n` filled rows (the window position stays). */
  popN(n: number): void {
    this.#assertLive();
    if (!Number.isSafeInteger(n) || n < 0 || n > this.#fill) {
      throw new RangeError(
        `attention_kv_cache_array_popn: cannot pop ${n} of ${this.#fill} filled rows`,
      );
    }
    this.#fill -= n;
  }

  /** Empties the cache, keeping its capacity (the data is not zeroed). */
  clear(): void {
    this.#assertLive();
    this.#fill = this.#window = 0;
  }

  /** `AttentionKVCache(int32, 2 of 4 rows of [2], cpu(0))`. */
  override toString(): string {
    return `AttentionKVCache(${this.dtype}, ${this.#fill} of ${this.capacity} rows of [${
      this.rowShape.join(", ")
    }], ${this.device})`;
  }

  /** Shown by `console.log` and `deno repl`: as `toString()`, or `… <released>`. */
  override [INSPECT](): string {
    return this.disposed ? `AttentionKVCache(${this.dtype}) <released>` : this.toString();
  }

  /**
   * Releases the backing tensor.
   *
   * @ignore
   */
  protected free(): void {
    this.#data.release();
  }

  #assertLive(): void {
    if (this.disposed) throw this.usedAfterFree();
  }

  #checkRows(value: NDArray, who: string): void {
    this.#assertLive();
    if (value.dtype !== this.dtype) {
      throw new TypeError(`${who}: value has dtype ${value.dtype}, the cache ${this.dtype}`);
    }
    const row = this.rowShape;
    if (
      value.shape.length !== row.length + 1 || row.some((d, i) => value.shape[i + 1] !== d)
    ) {
      throw new RangeError(
        `${who}: value of shape [${value.shape.join(", ")}] does not have rows of shape [${
          row.join(", ")
        }]`,
      );
    }
  }

  /** Grows the tensor, doubling its capacity until `rows` fit. */
  #reserve(rows: number): void {
    const old = this.#data;
    if (rows <= old.shape[0]) return;
    let capacity = Math.max(old.shape[0], 1);
    while (capacity < rows) capacity *= 2;
    const grown = NDArray.empty([capacity, ...this.rowShape], old.dtype, old.device);
    retainValue(grown);
    old.device.copyBlock(old.block, old.byteOffset, grown.block, 0, old.nbytes);
    this.#data = grown;
    old.release();
  }
}

function settle(results: (void | Promise<void>)[]): void | Promise<void> {
  const pending = results.filter((r) => r instanceof Promise);
  if (pending.length > 0) return Promise.all(pending).then(() => {});
}
