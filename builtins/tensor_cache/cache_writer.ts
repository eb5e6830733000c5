/**
 * Writing tensor caches in the tvmjs format (builtins/tensor_cache/cache_format.ts),
 * so users can ship their own weights: `encodeTensorCache` makes the files
 * in memory (anywhere, browsers included); `dumpTensorCache` also writes
 * them to a directory (Deno). Shards are filled as TVM's
 * `tvmjs.dump_tensor_cache` fills them, so the same tensors give the same
 * shard layout.
 *
 * @module
 */

import { NDArray } from "../../devices/ndarray.ts";
import { float32ToBfloat16Bits } from "../../ground/float_formats.ts";
import { pathOutside } from "../../ground/contained_path.ts";
import { fetchWhole, MAX_INDEX_BYTES, readResponse, shownLocation } from "./cache_access.ts";
import { asDirectory, resolveLocation, writeFiles } from "./cache_files.ts";
import {
  parseTensorCacheIndex,
  TensorCacheError,
  type TensorCacheIndex,
  type TensorCacheRecord,
  type TensorCacheShard,
} from "./cache_format.ts";

/** The tensors to store: a record, a `Map`, or `[name, tensor]` pairs, in record order. */
export type TensorCacheParams =
  | Readonly<Record<string, NDArray>>
  | ReadonlyMap<string, NDArray>
  | Iterable<readonly [string, NDArray]>;

/** Options of `encodeTensorCache` and `dumpTensorCache`. */
export interface EncodeTensorCacheOptions {
  /**
   * `"raw"` (default): every tensor's bytes as they are. `"f32-to-bf16"`:
   * float32 tensors stored as bfloat16 (half the size, rounded; they load
   * as float32 again), other dtypes raw — TVM's default, chosen here only
   * when asked for because it loses precision.
   */
  encodeFormat?: "raw" | "f32-to-bf16";
  /** Shard size cap in MiB (default 32, as TVM). */
  shardCapMB?: number;
  /** Stored as the index's `metadata`. */
  metadata?: Record<string, unknown>;
}

/** An existing cache to add to (`updateIfExists`): its index and its shards' bytes. */
export interface ExistingTensorCache {
  /** The parsed `tensor-cache.json`. */
  index: TensorCacheIndex;
  /** Shard bytes by `dataPath`. */
  shards: ReadonlyMap<string, Uint8Array>;
}

/** A cache as files: what to write, by file name. */
export interface EncodedTensorCache {
  /** The index, as written to `tensor-cache.json`. */
  index: TensorCacheIndex;
  /**
   * Every file to write: `tensor-cache.json`, the new or changed shards and,
   * when float32 tensors were stored as bfloat16, `tensor-cache-b16.json`
   * (the same shards described as bfloat16 tensors).
   */
  files: Map<string, Uint8Array>;
}

function entriesOf(params: TensorCacheParams): Iterable<readonly [string, NDArray]> {
  if (params instanceof Map) return params.entries();
  if (Symbol.iterator in params) return params as Iterable<readonly [string, NDArray]>;
  return Object.entries(params as Record<string, NDArray>);
}

/** A tensor's bytes as stored in a record of `format` (raw: its own bytes, bfloat16 bits included). */
async function encodeTensor(t: NDArray, format: string): Promise<Uint8Array> {
  const raw = t.device.kind === "cpu"
    ? new Uint8Array(t.cpuView().buffer, t.cpuView().byteOffset, t.nbytes).slice()
    : await t.device.readBlock(t.block, t.byteOffset, t.nbytes);
  if (format === "f32-to-bf16" && t.dtype === "float32") {
    const values = new Float32Array(raw.buffer, raw.byteOffset, t.size);
    const out = new Uint16Array(values.length);
    for (let i = 0; i < values.length; i++) out[i] = float32ToBfloat16Bits(values[i]);
    return new Uint8Array(out.buffer);
  }
  return raw;
}

function concat(chunks: readonly Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/**
 * Encodes tensors as a tvmjs tensor cache, in memory. Shards are filled up
 * to `shardCapMB` as TVM fills them: a tensor that would overflow the open
 * shard starts a new one, and one of at least half the cap gets a shard of
 * its own at once. With `existing`, its records are kept, a name it already
 * has is rewritten in place (same size only), and new names go to new
 * shards (TVM's `update_if_exists`).
 *
 * @example
 * ```ts
 * import { encodeTensorCache, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * using a = tensor([1, 2, 3], { dtype: "int32" });
 * using b = tensor([0.5, 1.5]);
 * const { index, files } = await encodeTensorCache({ a, b });
 * assertEquals([...files.keys()], ["params_shard_0.bin", "tensor-cache.json"]);
 * assertEquals(index.records[0].records.map((r) => [r.name, r.byteOffset]), [["a", 0], ["b", 12]]);
 * ```
 */
export async function encodeTensorCache(
  params: TensorCacheParams,
  options: EncodeTensorCacheOptions & { existing?: ExistingTensorCache } = {},
): Promise<EncodedTensorCache> {
  const format = options.encodeFormat ?? "raw";
  if (format !== "raw" && format !== "f32-to-bf16") {
    throw new TypeError(`encodeTensorCache: encodeFormat must be "raw" or "f32-to-bf16"`);
  }
  const cap = (options.shardCapMB ?? 32) * 2 ** 20;
  if (!(cap > 0)) throw new RangeError("encodeTensorCache: shardCapMB must be positive");
  const existing = options.existing;
  const shards: TensorCacheShard[] = [...(existing?.index.records ?? [])];
  const files = new Map<string, Uint8Array>();
  const where = new Map<string, { shard: number; record: TensorCacheRecord }>();
  shards.forEach((s, shard) =>
    s.records.forEach((record) => where.set(record.name, { shard, record }))
  );
  let open: { records: TensorCacheRecord[]; chunks: Uint8Array[]; nbytes: number } = {
    records: [],
    chunks: [],
    nbytes: 0,
  };
  const commit = (records: TensorCacheRecord[], bytes: Uint8Array) => {
    const dataPath = `params_shard_${shards.length}.bin`;
    shards.push({ dataPath, format: "raw-shard", nbytes: bytes.length, records });
    files.set(dataPath, bytes);
  };
  const seen = new Set<string>();
  for (const [name, t] of entriesOf(params)) {
    if (!(t instanceof NDArray)) {
      throw new TypeError(`encodeTensorCache: "${name}" is not a tensor`);
    }
    if (seen.has(name)) throw new RangeError(`encodeTensorCache: duplicate name "${name}"`);
    seen.add(name);
    const bytes = await encodeTensor(t, format);
    const record = { name, shape: [...t.shape], dtype: t.dtype, format, nbytes: bytes.length };
    const old = where.get(name);
    if (old !== undefined) {
      rewriteInPlace(old, record, bytes, shards, files, existing!);
      continue;
    }
    if (open.nbytes + bytes.length >= cap) {
      if (2 * bytes.length >= cap) {
        commit([{ ...record, byteOffset: 0 }], bytes);
        continue;
      }
      if (open.records.length > 0) commit(open.records, concat(open.chunks, open.nbytes));
      open = { records: [], chunks: [], nbytes: 0 };
    }
    open.records.push({ ...record, byteOffset: open.nbytes });
    open.chunks.push(bytes);
    open.nbytes += bytes.length;
  }
  if (open.records.length > 0) commit(open.records, concat(open.chunks, open.nbytes));
  const index: TensorCacheIndex = {
    metadata: options.metadata ?? existing?.index.metadata ?? {},
    records: shards,
  };
  const text = (i: TensorCacheIndex) => new TextEncoder().encode(JSON.stringify(i, null, 4));
  files.set("tensor-cache.json", text(index));
  const bf16 = shards.some((s) =>
    s.records.some((r) => r.format === "f32-to-bf16" && r.dtype === "float32")
  );
  if (bf16) {
    files.set(
      "tensor-cache-b16.json",
      text({
        ...index,
        records: shards.map((s) => ({
          ...s,
          records: s.records.map((r) =>
            r.format === "f32-to-bf16" && r.dtype === "float32"
              ? { ...r, dtype: "bfloat16", format: "raw" as const }
              : r
          ),
        })),
      }),
    );
  }
  return { index, files };
}

/** Replaces an existing record's bytes inside its shard (TVM: same size only). */
function rewriteInPlace(
  old: { shard: number; record: TensorCacheRecord },
  record: Omit<TensorCacheRecord, "byteOffset">,
  bytes: Uint8Array,
  shards: TensorCacheShard[],
  files: Map<string, Uint8Array>,
  existing: ExistingTensorCache,
): void {
  if (bytes.length !== old.record.nbytes) {
    throw new RangeError(
      `encodeTensorCache: cannot update "${record.name}" in place: ${bytes.length} bytes, the cache has ${old.record.nbytes}`,
    );
  }
  const shard = shards[old.shard];
  let data = files.get(shard.dataPath);
  if (data === undefined) {
    const original = existing.shards.get(shard.dataPath);
    if (original === undefined || original.length !== shard.nbytes) {
      throw new RangeError(
        `encodeTensorCache: the existing shard ${shard.dataPath} is missing or not ${shard.nbytes} bytes`,
      );
    }
    data = original.slice();
    files.set(shard.dataPath, data);
  }
  data.set(bytes, old.record.byteOffset);
  shards[old.shard] = {
    ...shard,
    records: shard.records.map((r) =>
      r.name === record.name ? { ...record, byteOffset: r.byteOffset } : r
    ),
  };
}

/**
 * Writes tensors as a tvmjs tensor cache into directory `cacheDir` (created
 * if needed): `tensor-cache.json` and `params_shard_<k>.bin` files, which
 * `loadTensorCache` and TVM's web runtime read. With `updateIfExists`, a
 * cache already there is extended instead of replaced (see
 * `encodeTensorCache`). Needs Deno (`--allow-read --allow-write`); elsewhere
 * write the files `encodeTensorCache` returns. Resolves to the index.
 *
 * @example
 * ```ts
 * import { dumpTensorCache, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const dir = await Deno.makeTempDir();
 * using w = tensor([[1, 2], [3, 4]]);
 * const index = await dumpTensorCache({ "layer0.w": w }, dir, { encodeFormat: "f32-to-bf16" });
 * assertEquals(index.records[0].nbytes, 8); // 4 floats as bfloat16
 * const names: string[] = [];
 * for await (const e of Deno.readDir(dir)) names.push(e.name);
 * assertEquals(names.sort(), ["params_shard_0.bin", "tensor-cache-b16.json", "tensor-cache.json"]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function dumpTensorCache(
  params: TensorCacheParams,
  cacheDir: string | URL,
  options: EncodeTensorCacheOptions & { updateIfExists?: boolean } = {},
): Promise<TensorCacheIndex> {
  const dir = asDirectory(resolveLocation(cacheDir));
  const existing = options.updateIfExists ? await readExisting(dir) : undefined;
  const { index, files } = await encodeTensorCache(params, { ...options, existing });
  await writeFiles(dir, files);
  return index;
}

/** The cache in `dir`, if there is one. */
async function readExisting(dir: URL): Promise<ExistingTensorCache | undefined> {
  const indexUrl = new URL("tensor-cache.json", dir);
  let text: string;
  try {
    const response = await fetch(indexUrl);
    if (!response.ok) return undefined;
    text = new TextDecoder().decode(await readResponse(response, indexUrl, MAX_INDEX_BYTES));
  } catch {
    return undefined; // no cache yet
  }
  const index = parseTensorCacheIndex(text, indexUrl.href);
  // The shards are written back under their dataPaths: each must be a file of `dir` (the one
  // rule of ground/contained_path.ts), or an index found there would make this write elsewhere.
  for (const s of index.records) {
    const outside = pathOutside(s.dataPath);
    if (outside !== null) {
      throw new TensorCacheError(
        indexUrl.href,
        undefined,
        `the shard ${shownLocation(s.dataPath)} ${outside}: a shard must be a file of the cache`,
      );
    }
  }
  const shards = new Map<string, Uint8Array>();
  for (const s of index.records) {
    shards.set(
      s.dataPath,
      await fetchWhole(new URL(s.dataPath, dir), s.nbytes, "what the index says"),
    );
  }
  return { index, shards };
}
