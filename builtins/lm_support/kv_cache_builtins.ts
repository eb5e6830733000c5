/**
 * The legacy attention KV cache builtins of TVM's `lm_support.cc`, over
 * devices/attention_kv_cache.ts. Each changes the cache in place and, where
 * TVM returns the cache, returns the same object (Relax calls them with
 * `call_inplace_packed`). They work on any device the cache lives on; a GPU
 * cache is only ever written by device copies.
 *
 * ```text
 * attention_kv_cache_create(init, reserve_shape, init_fill_count) -> cache
 * attention_kv_cache_append(cache, value) -> cache          grows by doubling
 * attention_kv_cache_update(cache, value) -> cache          overwrite filled rows
 * attention_kv_cache_window_override(cache, value, max_cache_size) -> cache
 * attention_kv_cache_window_override_with_sinks(cache, value, max_cache_size, sinks) -> cache
 * attention_kv_cache_view(cache[, shape]) -> tensor         a view of the filled rows
 * attention_kv_cache_array_popn(caches, n)                  drop the last n rows of each
 * attention_kv_cache_array_clear(caches)                    empty each
 * ```
 *
 * Errors: `TypeError` for arguments of the wrong kind and for a value whose
 * dtype differs from the cache's; `RangeError` for row shapes, counts and
 * sizes that do not fit (TVM: internal check failures).
 *
 * @module
 */

import { AttentionKVCache } from "../../devices/attention_kv_cache.ts";
import { tupleFields } from "../../ground/tuple.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { describe } from "../describe.ts";
import { integerArg, shapeArg, tensorArg } from "../validate.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const kvCacheBuiltins = new BuiltinTable("KV caches", import.meta.url);

function cacheArg(v: unknown, who: string): AttentionKVCache {
  if (!(v instanceof AttentionKVCache)) {
    throw new TypeError(`${who}: expected a KV cache, got ${describe(v)}`);
  }
  return v;
}

function cachesArg(v: unknown, who: string): AttentionKVCache[] {
  const fields = tupleFields(v);
  if (fields === undefined) {
    throw new TypeError(`${who}: expected a tuple of KV caches, got ${describe(v)}`);
  }
  return fields.map((c) => cacheArg(c, who));
}

/** `result` (void or a Promise of it) followed by `value`. */
function then<T>(result: void | Promise<void>, value: T): T | Promise<T> {
  return result instanceof Promise ? result.then(() => value) : value;
}

kvCacheBuiltins.add(
  "vm.builtin.attention_kv_cache_create",
  (init: unknown, reserveShape: unknown, initFillCount: unknown) => {
    const who = "attention_kv_cache_create";
    const reserve = shapeArg(reserveShape, who, "reserve_shape");
    if (reserve.length === 0) {
      throw new RangeError(`${who}: reserve_shape needs at least one dimension (the rows)`);
    }
    return AttentionKVCache.create(
      tensorArg(init, "value", who),
      reserve,
      integerArg(initFillCount, "init_fill_count", who),
    );
  },
  {
    signature: "(init, reserve_shape, init_fill_count) → cache",
    summary:
      "A new cache on `init`'s device with `init`'s dtype, room for `reserve_shape[0]` rows of `reserve_shape[1:]`, holding `init`'s rows. Then `init_fill_count >= 0` sets the filled rows and window position to it (0: an empty cache; `init` only gives dtype, device and row shape) and a negative one keeps `init`'s rows filled with the window position at 0.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`RangeError` when `reserve_shape` is not a shape of at least one dimension, `init`'s rows differ from `reserve_shape[1:]` or `init_fill_count` exceeds the capacity (TVM does not check it).",
    tvm: "vm.builtin.attention_kv_cache_create (lm_support.cc)",
  },
);

kvCacheBuiltins.add("vm.builtin.attention_kv_cache_append", (cache: unknown, value: unknown) => {
  const who = "attention_kv_cache_append";
  const c = cacheArg(cache, who);
  return then(c.append(tensorArg(value, "value", who)), c);
}, {
  signature: "(cache, value) → the same cache",
  summary:
    "Appends `value`'s rows after the filled ones, doubling the capacity until they fit (the old rows are copied on the device). Returns the cache. A value on another device than the cache is transferred (from a GPU, that waits).",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "dtype (`TypeError`) or row shape (`RangeError`) differs.",
  tvm: "vm.builtin.attention_kv_cache_append (lm_support.cc)",
});

kvCacheBuiltins.add("vm.builtin.attention_kv_cache_update", (cache: unknown, value: unknown) => {
  const who = "attention_kv_cache_update";
  const c = cacheArg(cache, who);
  return then(c.update(tensorArg(value, "value", who)), c);
}, {
  signature: "(cache, value) → the same cache",
  summary:
    "Overwrites the filled rows with `value`, which must have exactly `fillCount` rows. Returns the cache.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "dtype (`TypeError`), row shape or row count (`RangeError`) differs.",
  tvm: "vm.builtin.attention_kv_cache_update (lm_support.cc)",
});

kvCacheBuiltins.add(
  "vm.builtin.attention_kv_cache_window_override",
  (cache: unknown, value: unknown, maxCacheSize: unknown) => {
    const who = "attention_kv_cache_window_override";
    const c = cacheArg(cache, who);
    const m = integerArg(maxCacheSize, "max_cache_size", who);
    return then(c.windowOverride(tensorArg(value, "value", who), m, 0, who), c);
  },
  {
    signature: "(cache, value, max_cache_size) → the same cache",
    summary:
      "Writes `value`'s rows at the window position of a ring buffer of at most `max_cache_size` rows, wrapping to the start. Returns the cache. The rows are kept in rotated order: the oldest is at the window position.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors: "as `append`, and `RangeError` when `value` has more rows than the window.",
    tvm: "vm.builtin.attention_kv_cache_window_override (lm_support.cc)",
  },
);

kvCacheBuiltins.add(
  "vm.builtin.attention_kv_cache_window_override_with_sinks",
  (cache: unknown, value: unknown, maxCacheSize: unknown, numSinks: unknown) => {
    const who = "attention_kv_cache_window_override_with_sinks";
    const c = cacheArg(cache, who);
    const m = integerArg(maxCacheSize, "max_cache_size", who);
    const s = integerArg(numSinks, "num_attention_sinks", who);
    if (s < 0 || s > m) {
      throw new RangeError(`${who}: num_attention_sinks ${s} is not in 0..${m}`);
    }
    return then(c.windowOverride(tensorArg(value, "value", who), m, s, who), c);
  },
  {
    signature: "(cache, value, max_cache_size, num_attention_sinks) → the same cache",
    summary:
      "As `window_override`, but the first `num_attention_sinks` rows, once written, are never overwritten: wrapping goes back to row `num_attention_sinks` (StreamingLLM's attention sinks). The logical order of a full window is `rows[0:S]`, `rows[pos:M]`, `rows[S:pos]`. Returns the cache.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "as `window_override`; `RangeError` when `value` has more rows than `max_cache_size - num_attention_sinks`.",
    tvm: "vm.builtin.attention_kv_cache_window_override_with_sinks (lm_support.cc)",
  },
);

kvCacheBuiltins.add("vm.builtin.attention_kv_cache_view", (...args: unknown[]) => {
  const who = "attention_kv_cache_view";
  if (args.length !== 1 && args.length !== 2) {
    throw new TypeError(`${who}: expects 1 or 2 arguments, got ${args.length}`);
  }
  const c = cacheArg(args[0], who);
  return c.view(args.length === 2 ? shapeArg(args[1], who) : undefined);
}, {
  signature: "(cache[, shape]) → tensor (a view)",
  summary:
    "A tensor viewing the filled rows of the cache, without copying: later in-place writes show through it; after the cache grows it keeps the old rows. `shape`, when given, must be `[fillCount, ...rows]`.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (other than 1 or 2 arguments), `RangeError` (shape differs).",
  tvm: "vm.builtin.attention_kv_cache_view (lm_support.cc)",
});

kvCacheBuiltins.add(
  "vm.builtin.attention_kv_cache_array_popn",
  (caches: unknown, n: unknown) => {
    const who = "attention_kv_cache_array_popn";
    const list = cachesArg(caches, who);
    const count = integerArg(n, "n", who);
    const short = list.find((c) => count < 0 || count > c.fillCount);
    if (short !== undefined) {
      throw new RangeError(`${who}: cannot pop ${count} rows from ${short}`);
    }
    for (const c of list) c.popN(count);
    return null;
  },
  {
    signature: "(caches, n) → null",
    summary:
      "Drops the last `n` filled rows of every cache in the tuple (window positions stay). Every cache is checked before any changes, unlike TVM, which pops the caches before a failing one. Returns null.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors: "`RangeError` when a cache has fewer than `n` rows filled.",
    tvm: "vm.builtin.attention_kv_cache_array_popn (lm_support.cc)",
  },
);

kvCacheBuiltins.add("vm.builtin.attention_kv_cache_array_clear", (caches: unknown) => {
  for (const c of cachesArg(caches, "attention_kv_cache_array_clear")) c.clear();
  return null;
}, {
  signature: "(caches) → null",
  summary:
    "Empties every cache in the tuple (filled rows and window position to 0; capacity and data kept). Returns null.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "",
  tvm: "vm.builtin.attention_kv_cache_array_clear (lm_support.cc)",
});
