/**
 * The process-wide tensor cache: named tensors (model weights, usually
 * loaded by `loadTensorCache`) that programs fetch with
 * `vm.builtin.tensor_cache.get` and the `param_*_from_cache` builtins. The
 * cache holds a reference to each tensor: removing, replacing or clearing
 * an entry releases it, and its memory goes once no program holds it either.
 * TVM: the global map of `tensor_cache_support.cc`.
 *
 * @module
 */

import type { NDArray } from "../devices/ndarray.ts";
import { retainValue } from "../ground/object.ts";
import { shared } from "../ground/shared.ts";

/** One cache per process, whichever copy of the library loads or reads it (ground/shared.ts). */
const entries: Map<string, NDArray> = shared("relaxvm.tensorCache.v1", () => new Map());

/** The tensor cached under `name`, if any. */
export function cacheGet(name: string): NDArray | undefined {
  return entries.get(name);
}

/**
 * Caches `tensor` under `name` (by reference). An existing entry is replaced
 * only with `override`; otherwise that is an error.
 */
export function cacheUpdate(name: string, tensor: NDArray, override: boolean): void {
  const old = entries.get(name);
  if (old !== undefined && !override) {
    throw new Error(
      `tensor_cache.update: "${name}" is already in the cache; pass override = true to replace it`,
    );
  }
  retainValue(tensor);
  entries.set(name, tensor);
  old?.release();
}

/** Removes `name` (absent: nothing happens), releasing its tensor. */
export function cacheRemove(name: string): void {
  const old = entries.get(name);
  entries.delete(name);
  old?.release();
}

/** Empties the cache, releasing every tensor. */
export function cacheClear(): void {
  const old = [...entries.values()];
  entries.clear();
  for (const t of old) t.release();
}

/** The cached names, in insertion order. */
export function cacheNames(): string[] {
  return [...entries.keys()];
}
