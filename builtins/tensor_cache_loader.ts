/**
 * `loadTensorCache`: reads a tvmjs tensor cache (a directory or URL holding
 * `tensor-cache.json` and its shards) into the process-wide tensor cache,
 * with `fetch` for every read: `https:` in browsers and Deno, `file:` and
 * plain paths in Deno.
 *
 * Loading is all or nothing: the index is validated first, each shard is
 * checked against the index when it arrives, and the tensors enter the
 * cache only once every shard has loaded; on any failure the tensors made
 * so far are released and the cache is unchanged. Names already cached are
 * replaced, as TVM's native loader does.
 *
 * @module
 */

import { cpu } from "../devices/cpu_device.ts";
import type { Device } from "../devices/device.ts";
import { defaultAllocator } from "../devices/allocation_context.ts";
import { NDArray, shapeSize } from "../devices/ndarray.ts";
import { elementBytes, type TensorDType } from "../ground/dtype.ts";
import { cacheUpdate } from "./tensor_cache_store.ts";
import { asDirectory, resolveLocation } from "./tensor_cache_files.ts";
import {
  decodeRecord,
  parseTensorCacheIndex,
  recordBytes,
  TensorCacheError,
  type TensorCacheIndex,
  type TensorCacheRecord,
} from "./tensor_cache_format.ts";

/** What `onProgress` receives, after the index and after each shard (tvmjs's fields and more). */
export interface TensorCacheProgress {
  /** Fraction of the shard bytes loaded, 0 to 1. */
  progress: number;
  /** Seconds since loading started, rounded up. */
  timeElapsed: number;
  /** A line for people: `Loading tensor cache[2/5]: 64MB loaded. 40% completed, 3 secs elapsed.` */
  text: string;
  /** Shard bytes loaded so far. */
  loadedBytes: number;
  /** Shard bytes in the whole cache. */
  totalBytes: number;
  /** Shards loaded so far. */
  shardsLoaded: number;
  /** Shards in the cache. */
  shards: number;
}

/** Options of `loadTensorCache`. */
export interface LoadTensorCacheOptions {
  /** Where the tensors go; default `cpu()`. */
  device?: Device;
  /** Called at the start and after each shard. */
  onProgress?: (progress: TensorCacheProgress) => void;
  /** Cancels the fetches. */
  signal?: AbortSignal;
}

/** What `loadTensorCache` resolves to. */
export interface LoadedTensorCache {
  /** The index file that was read. */
  url: URL;
  /** The names now in the tensor cache, in index order. */
  names: string[];
  /** The index's `metadata`. */
  metadata: Record<string, unknown>;
}

const INDEX_NAMES = ["tensor-cache.json", "ndarray-cache.json"];

async function fetchBytes(url: URL, signal?: AbortSignal): Promise<ArrayBuffer> {
  let response: Response;
  try {
    response = await fetch(url, { signal });
  } catch (e) {
    throw new TensorCacheError(url.href, undefined, `cannot fetch it (${e})`, { cause: e });
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw new TensorCacheError(
      url.href,
      undefined,
      `HTTP ${response.status} ${response.statusText}`,
    );
  }
  return await response.arrayBuffer();
}

/**
 * The index: `location` itself if it names a `.json` file or cannot be a
 * directory (a `blob:` or `data:` URL, whose path is opaque), else the first
 * index name found in it.
 */
async function fetchIndex(
  location: URL,
  signal?: AbortSignal,
): Promise<{ url: URL; index: TensorCacheIndex }> {
  const isFile = location.pathname.endsWith(".json") ||
    !URL.canParse(INDEX_NAMES[0], asDirectory(location));
  const candidates = isFile
    ? [location]
    : INDEX_NAMES.map((n) => new URL(n, asDirectory(location)));
  const failures: TensorCacheError[] = [];
  for (const url of candidates) {
    let bytes: ArrayBuffer;
    try {
      bytes = await fetchBytes(url, signal);
    } catch (e) {
      if (signal?.aborted || !(e instanceof TensorCacheError)) throw e;
      failures.push(e);
      continue;
    }
    return { url, index: parseTensorCacheIndex(new TextDecoder().decode(bytes), url.href) };
  }
  throw new TensorCacheError(
    location.href,
    undefined,
    `no index found (${failures.map((f) => f.message).join("; ")})`,
  );
}

/** A tensor for `record` on `device`, from the allocator outside any VM: the cache outlives VMs. */
function tensorFor(record: TensorCacheRecord, bytes: Uint8Array, device: Device): NDArray {
  const dtype = record.dtype as TensorDType;
  const nbytes = shapeSize(record.shape) * elementBytes(dtype);
  const out = new NDArray(defaultAllocator(device).allocBlock(nbytes), 0, record.shape, dtype);
  device.writeBlock(out.block, 0, decodeRecord(bytes, record));
  // A weight: the CPU kernels may keep a copy of it until someone can write it (NDArray.seal).
  return out.seal();
}

/**
 * Loads a tvmjs tensor cache into the process-wide tensor cache, where
 * programs find it with `vm.builtin.tensor_cache.get` and
 * `vm.builtin.param_array_from_cache`. `pathOrUrl` is a directory holding
 * `tensor-cache.json` (or an older cache's `ndarray-cache.json`), or the
 * JSON file itself; a URL or, in Deno, a path. A `blob:` or `data:` URL is
 * always the JSON file (its shards' `dataPath`s are then absolute URLs, such
 * as other `blob:` URLs: a cache held in memory). Shards are fetched one
 * after another, each decoded into tensors on `options.device`.
 *
 * Rejects with `TensorCacheError` (naming the file and the record) when the
 * index is malformed, a record does not match its shape and dtype or lies
 * outside its shard or over another record, a name is used twice, a shard
 * is missing or of another length than the index says. Nothing is cached
 * then.
 *
 * @example Write a cache, load it, read a tensor back
 * ```ts
 * import { dumpTensorCache, getGlobalFunc, loadTensorCache, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const dir = await Deno.makeTempDir();
 * using w = tensor([1, 2, 3], { dtype: "int32" });
 * await dumpTensorCache({ w_0: w }, dir);
 * const seen: number[] = [];
 * const { names } = await loadTensorCache(dir, { onProgress: (p) => seen.push(p.progress) });
 * assertEquals([names, seen], [["w_0"], [0, 1]]);
 * const loaded = getGlobalFunc("vm.builtin.tensor_cache.get")!("w_0") as NDArray;
 * assertEquals([...loaded.dataSync()], [1, 2, 3]);
 * getGlobalFunc("vm.builtin.tensor_cache.clear")!();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function loadTensorCache(
  pathOrUrl: string | URL,
  options: LoadTensorCacheOptions = {},
): Promise<LoadedTensorCache> {
  const device = options.device ?? cpu();
  const started = performance.now();
  const { url, index } = await fetchIndex(resolveLocation(pathOrUrl), options.signal);
  const totalBytes = index.records.reduce((n, s) => n + s.nbytes, 0);
  let loadedBytes = 0;
  const report = (shardsLoaded: number) => {
    if (options.onProgress === undefined) return;
    const progress = totalBytes === 0 ? 1 : loadedBytes / totalBytes;
    const timeElapsed = Math.ceil((performance.now() - started) / 1000);
    options.onProgress({
      progress,
      timeElapsed,
      text: `Loading tensor cache[${shardsLoaded}/${index.records.length}]: ${
        Math.ceil(loadedBytes / 2 ** 20)
      }MB loaded. ${Math.floor(progress * 100)}% completed, ${timeElapsed} secs elapsed.`,
      loadedBytes,
      totalBytes,
      shardsLoaded,
      shards: index.records.length,
    });
  };
  report(0);
  const loaded: [string, NDArray][] = [];
  try {
    for (const [i, shard] of index.records.entries()) {
      const shardUrl = new URL(shard.dataPath, url);
      const bytes = new Uint8Array(await fetchBytes(shardUrl, options.signal));
      if (bytes.length !== shard.nbytes) {
        throw new TensorCacheError(
          shardUrl.href,
          undefined,
          `the shard is ${bytes.length} bytes, the index says ${shard.nbytes} (an interrupted download?)`,
        );
      }
      for (const record of shard.records) {
        loaded.push([record.name, tensorFor(record, recordBytes(bytes, record), device)]);
      }
      loadedBytes += shard.nbytes;
      report(i + 1);
    }
  } catch (e) {
    for (const [, t] of loaded) t.releaseIfUnowned();
    throw e;
  }
  for (const [name, t] of loaded) cacheUpdate(name, t, true);
  return { url, names: loaded.map(([name]) => name), metadata: index.metadata };
}
