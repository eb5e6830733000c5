/**
 * The tensor cache builtins of TVM's `tensor_cache_support.cc`: a cache of
 * named tensors (devices/tensor_cache.ts), filled by `tensor_cache.load`
 * (builtins/tensor_cache/cache_loader.ts), and the `param_*_from_cache` builtins
 * that gather a model's weights from it. Where TVM has one cache per
 * process, each builtin here works on the cache of the VM running it (its
 * own, or one its host shares on purpose), and on `TensorCache.host` when
 * the host calls it outside any VM. A program's `load` reads only what its
 * VM grants (builtins/tensor_cache/cache_access.ts).
 *
 * ```text
 * tensor_cache.load(path_or_url, device_type, device_id[, on_progress])  async
 * tensor_cache.get(name) -> tensor | null
 * tensor_cache.update(name, tensor[, override = false])
 * tensor_cache.remove(name)        tensor_cache.clear()
 * param_array_from_cache(prefix, n) -> (prefix_0, …, prefix_{n-1})   n = -1: up to the first gap
 * param_array_from_cache_by_name(names) -> tuple
 * param_array_from_cache_by_name_unpacked(name_0, name_1, …) -> tuple
 * param_module_from_cache(prefix, n) -> ParamModule
 * param_module_from_cache_by_name(names) -> ParamModule
 * ```
 *
 * The tensors returned are the cached ones (shared, not copied).
 *
 * @module
 */

import { activateAllocators, activeAllocators } from "../../devices/allocation_context.ts";
import type { Device } from "../../devices/device.ts";
import { findDevice } from "../../devices/find_device.ts";
import { MemoryScope } from "../../devices/memory_scope.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { TensorCache } from "../../devices/tensor_cache.ts";
import { Tuple, tupleFields } from "../../ground/tuple.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { describe } from "../describe.ts";
import { ParamModule } from "./param_module.ts";
import { integerArg } from "../validate.ts";
import { loadTensorCache, loadTensorCacheFor, type TensorCacheProgress } from "./cache_loader.ts";

/**
 * The VM running the builtin now (its memory scope), or null when the host
 * calls it outside any VM.
 */
function runningScope(who: string): MemoryScope | null {
  const active = activeAllocators();
  if (active === null) return null;
  if (active instanceof MemoryScope) return active;
  throw new Error(`${who}: called with allocators active that belong to no VM`);
}

/** The cache the builtin works on: the running VM's, or the host's outside any VM. */
function cacheOf(who: string): TensorCache {
  return runningScope(who)?.tensorCache ?? TensorCache.host;
}

/** `cacheOf`, for a builtin that changes the cache: refused on a cache programs may only read. */
function writableCacheOf(who: string): TensorCache {
  const scope = runningScope(who);
  if (scope === null) return TensorCache.host;
  const cache = scope.tensorCache;
  if (cache.programsReadOnly) {
    throw new TypeError(
      `${who}: the VM's tensor cache is shared read-only by its host: programs cannot change it`,
    );
  }
  return cache;
}

/** The builtins of this module, installed by `installBuiltins()`. */
export const tensorCacheBuiltins = new BuiltinTable("Tensor cache", import.meta.url);

function stringArg(v: unknown, what: string, who: string): string {
  if (typeof v !== "string") {
    throw new TypeError(`${who}: ${what} must be a string, got ${describe(v)}`);
  }
  return v;
}

tensorCacheBuiltins.add(
  "vm.builtin.tensor_cache.load",
  async (path: unknown, deviceType: unknown, deviceId: unknown, onProgress?: unknown) => {
    const who = "tensor_cache.load";
    const location = stringArg(path, "path_or_url", who);
    const type = integerArg(deviceType, "device_type", who);
    const id = integerArg(deviceId, "device_id", who);
    const device: Device | undefined = findDevice(type, id);
    if (device === undefined) {
      throw new Error(`${who}: no device of type ${type} with id ${id} has been acquired`);
    }
    if (onProgress !== undefined && onProgress !== null && typeof onProgress !== "function") {
      throw new TypeError(`${who}: on_progress must be a function, got ${describe(onProgress)}`);
    }
    const scope = runningScope(who);
    const report = onProgress as ((p: TensorCacheProgress) => void) | null | undefined ?? undefined;
    if (scope === null) {
      await loadTensorCache(location, { device, onProgress: report, cache: TensorCache.host });
      return null;
    }
    await loadTensorCacheFor(location, {
      device,
      cache: writableCacheOf(who),
      // Progress is reported after awaits, when no VM is running: the function the program
      // passed runs as part of its VM again (its cache, its allocators), not the host's.
      onProgress: report === undefined ? undefined : (p) => {
        const previous = activateAllocators(scope);
        try {
          report(p);
        } finally {
          activateAllocators(previous);
        }
      },
    }, {
      roots: scope.tensorCacheRoots,
      allocator: (d) => scope.allocatorFor(d),
      limit: scope.limit,
      callSignal: scope.callSignal(),
    });
    return null;
  },
  {
    signature: "(path_or_url, device_type, device_id[, on_progress]) → null, asynchronously",
    summary:
      "Loads a tvmjs tensor cache (a directory or URL with `tensor-cache.json`) into the VM's tensor cache, onto the device with DLPack type `device_type` (1 CPU, 15 WebGPU; the device must have been acquired) and index `device_id`, replacing cached tensors of the same names. Only from what the VM grants (option `tensorCacheRoots`; nothing by default), counted against its `maxMemoryBytes`, stopped with the call. `on_progress`, a function, receives a `TensorCacheProgress` at the start and after each shard. Resolves to null. All or nothing: see `loadTensorCache`.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (arguments), `Error` (no such device; a location or shard the VM does not grant, named as written), `TensorCacheError` (a malformed, incomplete or too large cache, naming file and record).",
    tvm: "vm.builtin.tensor_cache.load (tensor_cache_support.cc)",
  },
);

tensorCacheBuiltins.add("vm.builtin.tensor_cache.get", (name: unknown) => {
  return cacheOf("tensor_cache.get").get(stringArg(name, "name", "tensor_cache.get")) ?? null;
}, {
  signature: "(name) → tensor or null",
  summary: "The cached tensor, or null.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "",
  tvm: "vm.builtin.tensor_cache.get",
});

tensorCacheBuiltins.add(
  "vm.builtin.tensor_cache.update",
  (name: unknown, t: unknown, override?: unknown) => {
    const who = "tensor_cache.update";
    if (!(t instanceof NDArray)) {
      throw new TypeError(`${who}: expected a tensor, got ${describe(t)}`);
    }
    if (t.disposed) throw new ReferenceError(`${who}: ${t} was used after its memory was released`);
    writableCacheOf(who).update(stringArg(name, "name", who), t, Boolean(override));
    return null;
  },
  {
    signature: "(name, tensor[, override]) → null",
    summary:
      "Caches `tensor` under `name` in the VM's tensor cache (by reference; the cache holds it, and pins it: from now on it is read-only to builtins and cannot be killed). `override` (boolean or 0/1, default false) allows replacing an existing entry. Returns null.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (arguments), `Error` (the name exists and no override).",
    tvm: "vm.builtin.tensor_cache.update",
  },
);

tensorCacheBuiltins.add("vm.builtin.tensor_cache.remove", (name: unknown) => {
  writableCacheOf("tensor_cache.remove").remove(stringArg(name, "name", "tensor_cache.remove"));
  return null;
}, {
  signature: "(name) → null",
  summary: "Drops the entry (absent: nothing happens). Returns null.",
  dtypes: null,
  devices: ["cpu", "webgpu"],
  errors: "",
  tvm: "vm.builtin.tensor_cache.remove",
});

tensorCacheBuiltins.add("vm.builtin.tensor_cache.clear", () => {
  writableCacheOf("tensor_cache.clear").clear();
  return null;
}, {
  signature: "() → null",
  summary: "Drops every entry of the VM's tensor cache.",
  dtypes: null,
  devices: ["cpu", "webgpu"],
  errors: "",
  tvm: "vm.builtin.tensor_cache.clear",
});

/** The tensors named `<prefix>_0, <prefix>_1, …`: `count` of them, or up to the first gap (-1). */
function byPrefix(prefix: unknown, count: unknown, who: string): NDArray[] {
  const p = stringArg(prefix, "prefix", who);
  const n = integerArg(count, "num_params", who);
  if (n < -1) throw new RangeError(`${who}: num_params must be -1 or more, got ${n}`);
  const cache = cacheOf(who);
  const out: NDArray[] = [];
  for (let i = 0; n === -1 || i < n; i++) {
    const t = cache.get(`${p}_${i}`);
    if (t === undefined) {
      if (n === -1) break;
      throw new ReferenceError(`${who}: "${p}_${i}" is not in the tensor cache`);
    }
    out.push(t);
  }
  return out;
}

/** The tensors named in `names`, in order. */
function byName(names: readonly unknown[], who: string): NDArray[] {
  const cache = cacheOf(who);
  return names.map((name, i) => {
    if (typeof name !== "string") {
      throw new TypeError(`${who}: name ${i} must be a string, got ${describe(name)}`);
    }
    const t = cache.get(name);
    if (t === undefined) throw new ReferenceError(`${who}: "${name}" is not in the tensor cache`);
    return t;
  });
}

function namesArg(v: unknown, who: string): readonly unknown[] {
  const fields = tupleFields(v);
  if (fields === undefined) {
    throw new TypeError(`${who}: expected a tuple of names, got ${describe(v)}`);
  }
  return fields;
}

/**
 * Registers `vm.builtin.<form>(prefix, num_params)` and `vm.builtin.<form>_by_name(names)`:
 * the cached tensors by prefix (`byPrefix`) or by the names in a tuple (`byName`), handed
 * out by `wrap` as `result`. TVM has two such forms, a tuple of tensors and a `ParamModule`,
 * which differ only in that.
 */
function addParamForm(
  form: "param_array_from_cache" | "param_module_from_cache",
  result: string,
  wrap: (tensors: NDArray[]) => Tuple | ParamModule,
  summaries: { readonly byPrefix: string; readonly byName: string },
): void {
  const byNameForm = `${form}_by_name`;
  tensorCacheBuiltins.add(
    `vm.builtin.${form}`,
    (prefix: unknown, count: unknown) => wrap(byPrefix(prefix, count, form)),
    {
      signature: `(prefix, num_params) → ${result}`,
      summary: summaries.byPrefix,
      dtypes: "any",
      devices: ["cpu", "webgpu"],
      errors:
        "`ReferenceError` (a name missing with num_params >= 0), `RangeError` (num_params below -1), `TypeError`.",
      tvm: `vm.builtin.${form}`,
    },
  );
  tensorCacheBuiltins.add(
    `vm.builtin.${byNameForm}`,
    (names: unknown) => wrap(byName(namesArg(names, byNameForm), byNameForm)),
    {
      signature: `(names) → ${result}`,
      summary: summaries.byName,
      dtypes: "any",
      devices: ["cpu", "webgpu"],
      errors: "`ReferenceError` (a name missing), `TypeError`.",
      tvm: `vm.builtin.${byNameForm}`,
    },
  );
}

addParamForm("param_array_from_cache", "tuple of tensors", (tensors) => new Tuple(tensors), {
  byPrefix:
    "A tuple of the cached tensors `<prefix>_0` … `<prefix>_{num_params-1}`; with -1, as many as are consecutively there (possibly none).",
  byName: "A tuple of the cached tensors named in the tuple (or array) `names`, in order.",
});

tensorCacheBuiltins.add(
  "vm.builtin.param_array_from_cache_by_name_unpacked",
  (...names: unknown[]) => new Tuple(byName(names, "param_array_from_cache_by_name_unpacked")),
  {
    signature: "(name_0, name_1, …) → tuple of tensors",
    summary: "As `param_array_from_cache_by_name`, with the names as arguments.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (an argument not a string), `ReferenceError` (missing).",
    tvm: "vm.builtin.param_array_from_cache_by_name_unpacked",
  },
);

addParamForm("param_module_from_cache", "ParamModule", (tensors) => new ParamModule(tensors), {
  byPrefix:
    "A `ParamModule` whose `get_params()` returns the tensors `param_array_from_cache` would return now (later cache changes do not reach it).",
  byName: "A `ParamModule` of the tensors named in `names`.",
});
