/**
 * The tvmjs tensor cache format (TVM `python/tvm/contrib/tvmjs.py`,
 * `web/src/runtime.ts`): a JSON index and the shard files it names.
 *
 * ```text
 * tensor-cache.json (older caches: ndarray-cache.json)
 *   { "metadata": {…},
 *     "records": [                          one entry per shard file
 *       { "dataPath": "params_shard_0.bin", relative to the JSON
 *         "format": "raw-shard",            the only shard format
 *         "nbytes": 412,                    the shard file's exact length
 *         "records": [                      the tensors in the shard
 *           { "name": "x_0", "shape": [3], "dtype": "int32",
 *             "format": "raw",              or "f32-to-bf16"
 *             "nbytes": 12, "byteOffset": 0 } ] } ] }
 * ```
 *
 * Records are packed back to back without alignment (a `byteOffset` may be
 * odd), so bytes are copied out of a shard, never viewed in place as wider
 * elements. `f32-to-bf16` means a float32 tensor stored as bfloat16 bits (2
 * bytes per element, widened on load); for any other dtype it means raw
 * bytes, as tvmjs's writer labels every record with the format it was asked
 * for. This module validates an index and a shard and decodes a record; it
 * does no I/O.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../../ground/brand.ts";
import { type TensorDType, tensorDType } from "../../ground/dtype.ts";
import { elementBytes } from "../../ground/dtype.ts";
import { bfloat16BitsToFloat32 } from "../../ground/float_formats.ts";
import { cut, MAX_NAME_CHARS, MAX_REASON_CHARS } from "../../ground/printable.ts";

/** One tensor in a shard. */
export interface TensorCacheRecord {
  /** The tensor's name, unique in the cache. */
  readonly name: string;
  /** Its shape (`[]` for a scalar). */
  readonly shape: readonly number[];
  /** Its dtype, as TVM spells it. */
  readonly dtype: string;
  /** `"raw"`, or `"f32-to-bf16"`: a float32 tensor stored as bfloat16. */
  readonly format: "raw" | "f32-to-bf16";
  /** Bytes it takes in the shard. */
  readonly nbytes: number;
  /** Where it starts in the shard. */
  readonly byteOffset: number;
}

/** One shard file. */
export interface TensorCacheShard {
  /** The file, relative to the JSON index. */
  readonly dataPath: string;
  /** Always `"raw-shard"`. */
  readonly format: "raw-shard";
  /** The file's exact length in bytes. */
  readonly nbytes: number;
  /** The tensors it holds. */
  readonly records: readonly TensorCacheRecord[];
  /** Written by TVM's Python writer; readers ignore it. */
  readonly md5sum?: string;
}

/** A tensor cache index (`tensor-cache.json`). */
export interface TensorCacheIndex {
  /** Whatever the producer stored; `{}` if nothing. */
  readonly metadata: Record<string, unknown>;
  /** The shards, in the order they were written. */
  readonly records: readonly TensorCacheShard[];
}

const TENSOR_CACHE_ERROR_BRAND = brandKey("TensorCacheError");

/**
 * A tensor cache that cannot be read: malformed JSON, a missing or bad
 * field, a shard of the wrong length, records outside their shard or
 * overlapping, a name used twice. Names the file and, where one is at fault,
 * the record.
 *
 * @example
 * ```ts
 * import { loadTensorCache, TensorCacheError } from "@relaxvm/relaxvm";
 * import { assertEquals, assertRejects } from "@std/assert";
 *
 * const dir = await Deno.makeTempDir();
 * await Deno.writeTextFile(`${dir}/tensor-cache.json`, "{ not json");
 * const e = await assertRejects(() => loadTensorCache(dir), TensorCacheError, "malformed JSON");
 * assertEquals(e.file.endsWith("tensor-cache.json"), true);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class TensorCacheError extends Error {
  static {
    brand(this, TENSOR_CACHE_ERROR_BRAND);
  }

  /**
   * True for a `TensorCacheError` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is TensorCacheError {
    return typeof v === "object" && v !== null && (v as Branded)[TENSOR_CACHE_ERROR_BRAND] === true;
  }

  /** The file (JSON index or shard) at fault. */
  readonly file: string;
  /** The record at fault, if one is. */
  readonly record: string | undefined;

  /** Builds the error; the message names the file and the record. */
  constructor(file: string, record: string | undefined, reason: string, options?: ErrorOptions) {
    // The index chooses the names, the paths and what a reason quotes: each is bounded.
    super(
      `Cannot load tensor cache: ${cut(file, MAX_NAME_CHARS)}${
        record === undefined ? "" : `, record ${cut(JSON.stringify(record), MAX_NAME_CHARS)}`
      }: ${cut(reason, MAX_REASON_CHARS)}`,
      options,
    );
    this.name = "TensorCacheError";
    this.file = file;
    this.record = record;
  }
}

const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

function fieldOf<T>(
  object: Record<string, unknown>,
  key: string,
  ok: (v: unknown) => v is T,
  what: string,
  fail: (reason: string) => never,
): T {
  const v = object[key];
  if (!ok(v)) fail(`"${key}" must be ${what}, got ${JSON.stringify(v) ?? "nothing"}`);
  return v;
}

const isString = (v: unknown): v is string => typeof v === "string";
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const isArray = (v: unknown): v is unknown[] => Array.isArray(v);
const isShape = (v: unknown): v is number[] => Array.isArray(v) && v.every(isCount);

/** Bytes a record of `format` takes for a tensor of `dtype` and `count` elements. */
export function encodedBytes(format: string, dtype: TensorDType, count: number): number {
  return format === "f32-to-bf16" && dtype === "float32" ? 2 * count : count * elementBytes(dtype);
}

/**
 * Parses and validates an index: every field present and of the right kind,
 * every record's size consistent with its shape and dtype and inside its
 * shard, no two records of a shard overlapping, no name used twice.
 * `file` names the index in errors.
 */
export function parseTensorCacheIndex(text: string, file: string): TensorCacheIndex {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new TensorCacheError(file, undefined, `malformed JSON (${(e as Error).message})`, {
      cause: e,
    });
  }
  const fail = (reason: string, record?: string): never => {
    throw new TensorCacheError(file, record, reason);
  };
  if (!isObject(json)) fail("the index is not a JSON object");
  const top = json as Record<string, unknown>;
  const metadata = top.metadata === undefined ? {} : top.metadata;
  if (!isObject(metadata)) fail(`"metadata" must be an object`);
  const names = new Set<string>();
  const shards = fieldOf(top, "records", isArray, "an array of shards", fail).map((s, si) => {
    if (!isObject(s)) fail(`shard ${si} is not an object`);
    const shard = s as Record<string, unknown>;
    const dataPath = fieldOf(shard, "dataPath", isString, "a file name", fail);
    const shardFail = (reason: string, record?: string): never =>
      fail(`shard ${dataPath}: ${reason}`, record);
    const format = fieldOf(shard, "format", isString, "a string", shardFail);
    if (format !== "raw-shard") shardFail(`format "${format}" is not supported (only raw-shard)`);
    const nbytes = fieldOf(shard, "nbytes", isCount, "a byte count", shardFail);
    const records = fieldOf(shard, "records", isArray, "an array of records", shardFail).map(
      (r, ri) => parseRecord(r, ri, nbytes, shardFail),
    );
    for (const r of records) {
      if (names.has(r.name)) shardFail("the name is used by another record too", r.name);
      names.add(r.name);
    }
    checkOverlaps(records, shardFail);
    return { dataPath, format: "raw-shard" as const, nbytes, records };
  });
  return { metadata: metadata as Record<string, unknown>, records: shards };
}

function parseRecord(
  r: unknown,
  index: number,
  shardBytes: number,
  fail: (reason: string, record?: string) => never,
): TensorCacheRecord {
  if (!isObject(r)) fail(`record ${index} is not an object`);
  const rec = r as Record<string, unknown>;
  const name = fieldOf(rec, "name", isString, "a string", fail);
  const recordFail = (reason: string): never => fail(reason, name);
  const shape = fieldOf(rec, "shape", isShape, "a list of non-negative integers", recordFail);
  const dtypeText = fieldOf(rec, "dtype", isString, "a dtype", recordFail);
  const format = fieldOf(rec, "format", isString, "a string", recordFail);
  if (format !== "raw" && format !== "f32-to-bf16") {
    recordFail(`format "${format}" is not supported (raw or f32-to-bf16)`);
  }
  const nbytes = fieldOf(rec, "nbytes", isCount, "a byte count", recordFail);
  const byteOffset = fieldOf(rec, "byteOffset", isCount, "a byte offset", recordFail);
  let dtype: TensorDType;
  try {
    dtype = tensorDType(dtypeText);
  } catch (e) {
    return recordFail(`dtype "${dtypeText}" is not supported (${(e as Error).message})`);
  }
  const count = shape.reduce((a, b) => a * b, 1);
  const want = encodedBytes(format, dtype, count);
  if (nbytes !== want) {
    recordFail(
      `nbytes ${nbytes} does not match shape [${shape.join(", ")}] of ${dtype} (${want} bytes)`,
    );
  }
  if (byteOffset + nbytes > shardBytes) {
    recordFail(
      `bytes [${byteOffset}, ${byteOffset + nbytes}) exceed the shard's ${shardBytes} bytes`,
    );
  }
  return { name, shape, dtype, format: format as TensorCacheRecord["format"], nbytes, byteOffset };
}

function checkOverlaps(
  records: readonly TensorCacheRecord[],
  fail: (reason: string, record?: string) => never,
): void {
  const sorted = records.filter((r) => r.nbytes > 0).sort((a, b) => a.byteOffset - b.byteOffset);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1], r = sorted[i];
    if (r.byteOffset < prev.byteOffset + prev.nbytes) {
      fail(
        `bytes [${r.byteOffset}, ${r.byteOffset + r.nbytes}) overlap record ${
          JSON.stringify(prev.name)
        } at [${prev.byteOffset}, ${prev.byteOffset + prev.nbytes})`,
        r.name,
      );
    }
  }
}

/** Whether `record` is a float32 tensor stored as bfloat16 (2 bytes in the shard, 4 in the tensor). */
export function widensBf16(record: TensorCacheRecord): boolean {
  return record.format === "f32-to-bf16" && record.dtype === "float32";
}

/**
 * Widens the bfloat16 bits in `bytes` (little-endian pairs, at any byte
 * offset) into `out[0 .. bytes.length / 2)`: a record's bytes, whole or a
 * piece of an even number of bytes.
 */
export function widenBf16Into(bytes: Uint8Array, out: Float32Array): void {
  const n = bytes.length >> 1;
  for (let i = 0; i < n; i++) {
    out[i] = bfloat16BitsToFloat32(bytes[2 * i] | (bytes[2 * i + 1] << 8));
  }
}
