/**
 * `TensorCache`: named tensors (model weights, usually loaded by
 * `loadTensorCache` or `vm.builtin.tensor_cache.load`) that programs fetch
 * with `vm.builtin.tensor_cache.get` and the `param_*_from_cache` builtins.
 * TVM keeps one such map per process (`tensor_cache_support.cc`); relaxvm
 * keeps one per VM (tenant), so a program sees, changes and frees only its
 * own VM's weights, unless the host hands several VMs the same cache on
 * purpose (the VM option `tensorCache`). Outside any VM the builtins use
 * the process-wide `TensorCache.host`, which is also where `loadTensorCache`
 * puts tensors by default.
 *
 * The cache holds a reference to each tensor and pins it: `kill` refuses
 * it and its memory is read-only to builtins (`NDArray.pin`), so a program
 * cannot free a tensor other holders use or change it in place. Removing,
 * replacing or clearing an entry releases it; its memory goes once nobody
 * holds it either.
 *
 * Also here, because VM options name them: what `tensor_cache.load` may
 * read (`TensorCacheRoot`). The checks are in builtins/tensor_cache/cache_access.ts.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../ground/brand.ts";
import { shared } from "../ground/shared.ts";
import type { NDArray } from "./ndarray.ts";

/**
 * Fetches a location a program's `tensor_cache.load` names, for a VM that
 * grants it (VM option `tensorCacheRoots`): the bytes (or a `Response`,
 * whose body is read up to what the index allows), or `null`/`undefined`
 * when this loader does not serve `url` (the next root is tried; when none
 * serves it the load is refused). It is asked for the index and for every
 * shard, so a shard is served by the loader that served its index. `signal`
 * aborts when the call that loads stops (timeout, abort) or ends.
 */
export type TensorCacheLoader = (
  url: URL,
  signal: AbortSignal,
) =>
  | Uint8Array
  | ArrayBuffer
  | Response
  | null
  | undefined
  | Promise<Uint8Array | ArrayBuffer | Response | null | undefined>;

/**
 * One thing a VM grants its programs' tensor-cache loads (VM option
 * `tensorCacheRoots`): a directory (a path, or a `file:` URL) or a URL
 * prefix (`https://host/models/`), granting it and everything under it; an
 * opaque URL (`blob:`, `data:`), granting exactly itself; or a loader
 * function, granting what it serves.
 */
export type TensorCacheRoot = string | URL | TensorCacheLoader;

const TENSOR_CACHE_BRAND = brandKey("TensorCache");

/**
 * Named tensors that programs read with `vm.builtin.tensor_cache.get` and
 * `param_array_from_cache`: each VM has its own unless given one (VM option
 * `tensorCache`); `TensorCache.host` is the one used outside any VM.
 *
 * @example Two VMs sharing a cache on purpose; a third keeps its own
 * ```ts
 * import { ExecBuilder, TensorCache, tensor, VirtualMachine } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("weight", { num_inputs: 0 }, () => {
 *   ib.emit_call("vm.builtin.tensor_cache.get", ["w"], { dst: ib.r(0) });
 *   ib.emit_ret(ib.r(0));
 * });
 * const ex = ib.get();
 * using weights = new TensorCache({ programsReadOnly: true }); // programs cannot change it
 * using w = tensor([1, 2, 3]);
 * weights.update("w", w);
 * using a = new VirtualMachine(ex, undefined, { tensorCache: weights });
 * using b = new VirtualMachine(ex, undefined, { tensorCache: weights });
 * using c = new VirtualMachine(ex);
 * assertEquals((await a.invoke<typeof w>("weight")).shape, [3]);
 * assertEquals((await b.invoke<typeof w>("weight")).shape, [3]);
 * assertEquals(await c.invoke("weight"), null); // its own cache is empty
 * ```
 */
export class TensorCache {
  static {
    brand(this, TENSOR_CACHE_BRAND);
  }

  /**
   * True for a `TensorCache` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static [Symbol.hasInstance](v: unknown): v is TensorCache {
    return typeof v === "object" && v !== null && (v as Branded)[TENSOR_CACHE_BRAND] === true;
  }

  /**
   * The process-wide cache, shared by every copy of the library: what the
   * builtins use when the host calls them outside any VM, and where
   * `loadTensorCache` puts tensors unless told otherwise. A VM uses it only
   * when given it (`{ tensorCache: TensorCache.host }`).
   */
  static get host(): TensorCache {
    return hostCache;
  }

  readonly #entries = new Map<string, NDArray>();
  /**
   * Whether programs may only read this cache: `tensor_cache.update`,
   * `remove`, `clear` and `load` in a VM fail on it (the host's own calls
   * still work). For weights the host loads once and shares between
   * tenants that must not change them for each other.
   */
  readonly programsReadOnly: boolean;

  /**
   * An empty cache. `{ programsReadOnly: true }`: programs of the VMs given
   * it may read it but not change it (see `programsReadOnly`).
   */
  constructor(options: { programsReadOnly?: boolean } = {}) {
    this.programsReadOnly = options.programsReadOnly === true;
  }

  /** The tensor cached under `name`, if any. */
  get(name: string): NDArray | undefined {
    return this.#entries.get(name);
  }

  /**
   * Caches `tensor` under `name`, holding a reference to it and pinning it
   * (read-only to builtins, never killed). An existing entry is replaced
   * (and released) only with `override`; otherwise that is an error.
   */
  update(name: string, tensor: NDArray, override = false): void {
    const old = this.#entries.get(name);
    if (old !== undefined && !override) {
      throw new Error(
        `tensor_cache.update: "${name}" is already in the cache; pass override = true to replace it`,
      );
    }
    tensor.retain();
    tensor.heldBeyondFrames();
    tensor.pin();
    this.#entries.set(name, tensor);
    old?.release();
  }

  /** Removes `name` (absent: nothing happens), releasing its tensor. */
  remove(name: string): void {
    const old = this.#entries.get(name);
    this.#entries.delete(name);
    old?.release();
  }

  /** Empties the cache, releasing every tensor. */
  clear(): void {
    const old = [...this.#entries.values()];
    this.#entries.clear();
    for (const t of old) t.release();
  }

  /** The cached names, in insertion order. */
  names(): string[] {
    return [...this.#entries.keys()];
  }

  /** Number of entries. */
  get size(): number {
    return this.#entries.size;
  }

  /** `clear()`; `using cache = new TensorCache()` clears it at the end of the scope. */
  [Symbol.dispose](): void {
    this.clear();
  }

  /** `TensorCache(2 tensors)`. */
  toString(): string {
    return `TensorCache(${this.#entries.size} tensor${this.#entries.size === 1 ? "" : "s"})`;
  }
}

/** One host cache per process, whichever copy of the library loads or reads it (ground/shared.ts). */
const hostCache: TensorCache = shared("relaxvm.tensorCache.v2", () => new TensorCache());
