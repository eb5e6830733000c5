/**
 * Reading a shard straight into its tensors: the shard's bytes arrive piece
 * by piece (a stream's chunks, or a loader's bytes viewed in place) and each
 * record's range goes to its tensor as it passes, in pieces of at most
 * `LOAD_CHUNK_BYTES`, so a load never holds a whole shard: only the tensors,
 * the piece of the stream not consumed yet, and a staging buffer of at most
 * `LOAD_CHUNK_BYTES` (bytes that straddle two stream chunks are gathered
 * there; bfloat16 records are widened through a second one). A WebGPU
 * device uploads each piece as it comes (`writeBlock`).
 *
 * @module
 */

import type { Device } from "../../devices/device.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import type { BoundedSource } from "./cache_access.ts";
import {
  TensorCacheError,
  type TensorCacheRecord,
  widenBf16Into,
  widensBf16,
} from "./cache_format.ts";

/** The largest piece a load stages or writes at once: 1 MiB. */
export const LOAD_CHUNK_BYTES = 2 ** 20;

/**
 * The buffer a fetched shard (a byte stream) is read into, reused from read
 * to read: 64 KiB, what Deno's file reads deliver at a time. Like a
 * stream's chunk, it is not counted against `maxMemoryBytes`.
 */
export const READ_BUFFER_BYTES = 65536;

const EMPTY = new Uint8Array(0);

/**
 * The staging a load of `records` may need beyond its tensors: `raw` bytes
 * for pieces that straddle stream chunks, `wide` bytes for widened
 * bfloat16 pieces (0 if no record is bfloat16). Counted against a VM's
 * `maxMemoryBytes` for the whole load.
 */
export function stagingFor(records: Iterable<TensorCacheRecord>): { raw: number; wide: number } {
  let raw = 0, wide = 0;
  for (const r of records) {
    raw = Math.max(raw, Math.min(LOAD_CHUNK_BYTES, r.nbytes));
    if (widensBf16(r)) wide = Math.max(wide, Math.min(LOAD_CHUNK_BYTES, 2 * r.nbytes));
  }
  return { raw, wide };
}

/** The staging buffers of one load, made when first needed. */
export class Staging {
  readonly rawBytes: number;
  readonly wideBytes: number;
  #raw: Uint8Array | null = null;
  #wide: Float32Array | null = null;
  #unsubmitted = 0;

  /** Buffers of at most these sizes (`stagingFor`). */
  constructor(sizes: { raw: number; wide: number }) {
    this.rawBytes = sizes.raw;
    this.wideBytes = sizes.wide;
  }

  /** Where straddling pieces are gathered. */
  raw(): Uint8Array {
    return this.#raw ??= new Uint8Array(this.rawBytes);
  }

  /**
   * Counts `n` bytes written to `device`; every `LOAD_CHUNK_BYTES` lets the
   * device free its staging for them (WebGPU holds each `writeBuffer`'s copy
   * until a submit), so a load's uploads hold about one piece there.
   */
  uploaded(device: Device, n: number): void {
    this.#unsubmitted += n;
    if (this.#unsubmitted < LOAD_CHUNK_BYTES) return;
    this.#unsubmitted = 0;
    device.submitStagedWrites?.(); // absent on a device of an older copy of relaxvm
  }

  /** Where bfloat16 pieces are widened to float32. */
  wide(): Float32Array {
    return this.#wide ??= new Float32Array(this.wideBytes / 4);
  }
}

/** A shard read front to back, checked against the length its index declares. */
export class ShardReader {
  readonly #source: BoundedSource;
  readonly #url: URL;
  readonly #nbytes: number;
  #chunk: Uint8Array = EMPTY;
  #at = 0;

  /** Reads `source`, the shard at `url`, whose index says it is `nbytes` long. */
  constructor(source: BoundedSource, url: URL, nbytes: number) {
    this.#source = source;
    this.#url = url;
    this.#nbytes = nbytes;
  }

  /** Makes the current chunk non-empty; false at the end of the file. */
  async #more(): Promise<boolean> {
    while (this.#at >= this.#chunk.length) {
      const next = await this.#source.read();
      if (next === null) {
        this.#chunk = EMPTY;
        this.#at = 0;
        return false;
      }
      this.#chunk = next;
      this.#at = 0;
    }
    return true;
  }

  #short(): TensorCacheError {
    return new TensorCacheError(
      this.#url.href,
      undefined,
      `the shard is ${this.#source.bytesRead} bytes, the index says ${this.#nbytes} (an interrupted download?)`,
    );
  }

  /**
   * The next `n` bytes (at most `staging.length`): a view of the source's
   * chunk when they lie in one, else gathered into `staging`. Valid until
   * the next call.
   */
  async take(n: number, staging: () => Uint8Array): Promise<Uint8Array> {
    if (n === 0) return EMPTY;
    if (!(await this.#more())) throw this.#short();
    if (this.#chunk.length - this.#at >= n) {
      const view = this.#chunk.subarray(this.#at, this.#at + n);
      this.#at += n;
      return view;
    }
    const into = staging();
    let filled = 0;
    while (filled < n) {
      if (!(await this.#more())) throw this.#short();
      const k = Math.min(n - filled, this.#chunk.length - this.#at);
      into.set(this.#chunk.subarray(this.#at, this.#at + k), filled);
      this.#at += k;
      filled += k;
    }
    return into.subarray(0, n);
  }

  /** Passes over `n` bytes (a gap between records, the tail after the last). */
  async skip(n: number): Promise<void> {
    while (n > 0) {
      if (!(await this.#more())) throw this.#short();
      const k = Math.min(n, this.#chunk.length - this.#at);
      this.#at += k;
      n -= k;
    }
  }

  /** Checks that the shard ends here (the source refuses more than the index declares). */
  async end(): Promise<void> {
    if (await this.#more()) {
      throw new TensorCacheError(
        this.#url.href,
        undefined,
        `the file is longer than the ${this.#nbytes} bytes the index says`,
      );
    }
  }
}

/**
 * Reads `record`'s bytes (the reader stands at its first byte) into `out`,
 * a tensor of its size on `device`, a piece of at most `LOAD_CHUNK_BYTES` at
 * a time: raw bytes as they are, bfloat16 widened to float32. `live` is
 * called right before each write and throws if the load was stopped (its
 * tensors are released then: nothing may be written into their blocks).
 */
export async function readRecordInto(
  reader: ShardReader,
  record: TensorCacheRecord,
  out: NDArray,
  device: Device,
  staging: Staging,
  live: () => void,
): Promise<void> {
  let written = 0, left = record.nbytes;
  if (widensBf16(record)) {
    const wide = staging.wide();
    const step = staging.wideBytes / 2; // raw bytes per piece: even, as wideBytes is a multiple of 4
    while (left > 0) {
      const n = Math.min(left, step);
      const raw = await reader.take(n, () => staging.raw());
      live();
      widenBf16Into(raw, wide);
      device.writeBlock(out.block, written, new Uint8Array(wide.buffer, 0, 2 * n));
      written += 2 * n;
      left -= n;
      staging.uploaded(device, 2 * n);
    }
    return;
  }
  while (left > 0) {
    const n = Math.min(left, staging.rawBytes);
    const piece = await reader.take(n, () => staging.raw());
    live();
    device.writeBlock(out.block, written, piece);
    written += n;
    left -= n;
    staging.uploaded(device, n);
  }
}
