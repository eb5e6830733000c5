/**
 * A bounded reader of protobuf's wire format, the part ONNX files use: varints
 * (wire type 0), fixed64 (1), length-delimited fields (2) and fixed32 (5).
 * Every read checks the bytes it needs against the end of the message it is
 * in, so hostile input (truncated, lengths past the end, varints longer than
 * ten bytes, the group wire types 3 and 4 ONNX never uses, messages nested
 * deeper than `MAX_DEPTH`) ends in an `ONNXImportError` with the byte offset,
 * never an out-of-bounds read, a hang or a stack overflow. Length-delimited
 * bytes are views of the input, not copies: an initializer's `raw_data` is
 * read once, where it lies.
 *
 * @module
 */

import { ONNXImportError } from "./onnx_errors.ts";

/** Protobuf wire types. */
export const WireType = { Varint: 0, Fixed64: 1, Bytes: 2, Fixed32: 5 } as const;

/** How deep messages may nest (graphs in attributes, types in sequences): well past any real model. */
export const MAX_DEPTH = 64;

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** A cursor over one message's bytes, `[pos, end)` of `bytes`, at nesting `depth`. */
export class WireReader {
  /** The whole file (offsets in errors are into it). */
  readonly bytes: Uint8Array;
  /** Next byte to read. */
  pos: number;
  /** One past this message's last byte. */
  readonly end: number;
  /** How many messages enclose this one. */
  readonly depth: number;
  /** Where this message is, for errors (`ModelProto.graph.node[3]`). */
  readonly section: string;
  readonly #view: DataView;

  /** A reader of `bytes[pos, end)`. */
  constructor(bytes: Uint8Array, pos = 0, end = bytes.length, depth = 0, section = "ModelProto") {
    this.bytes = bytes;
    this.pos = pos;
    this.end = end;
    this.depth = depth;
    this.section = section;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** An `ONNXImportError` at `offset` (default: the current position) in this message. */
  fail(reason: string, offset = this.pos): ONNXImportError {
    return new ONNXImportError(this.section, offset, reason);
  }

  /** Whether bytes are left in this message. */
  more(): boolean {
    return this.pos < this.end;
  }

  /**
   * A varint as two 32-bit halves `[low, high]`. At most ten bytes, the tenth
   * holding only bit 63: a longer one is malformed (and would loop a naive reader).
   */
  #varint64(): [number, number] {
    const start = this.pos;
    let lo = 0, hi = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw this.fail("truncated varint", start);
      const b = this.bytes[this.pos++];
      if (i < 4) lo |= (b & 0x7f) << (7 * i);
      else if (i === 4) {
        lo |= (b & 0x0f) << 28;
        hi |= (b & 0x7f) >> 4;
      } else hi |= (b & 0x7f) << (7 * i - 32);
      if ((b & 0x80) === 0) {
        if (i === 9 && b > 1) throw this.fail("varint overflows 64 bits", start);
        return [lo >>> 0, hi >>> 0];
      }
    }
    throw this.fail("varint longer than 10 bytes", start);
  }

  /** A varint as an unsigned number; past 2^53 it is an error (`what` names the field). */
  uint(what: string): number {
    const start = this.pos;
    const [lo, hi] = this.#varint64();
    if (hi >= 0x200000) throw this.fail(`${what} ${this.#big(lo, hi, false)} is too large`, start);
    return hi * 2 ** 32 + lo;
  }

  /**
   * A varint as a signed 64-bit integer in a number: exact up to 2^53 in
   * magnitude, rounded beyond (ONNX uses ±2^63−1 to mean "to the end", which
   * stays far past any dimension).
   */
  int64(): number {
    const [lo, hi] = this.#varint64();
    return (hi | 0) * 2 ** 32 + lo;
  }

  /** A varint as an exact signed 64-bit bigint (int64 tensor data). */
  int64Big(): bigint {
    const [lo, hi] = this.#varint64();
    return this.#big(lo, hi, true);
  }

  /** A varint as an exact unsigned 64-bit bigint (uint64 tensor data). */
  uint64Big(): bigint {
    const [lo, hi] = this.#varint64();
    return this.#big(lo, hi, false);
  }

  #big(lo: number, hi: number, signed: boolean): bigint {
    const v = (BigInt(hi) << 32n) | BigInt(lo);
    return signed ? BigInt.asIntN(64, v) : v;
  }

  /** A field's tag: `[field number, wire type]`, the wire type checked. */
  tag(): [number, number] {
    const start = this.pos;
    const key = this.uint("field key");
    const field = Math.floor(key / 8), wire = key % 8;
    if (field === 0) throw this.fail("field number 0", start);
    if (wire !== 0 && wire !== 1 && wire !== 2 && wire !== 5) {
      throw this.fail(`wire type ${wire} of field ${field} (groups are not used by ONNX)`, start);
    }
    return [field, wire];
  }

  /** Checks that field `field` came with wire type `want`. */
  expect(field: number, wire: number, want: number, name: string): void {
    if (wire !== want) {
      throw this.fail(`field ${name} (${field}) has wire type ${wire}, expected ${want}`);
    }
  }

  /** The bounds `[start, end)` of a length-delimited field's bytes; the cursor moves past them. */
  span(): [number, number] {
    const start = this.pos;
    const n = this.uint("length");
    if (n > this.end - this.pos) {
      throw this.fail(
        `length ${n} runs past the end of the message (${this.end - this.pos} bytes left)`,
        start,
      );
    }
    const from = this.pos;
    this.pos += n;
    return [from, from + n];
  }

  /** A length-delimited field's bytes: a view of the input, not a copy. */
  bytesField(): Uint8Array {
    const [from, to] = this.span();
    return this.bytes.subarray(from, to);
  }

  /** A length-delimited field as UTF-8 text (invalid UTF-8 is an error). */
  string(): string {
    const start = this.pos;
    const b = this.bytesField();
    try {
      return utf8.decode(b);
    } catch {
      throw this.fail("a string that is not valid UTF-8", start);
    }
  }

  /** A reader of the embedded message in the next length-delimited field, one level deeper. */
  message(section: string): WireReader {
    const start = this.pos;
    if (this.depth + 1 > MAX_DEPTH) {
      throw this.fail(`messages nested more than ${MAX_DEPTH} deep`, start);
    }
    const [from, to] = this.span();
    return new WireReader(this.bytes, from, to, this.depth + 1, section);
  }

  /** A fixed32 as a float. */
  float32(): number {
    if (this.end - this.pos < 4) throw this.fail("truncated fixed32");
    const v = this.#view.getFloat32(this.pos, true);
    this.pos += 4;
    return v;
  }

  /** A fixed64 as a double. */
  float64(): number {
    if (this.end - this.pos < 8) throw this.fail("truncated fixed64");
    const v = this.#view.getFloat64(this.pos, true);
    this.pos += 8;
    return v;
  }

  /** Skips a field of an unknown number (protobuf's rule: readers ignore fields they do not know). */
  skip(wire: number): void {
    if (wire === WireType.Varint) this.#varint64();
    else if (wire === WireType.Fixed64) {
      if (this.end - this.pos < 8) throw this.fail("truncated fixed64");
      this.pos += 8;
    } else if (wire === WireType.Fixed32) {
      if (this.end - this.pos < 4) throw this.fail("truncated fixed32");
      this.pos += 4;
    } else this.span();
  }

  /**
   * A repeated scalar field, packed (one length-delimited run) or not (one
   * value per tag): `read` is called for each value, inside the packed run's
   * bounds when packed. A packed run holds at most one value per byte, so the
   * count is bounded by the file's size.
   */
  repeated(wire: number, scalarWire: number, read: (r: WireReader) => void, name: string): void {
    if (wire === scalarWire) {
      read(this);
      return;
    }
    if (wire !== WireType.Bytes) {
      throw this.fail(`field ${name} has wire type ${wire}, expected ${scalarWire} or packed (2)`);
    }
    const [from, to] = this.span();
    const inner = new WireReader(this.bytes, from, to, this.depth, this.section);
    while (inner.more()) read(inner);
  }
}
