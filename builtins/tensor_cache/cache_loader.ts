/**
 * `loadTensorCache`: reads a tvmjs tensor cache (a directory or URL holding
 * `tensor-cache.json` and its shards) into a `TensorCache` (by default the
 * process-wide `TensorCache.host`), with `fetch` for every read: `https:` in
 * browsers and Deno, `file:` and plain paths in Deno. `loadTensorCacheFor`
 * is the same load made for a program (`vm.builtin.tensor_cache.load`):
 * only from what its VM grants, counted against its memory limit, stopped
 * with its call (builtins/tensor_cache/cache_access.ts).
 *
 * Loading is all or nothing: the index is validated first, each shard is
 * streamed into its tensors and checked against the index as it arrives
 * (builtins/tensor_cache/cache_shard_reader.ts: no shard is ever held
 * whole), and the tensors enter the cache only once every shard has loaded;
 * on any failure, or when the call stops, the tensors made so far are
 * released at once and the cache is unchanged. Names already cached are
 * replaced, as TVM's native loader does. Each tensor takes exactly its
 * bytes (`Allocator.allocExactBlock`): a weight keeps its block for life.
 *
 * @module
 */

import { cpu } from "../../devices/cpu_device.ts";
import type { Device } from "../../devices/device.ts";
import type { Allocator, MemoryLimit } from "../../devices/allocator.ts";
import { defaultAllocator } from "../../devices/allocation_context.ts";
import { NDArray, shapeSize } from "../../devices/ndarray.ts";
import { TensorCache, type TensorCacheRoot } from "../../devices/tensor_cache.ts";
import { elementBytes, type TensorDType } from "../../ground/dtype.ts";
import { hasScheme, pathOutside } from "../../ground/contained_path.ts";
import { asDirectory, resolveLocation } from "./cache_files.ts";
import { MAX_INDEX_BYTES, openGranted, readGranted, refused } from "./cache_access.ts";
import {
  parseTensorCacheIndex,
  TensorCacheError,
  type TensorCacheIndex,
  type TensorCacheRecord,
  type TensorCacheShard,
} from "./cache_format.ts";
import {
  READ_BUFFER_BYTES,
  readRecordInto,
  ShardReader,
  Staging,
  stagingFor,
} from "./cache_shard_reader.ts";

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
  /** Cancels the fetches; an aborted load caches nothing. */
  signal?: AbortSignal;
  /** The cache the tensors go into; default `TensorCache.host` (a VM's: `vm.tensorCache`). */
  cache?: TensorCache;
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

/** How a load made for a program is confined (`loadTensorCacheFor`). */
export interface ProgramLoad {
  /** What the program's VM grants (`tensorCacheRoots`). */
  roots: readonly TensorCacheRoot[];
  /** Where the tensors' memory comes from: the VM's allocators. */
  allocator: (device: Device) => Allocator;
  /** The VM's memory limit, checked against the index before any shard is read. */
  limit: MemoryLimit;
  /** Aborts when the program's call stops or ends. */
  callSignal: AbortSignal | undefined;
}

const INDEX_NAMES = ["tensor-cache.json", "ndarray-cache.json"];

/**
 * The index: `location` itself if it names a `.json` file or cannot be a
 * directory (a `blob:` or `data:` URL, whose path is opaque), else the first
 * index name found in it.
 */
async function fetchIndex(
  location: URL,
  written: string,
  roots: readonly TensorCacheRoot[] | null,
  signal?: AbortSignal,
): Promise<{ url: URL; index: TensorCacheIndex }> {
  const isFile = location.pathname.endsWith(".json") ||
    !URL.canParse(INDEX_NAMES[0], asDirectory(location));
  const candidates = isFile
    ? [location]
    : INDEX_NAMES.map((n) => new URL(n, asDirectory(location)));
  const failures: TensorCacheError[] = [];
  for (const url of candidates) {
    let bytes: Uint8Array;
    try {
      bytes = await readGranted(roots, url, written, "the location", MAX_INDEX_BYTES, signal);
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

/** Bytes the tensor of `record` takes: its elements, exactly (`Allocator.allocExactBlock`). */
function tensorBytes(record: TensorCacheRecord): number {
  return shapeSize(record.shape) * elementBytes(record.dtype as TensorDType);
}

/** A tensor for `record` on `device`, from `allocator`, of its exact size (a weight lives long). */
function tensorFor(record: TensorCacheRecord, allocator: Allocator): NDArray {
  // An allocator or device of an older copy of relaxvm in the process (ground/shared.ts) may
  // lack the newer methods: then the pool's block, and no early submit.
  const block = allocator.allocExactBlock?.(tensorBytes(record)) ??
    allocator.allocBlock(tensorBytes(record));
  return new NDArray(block, 0, record.shape, record.dtype as TensorDType);
}

/**
 * What a load holds until it ends: the tensors it made (not cached yet) and
 * the staging it charged. A stop (the call's timeout or signal) gives all
 * of it back at once, from the abort itself: the call's caller finds the
 * VM's memory as it was even while a read the load waits on is pending,
 * and nothing is written or allocated for the load afterwards (`live`).
 */
class Holdings {
  readonly #made: NDArray[] = [];
  readonly #signal: AbortSignal | undefined;
  readonly #giveBack: () => void;
  #over = false;
  readonly #onAbort = () => this.release();

  /** Holdings of a load watching `signal`; `giveBack` returns its staging charge. */
  constructor(signal: AbortSignal | undefined, giveBack: () => void) {
    this.#signal = signal;
    this.#giveBack = giveBack;
    signal?.addEventListener("abort", this.#onAbort);
    if (signal?.aborted) this.release();
  }

  /** Throws if the load was stopped: called right before each allocation and write. */
  live(): void {
    if (!this.#over) return;
    this.#signal?.throwIfAborted();
    throw new Error("tensor_cache.load: the load has ended");
  }

  /** A tensor made for the load. */
  add(t: NDArray): NDArray {
    this.#made.push(t);
    return t;
  }

  /** Releases every tensor made and the staging (once). */
  release(): void {
    if (this.#over) return;
    this.#over = true;
    this.#signal?.removeEventListener("abort", this.#onAbort);
    for (const t of this.#made) t.releaseIfUnowned();
    this.#giveBack();
  }

  /** The load succeeded: its tensors are the cache's now; the staging is given back. */
  keep(): void {
    this.live();
    this.#over = true;
    this.#signal?.removeEventListener("abort", this.#onAbort);
    this.#giveBack();
  }
}

/**
 * Where `shard` is, next to the index at `indexUrl`. For a program's load
 * (`roots` not null) a `dataPath` that is a path, not a URL, must name a
 * file beside the index by the one rule of ground/contained_path.ts
 * (`%2e%2e/x` and `..\x` as `../x`); a URL must be granted, which
 * `openGranted` checks. Refused naming the `dataPath` as written.
 */
function shardUrl(
  shard: TensorCacheShard,
  indexUrl: URL,
  roots: readonly TensorCacheRoot[] | null,
): URL {
  if (roots !== null && !hasScheme(shard.dataPath) && pathOutside(shard.dataPath) !== null) {
    throw refused(shard.dataPath, "shard");
  }
  try {
    return new URL(shard.dataPath, indexUrl);
  } catch {
    throw refused(shard.dataPath, "shard");
  }
}

/**
 * Reads one shard into new tensors, front to back: each record's bytes go
 * into its tensor as they arrive (cache_shard_reader.ts), so no more of the
 * shard is held than a piece. Pushes the tensors onto `loaded` in index
 * order once all are read; `held` releases them on failure.
 */
async function loadShard(
  shard: TensorCacheShard,
  shardUrl: URL,
  roots: readonly TensorCacheRoot[] | null,
  device: Device,
  allocator: Allocator,
  staging: Staging,
  held: Holdings,
  loaded: [string, NDArray][],
  signal: AbortSignal | undefined,
): Promise<void> {
  const source = await openGranted(
    roots,
    shardUrl,
    shard.dataPath,
    "shard",
    shard.nbytes,
    signal,
    READ_BUFFER_BYTES,
  );
  const made = new Map<TensorCacheRecord, NDArray>();
  try {
    const reader = new ShardReader(source, shardUrl, shard.nbytes);
    let at = 0;
    for (const record of [...shard.records].sort((a, b) => a.byteOffset - b.byteOffset)) {
      await reader.skip(record.byteOffset - at);
      held.live();
      const out = held.add(tensorFor(record, allocator));
      made.set(record, out);
      await readRecordInto(reader, record, out, device, staging, () => held.live());
      at = record.byteOffset + record.nbytes;
    }
    // Read to the end: a shorter or longer file than the index says is refused.
    await reader.skip(shard.nbytes - at);
    await reader.end();
  } finally {
    await source.cancel();
  }
  // Weights: the CPU kernels may keep a copy of each until someone can write it (NDArray.seal).
  for (const record of shard.records) loaded.push([record.name, made.get(record)!.seal()]);
}

/**
 * Loads a tvmjs tensor cache into `options.cache`: by default the
 * process-wide `TensorCache.host` (what the builtins see when called outside
 * any VM, and what VMs given `{ tensorCache: TensorCache.host }` share), or a
 * VM's own (`vm.tensorCache`), where its programs find it with
 * `vm.builtin.tensor_cache.get` and `vm.builtin.param_array_from_cache`. The
 * host's load reads whatever the process may; a program's load
 * (`vm.builtin.tensor_cache.load`) only what its VM grants. `pathOrUrl` is a directory holding
 * `tensor-cache.json` (or an older cache's `ndarray-cache.json`), or the
 * JSON file itself; a URL or, in Deno, a path. A `blob:` or `data:` URL is
 * always the JSON file (its shards' `dataPath`s are then absolute URLs, such
 * as other `blob:` URLs: a cache held in memory). Shards are fetched one
 * after another, each streamed into tensors on `options.device` in pieces
 * of at most 1 MiB, so a load holds its tensors and about 1 MiB more.
 *
 * Rejects with `TensorCacheError` (naming the file and the record) when the
 * index is malformed or larger than 64 MiB, a record does not match its
 * shape and dtype or lies outside its shard or over another record, a name
 * is used twice, a shard is missing or of another length than the index says
 * (a longer one is read no further than that). Nothing is cached then, nor
 * when `signal` aborts.
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
export function loadTensorCache(
  pathOrUrl: string | URL,
  options: LoadTensorCacheOptions = {},
): Promise<LoadedTensorCache> {
  return load(pathOrUrl, options, null);
}

/**
 * `loadTensorCache` for a program (`vm.builtin.tensor_cache.load`): only
 * what `program.roots` grant is read (else an error naming the location as
 * written, before any read), the tensors' memory comes from the VM and must
 * fit its limit, and the load stops with the program's call.
 */
export function loadTensorCacheFor(
  location: string,
  options: LoadTensorCacheOptions,
  program: ProgramLoad,
): Promise<LoadedTensorCache> {
  return load(location, options, program);
}

async function load(
  pathOrUrl: string | URL,
  options: LoadTensorCacheOptions,
  program: ProgramLoad | null,
): Promise<LoadedTensorCache> {
  const device = options.device ?? cpu();
  const cache = options.cache ?? TensorCache.host;
  const allocator = program === null ? defaultAllocator(device) : program.allocator(device);
  const signals = [options.signal, program?.callSignal].filter((s) => s !== undefined);
  const signal = signals.length < 2 ? signals[0] : AbortSignal.any(signals);
  const written = String(pathOrUrl);
  const started = performance.now();
  let location: URL;
  try {
    location = resolveLocation(pathOrUrl);
  } catch (e) {
    if (program === null) throw e;
    throw refused(written, "the location");
  }
  const roots = program?.roots ?? null;
  const { url, index } = await fetchIndex(
    location,
    written,
    roots,
    signal,
  );
  const totalBytes = index.records.reduce((n, s) => n + s.nbytes, 0);
  const records = index.records.flatMap((s) => s.records);
  const staging = new Staging(stagingFor(records));
  const stagingBytes = staging.rawBytes + staging.wideBytes;
  if (program !== null) {
    // Refused before any shard is read when the tensors and the staging cannot fit.
    const needed = records.reduce((n, r) => n + Math.max(4, Math.ceil(tensorBytes(r) / 4) * 4), 0);
    const { heldBytes, maxBytes } = program.limit;
    // What a program makes its host read is bounded by its limit too, though no shard is held.
    if (heldBytes + totalBytes > maxBytes) {
      throw new TensorCacheError(
        url.href,
        undefined,
        `its ${totalBytes} bytes of shards would pass the VM's memory limit of ${maxBytes} bytes (maxMemoryBytes), with ${heldBytes} bytes in use`,
      );
    }
    if (heldBytes + needed + stagingBytes > maxBytes) {
      throw new TensorCacheError(
        url.href,
        undefined,
        `its tensors' ${needed} bytes and ${stagingBytes} bytes of staging would pass the VM's memory limit of ${maxBytes} bytes (maxMemoryBytes), with ${heldBytes} bytes in use`,
      );
    }
  }
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
  // The staging is the load's only memory beyond its tensors: counted while it runs.
  program?.limit.take(stagingBytes, cpu(), stagingBytes);
  const held = new Holdings(signal, () => program?.limit.give(stagingBytes));
  const loaded = await loadShards(
    index,
    url,
    { roots, device, allocator, staging, held, signal },
    (i, shard) => {
      loadedBytes += shard.nbytes;
      report(i + 1);
    },
  );
  for (const [name, t] of loaded) cache.update(name, t, true);
  return { url, names: loaded.map(([name]) => name), metadata: index.metadata };
}

/** Where a load's shards come from and where their tensors go. */
interface ShardTarget {
  /** What may be read (null: anything the process may). */
  roots: readonly TensorCacheRoot[] | null;
  device: Device;
  allocator: Allocator;
  staging: Staging;
  held: Holdings;
  signal: AbortSignal | undefined;
}

/**
 * Every shard of `index` (beside `url`) read into new tensors, all or
 * nothing: on failure, or when `target.signal` aborts, `target.held` gives
 * back everything made; on success the tensors are the caller's.
 * `onShard` runs after each shard.
 */
async function loadShards(
  index: TensorCacheIndex,
  url: URL,
  target: ShardTarget,
  onShard: (i: number, shard: TensorCacheShard) => void,
): Promise<[string, NDArray][]> {
  const { roots, device, allocator, staging, held, signal } = target;
  const loaded: [string, NDArray][] = [];
  try {
    held.live();
    const shardUrls = index.records.map((shard) => shardUrl(shard, url, roots));
    for (const [i, shard] of index.records.entries()) {
      await loadShard(shard, shardUrls[i], roots, device, allocator, staging, held, loaded, signal);
      onShard(i, shard);
    }
    // A load whose call stopped while it read caches nothing.
    signal?.throwIfAborted();
    held.keep();
  } catch (e) {
    held.release();
    throw e;
  } finally {
    device.submitStagedWrites?.();
  }
  return loaded;
}

/**
 * The tensors of an index the caller has read and checked itself, on the
 * CPU device, by the same streaming read as `loadTensorCache` (each shard
 * checked against the index as it arrives, all or nothing): for a host's
 * own loader of a format whose weights are a tensor cache, such as a TVM
 * package's `params/` (tvm/package_files.ts). Shards are read beside `url`
 * from what `roots` grant; the caller owns the tensors (sealed, as every
 * loaded weight is) and disposes them.
 */
export async function loadIndexedTensors(
  index: TensorCacheIndex,
  url: URL,
  roots: readonly TensorCacheRoot[],
  signal?: AbortSignal,
): Promise<[string, NDArray][]> {
  const device = cpu();
  const staging = new Staging(stagingFor(index.records.flatMap((s) => s.records)));
  const held = new Holdings(signal, () => {});
  return await loadShards(
    index,
    url,
    { roots, device, allocator: defaultAllocator(device), staging, held, signal },
    () => {},
  );
}
