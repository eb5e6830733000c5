/**
 * Little-endian byte writer and bounds-checked reader, used as a mirrored
 * pair by the serializer. Every read checks that the bytes are there, and
 * every failure is a `LoadError` naming the section and byte offset.
 *
 * @module
 */

import { LoadError } from "../ground/errors.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** Appends little-endian values to a growing buffer. */
export class ByteWriter {
  #bytes = new Uint8Array(1024);
  #view = new DataView(this.#bytes.buffer);
  #length = 0;

  /** Bytes written so far. */
  get length(): number {
    return this.#length;
  }

  #reserve(n: number): number {
    const at = this.#length;
    if (at + n > this.#bytes.length) {
      let size = this.#bytes.length * 2;
      while (size < at + n) size *= 2;
      const grown = new Uint8Array(size);
      grown.set(this.#bytes.subarray(0, at));
      this.#bytes = grown;
      this.#view = new DataView(grown.buffer);
    }
    this.#length = at + n;
    return at;
  }

  /** One byte. */
  u8(v: number): void {
    const at = this.#reserve(1);
    this.#view.setUint8(at, v);
  }

  /** An unsigned 16-bit integer. */
  u16(v: number): void {
    const at = this.#reserve(2);
    this.#view.setUint16(at, v, true);
  }

  /** An unsigned 32-bit integer. */
  u32(v: number): void {
    const at = this.#reserve(4);
    this.#view.setUint32(at, v, true);
  }

  /** Overwrites a u32 written earlier (section lengths). */
  patchU32(at: number, v: number): void {
    this.#view.setUint32(at, v, true);
  }

  /** A signed 32-bit integer. */
  i32(v: number): void {
    const at = this.#reserve(4);
    this.#view.setInt32(at, v, true);
  }

  /** A 64-bit integer (TVM's format): two's complement of `v`'s low 64 bits. */
  i64(v: bigint | number): void {
    const at = this.#reserve(8);
    this.#view.setBigInt64(at, BigInt.asIntN(64, BigInt(v)), true);
  }

  /** A float64 (exact for every JS number, -0 and NaN included). */
  f64(v: number): void {
    const at = this.#reserve(8);
    this.#view.setFloat64(at, v, true);
  }

  /** A UTF-8 string, length-prefixed. */
  string(s: string): void {
    const b = encoder.encode(s);
    this.u32(b.length);
    this.bytes(b);
  }

  /** Raw bytes. */
  bytes(b: Uint8Array): void {
    const at = this.#reserve(b.length);
    this.#bytes.set(b, at);
  }

  /** Zero bytes up to a multiple of `n`, so typed arrays can view what follows. */
  align(n: number): void {
    const pad = (n - (this.#length % n)) % n;
    this.#reserve(pad);
    this.#bytes.fill(0, this.#length - pad, this.#length);
  }

  /** Numbers as little-endian float64s, copied in bulk. */
  f64Array(values: Float64Array): void {
    const at = this.#reserve(values.length * 8);
    if (LITTLE_ENDIAN) {
      this.#bytes.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength), at);
    } else {
      for (let i = 0; i < values.length; i++) this.#view.setFloat64(at + i * 8, values[i], true);
    }
  }

  /** Numbers as little-endian uint32s, copied in bulk. */
  u32Array(values: Uint32Array): void {
    const at = this.#reserve(values.length * 4);
    if (LITTLE_ENDIAN) {
      this.#bytes.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength), at);
    } else {
      for (let i = 0; i < values.length; i++) this.#view.setUint32(at + i * 4, values[i], true);
    }
  }

  /** The bytes written, trimmed to length (a copy). */
  finish(): Uint8Array {
    return this.#bytes.slice(0, this.#length);
  }
}

/** Whether this machine stores numbers little-endian (then bulk copies need no swapping). */
export const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Reads little-endian values, checking every read against the end of the input. */
export class ByteReader {
  readonly #bytes: Uint8Array;
  readonly #view: DataView;
  #pos = 0;
  #end: number;
  /** The section being read, for error messages. */
  section = "header";

  /** A reader over `bytes`. */
  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.#end = bytes.byteLength;
  }

  /** Current byte offset. */
  get position(): number {
    return this.#pos;
  }

  /** Bytes left before the current limit. */
  get remaining(): number {
    return this.#end - this.#pos;
  }

  /** A `LoadError` at the current position (or `at`). */
  fail(reason: string, at = this.#pos): LoadError {
    return new LoadError(this.section, at, reason);
  }

  #take(n: number, what: string): number {
    if (n < 0 || this.#pos + n > this.#end) {
      throw this.fail(`truncated: ${what} needs ${n} bytes, ${this.#end - this.#pos} left`);
    }
    const at = this.#pos;
    this.#pos += n;
    return at;
  }

  /** Restricts reads to the next `n` bytes (a section); returns the old limit. */
  limit(n: number): number {
    const old = this.#end;
    this.#take(n, `section "${this.section}"`);
    this.#pos -= n;
    this.#end = this.#pos + n;
    return old;
  }

  /** Ends a section: its bytes must all have been read. */
  endLimit(oldEnd: number): void {
    if (this.#pos !== this.#end) {
      throw this.fail(`${this.#end - this.#pos} unexpected bytes at the end of the section`);
    }
    this.#end = oldEnd;
  }

  /** One byte. */
  u8(what: string): number {
    return this.#view.getUint8(this.#take(1, what));
  }

  /** An unsigned 16-bit integer. */
  u16(what: string): number {
    return this.#view.getUint16(this.#take(2, what), true);
  }

  /** An unsigned 32-bit integer. */
  u32(what: string): number {
    return this.#view.getUint32(this.#take(4, what), true);
  }

  /** A signed 32-bit integer. */
  i32(what: string): number {
    return this.#view.getInt32(this.#take(4, what), true);
  }

  /** A signed 64-bit integer, exactly. */
  i64(what: string): bigint {
    return this.#view.getBigInt64(this.#take(8, what), true);
  }

  /** An unsigned 64-bit integer, exactly. */
  u64(what: string): bigint {
    return this.#view.getBigUint64(this.#take(8, what), true);
  }

  /** UTF-8 text of `n` bytes (TVM's strings carry their length before, as a u64). */
  utf8(n: number, what: string): string {
    const at = this.#take(n, what);
    try {
      return decoder.decode(this.#bytes.subarray(at, at + n));
    } catch (e) {
      throw new LoadError(this.section, at, `${what} is not valid UTF-8`, { cause: e });
    }
  }

  /** A float64. */
  f64(what: string): number {
    return this.#view.getFloat64(this.#take(8, what), true);
  }

  /** A length-prefixed UTF-8 string. */
  string(what: string): string {
    const n = this.u32(`${what} length`);
    const at = this.#take(n, what);
    try {
      return decoder.decode(this.#bytes.subarray(at, at + n));
    } catch (e) {
      throw new LoadError(this.section, at, `${what} is not valid UTF-8`, { cause: e });
    }
  }

  /** `n` raw bytes (a copy). */
  bytes(n: number, what: string): Uint8Array {
    const at = this.#take(n, what);
    return this.#bytes.slice(at, at + n);
  }

  /** Skips padding up to a multiple of `n`; the padding must be zeros. */
  align(n: number): void {
    const pad = (n - (this.#pos % n)) % n;
    const at = this.#take(pad, "padding");
    for (let i = 0; i < pad; i++) {
      if (this.#bytes[at + i] !== 0) throw this.fail("nonzero padding", at + i);
    }
  }

  /** `count` float64s (a copy). */
  f64Array(count: number, what: string): Float64Array {
    const at = this.#take(count * 8, what);
    if (LITTLE_ENDIAN) return new Float64Array(this.#bytes.slice(at, at + count * 8).buffer);
    const out = new Float64Array(count);
    for (let i = 0; i < count; i++) out[i] = this.#view.getFloat64(at + i * 8, true);
    return out;
  }

  /** `count` uint32s (a copy). */
  u32Array(count: number, what: string): Uint32Array {
    const at = this.#take(count * 4, what);
    if (LITTLE_ENDIAN) return new Uint32Array(this.#bytes.slice(at, at + count * 4).buffer);
    const out = new Uint32Array(count);
    for (let i = 0; i < count; i++) out[i] = this.#view.getUint32(at + i * 4, true);
    return out;
  }
}
