/**
 * The host operators (builtins/host_operators/) on cases whose answers are
 * known independently: the 8- and 4-bit conversions against the bit
 * patterns ml_dtypes gives (the library ONNX's reference casts with), the
 * pad modes, `unique`'s four outputs on ONNX's own example, unsigned 64-bit
 * comparisons past 2^63, `dynamic_reshape`'s 0 and -1 and `tfidf_vectorizer`'s
 * counts worked out by hand. ONNX's node tests (`deno task onnx:nodes`) check
 * them further through the importer.
 *
 * @module
 */

import { assertEquals, assertThrows } from "@std/assert";
import { getGlobalFunc, type NDArray, tensor } from "../mod.ts";

const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args) as NDArray;
const values = (t: NDArray) => Array.from(t.dataSync() as ArrayLike<number | bigint>);
const ints = (v: number[]) => tensor(new BigInt64Array(v.map(BigInt)), { shape: [v.length] });

Deno.test("to_low_precision: rounding, overflow and saturation as ml_dtypes gives them", () => {
  // ml_dtypes: 464 is halfway between 448 (0x7e) and 480 (the NaN code): ties to even, 448.
  using x = tensor([464, 480, Infinity, -0, NaN]);
  const bits = (format: string, saturate: number) =>
    values(call("vm.op.to_low_precision", x, format, saturate));
  assertEquals(bits("float8e4m3fn", 0), [0x7e, 0x7f, 0x7f, 0x80, 0x7f]);
  assertEquals(bits("float8e4m3fn", 1), [0x7e, 0x7e, 0x7e, 0x80, 0x7f]);
  // fnuz: no negative zero, NaN is 0x80, past 240 overflows to it.
  assertEquals(bits("float8e4m3fnuz", 0), [0x80, 0x80, 0x80, 0, 0x80]);
  // E5M2: 480 is halfway between 448 (0x5f) and 512 (0x60): ties to even, 512; infinity stays.
  assertEquals(bits("float8e5m2", 0), [0x5f, 0x60, 0x7c, 0x80, 0x7e]);
  // FLOAT4E2M1 always saturates (6 is its largest); NaN gives -0's code.
  assertEquals(bits("float4e2m1", 0), [7, 7, 7, 8, 8]);
  using q = tensor([-9.5, -1.5, 7.5, 8.5, 100]);
  assertEquals(values(call("vm.op.to_low_precision", q, "int4", 1)), [7, -1, 7, -8, 4]);
  assertEquals(values(call("vm.op.to_low_precision", q, "uint4", 1)), [7, 15, 7, 8, 4]);
});

Deno.test("from_low_precision: every FLOAT8E4M3FN code back to its value", () => {
  using codes = tensor(Array.from({ length: 256 }, (_, i) => i), { dtype: "uint8" });
  const v = values(call("vm.op.from_low_precision", codes, "float8e4m3fn")) as number[];
  assertEquals([v[0x01], v[0x08], v[0x38], v[0x7e], v[0xfe]], [2 ** -9, 2 ** -6, 1, 448, -448]);
  assertEquals([Number.isNaN(v[0x7f]), Number.isNaN(v[0xff])], [true, true]);
  // Every finite code survives the round trip.
  using back = tensor(v.map((x) => (Number.isNaN(x) ? 0 : x)));
  const again = values(call("vm.op.to_low_precision", back, "float8e4m3fn", 0));
  for (let c = 0; c < 256; c++) if (!Number.isNaN(v[c]) && c !== 0x80) assertEquals(again[c], c);
});

Deno.test("pad: constant, reflect, edge and wrap, and cropping by negative pads", () => {
  using x = tensor([1, 2, 3]);
  using pads = ints([2, 2]);
  const pad = (mode: string) => values(call("vm.op.pad", x, pads, null, mode));
  assertEquals(pad("constant"), [0, 0, 1, 2, 3, 0, 0]);
  assertEquals(pad("reflect"), [3, 2, 1, 2, 3, 2, 1]);
  assertEquals(pad("edge"), [1, 1, 1, 2, 3, 3, 3]);
  assertEquals(pad("wrap"), [2, 3, 1, 2, 3, 1, 2]);
  using crop = ints([-1, 1]);
  assertEquals(values(call("vm.op.pad", x, crop)), [2, 3, 0]);
});

Deno.test("unique: ONNX's example, sorted and in order of first occurrence", () => {
  using x = tensor([2, 1, 1, 3, 4, 3]);
  const outs = (sorted: number) =>
    [0, 1, 2, 3].map((o) => values(call("vm.op.unique", x, null, sorted, o)).map(Number));
  assertEquals(outs(1), [[1, 2, 3, 4], [1, 0, 3, 4], [1, 0, 0, 2, 3, 2], [2, 1, 2, 1]]);
  assertEquals(outs(0), [[2, 1, 3, 4], [0, 1, 3, 4], [0, 1, 1, 2, 3, 2], [1, 2, 2, 1]]);
});

Deno.test("uint64_binary: int64 bits read as unsigned", () => {
  // 2^63 is -2^63 as int64: larger than 2 unsigned, and halved to 2^62.
  using big = tensor(new BigInt64Array([-(2n ** 63n), 7n]), { shape: [2] });
  using two = tensor(new BigInt64Array([2n, 2n]), { shape: [2] });
  assertEquals(values(call("vm.op.uint64_binary", big, two, "greater")), [1, 1]);
  assertEquals(values(call("vm.op.uint64_binary", big, two, "divide")), [2n ** 62n, 3n]);
  // 2 - 2^63 wraps to 2^63 + 2, whose bits are -2^63 + 2.
  assertEquals(values(call("vm.op.uint64_binary", two, big, "subtract")), [
    -(2n ** 63n) + 2n,
    -5n,
  ]);
});

Deno.test("dynamic_reshape: 0 keeps a size, -1 takes the rest, a wrong count is refused", () => {
  using x = tensor(Array.from({ length: 24 }, (_, i) => i), { shape: [2, 3, 4] });
  using target = ints([0, -1, 2]);
  using y = call("vm.op.dynamic_reshape", x, target);
  assertEquals(y.shape, [2, 6, 2]);
  using bad = ints([5, -1]);
  assertThrows(() => call("vm.op.dynamic_reshape", x, bad), RangeError, "cannot reshape");
});

Deno.test("tfidf_vectorizer: skips find more bigrams, unigrams count once, modes weigh", () => {
  // Pool: unigram (1) at index 0, bigram (1, 2) at index 1. In 1 3 2 1 2, (1, 2) is adjacent
  // once and one apart once; 1 appears twice whatever the skip.
  using x = tensor(new Int32Array([1, 3, 2, 1, 2]), { shape: [1, 5] });
  using pool = ints([1, 1, 2]);
  using w = tensor([0.5, 3]);
  const run = (weights: NDArray | null, mode: string, skip: number) =>
    values(call("vm.op.tfidf_vectorizer", x, pool, [0, 1], [0, 1], weights, mode, 1, 2, skip));
  assertEquals(run(null, "TF", 0), [2, 1]);
  assertEquals(run(null, "TF", 1), [2, 2]);
  assertEquals(run(w, "IDF", 1), [0.5, 3]);
  assertEquals(run(w, "TFIDF", 1), [1, 6]);
  // Bigrams only: the unigram is a prefix, not counted.
  assertEquals(
    values(call("vm.op.tfidf_vectorizer", x, pool, [0, 1], [0, 1], null, "TF", 2, 2, 1)),
    [0, 2],
  );
});
