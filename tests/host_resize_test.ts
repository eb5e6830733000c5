/**
 * `vm.op.resize` (builtins/host_nn/host_resize_operators.ts) on cases worked
 * out by hand from ONNX's reference (`op_resize.py`): each mode, a nearest
 * rounding, `keep_aspect_ratio_policy`, `tf_crop_and_resize` with its
 * extrapolation, `axes`, and the errors. ONNX's node tests
 * (`deno task onnx:nodes`) check it further through the importer.
 *
 * @module
 */

import { assertEquals, assertThrows } from "@std/assert";
import { getGlobalFunc, type NDArray, tensor } from "../mod.ts";

const values = (t: NDArray) => Array.from(t.dataSync() as ArrayLike<number>);
const ints = (v: number[]) => tensor(new BigInt64Array(v.map(BigInt)), { shape: [v.length] });

/** The resize's options, defaults as ONNX's. */
interface Options {
  mode?: string;
  coordinates?: string;
  nearest?: string;
  cubicA?: number;
  antialias?: number;
  exclude?: number;
  extrapolation?: number;
  policy?: string;
}

function resize(
  x: NDArray,
  axes: number[],
  given: { roi?: NDArray; scales?: NDArray; sizes?: NDArray },
  o: Options = {},
): NDArray {
  return getGlobalFunc("vm.op.resize")!(
    x,
    given.roi ?? null,
    given.scales ?? null,
    given.sizes ?? null,
    axes,
    o.mode ?? "nearest",
    o.coordinates ?? "half_pixel",
    o.nearest ?? "round_prefer_floor",
    o.cubicA ?? -0.75,
    o.antialias ?? 0,
    o.exclude ?? 0,
    o.extrapolation ?? 0,
    o.policy ?? "stretch",
  ) as NDArray;
}

Deno.test("resize: linear and asymmetric doubles a row, the edge repeated", () => {
  using x = tensor([[1, 3]]);
  using scales = tensor([1, 2]);
  using y = resize(x, [0, 1], { scales }, { mode: "linear", coordinates: "asymmetric" });
  assertEquals([...y.shape], [1, 4]);
  // Sources 0, 0.5, 1, 1.5: the last reads index 1 and its repeat.
  assertEquals(values(y), [1, 2, 3, 3]);
});

Deno.test("resize: nearest halves by sizes, rounding ties as nearest_mode says", () => {
  using x = tensor([[1, 2, 3, 4]]);
  using sizes = ints([2]);
  // half_pixel sources (o + 0.5)·2 − 0.5: 0.5 and 2.5, both ties.
  using floor = resize(x, [1], { sizes }, { nearest: "round_prefer_floor" });
  using ceil = resize(x, [1], { sizes }, { nearest: "round_prefer_ceil" });
  assertEquals([[...floor.shape], values(floor)], [[1, 2], [1, 3]]);
  assertEquals(values(ceil), [2, 4]);
  // Upsample's rule: asymmetric, floor, scale 2.
  using two = tensor([2]);
  using up = resize(x, [1], { scales: two }, {
    coordinates: "asymmetric",
    nearest: "floor",
  });
  assertEquals(values(up), [1, 1, 2, 2, 3, 3, 4, 4]);
});

Deno.test("resize: cubic by a = -0.75 at a half step weighs 0.59375 and -0.09375", () => {
  using x = tensor([0, 0, 1, 0]);
  using scales = tensor([2]);
  using y = resize(x, [0], { scales }, { mode: "cubic", coordinates: "asymmetric" });
  // Sources 0, 0.5, …, 3.5; the one at index 2 is 1 at 2, the inner taps' weight at 1.5 and
  // 2.5, and the outer taps' at 0.5 and 3.5 (index 5 past the end repeats index 3, a 0).
  assertEquals(values(y), [0, -0.09375, 0, 0.59375, 1, 0.59375, 0, -0.09375]);
});

Deno.test("resize: keep_aspect_ratio_policy fits both axes by one scale", () => {
  using x = tensor([[1, 2, 3, 4], [5, 6, 7, 8]]);
  using sizes = ints([4, 4]);
  // Scales 2 and 1: not_larger takes 1 (x unchanged), not_smaller 2 (rounded half up: 4×8).
  using same = resize(x, [0, 1], { sizes }, { policy: "not_larger" });
  assertEquals([[...same.shape], values(same)], [[2, 4], [1, 2, 3, 4, 5, 6, 7, 8]]);
  using big = resize(x, [0, 1], { sizes }, { policy: "not_smaller" });
  assertEquals([...big.shape], [4, 8]);
});

Deno.test("resize: tf_crop_and_resize reads the roi and extrapolates past the input", () => {
  using x = tensor([0, 10]);
  using roi = tensor([0.5, 1.5]);
  using sizes = ints([3]);
  // Sources 0.5, 1 and 1.5: the last is past the input's last index.
  using y = resize(x, [0], { roi, sizes }, {
    mode: "linear",
    coordinates: "tf_crop_and_resize",
    extrapolation: -1,
  });
  assertEquals(values(y), [5, 10, -1]);
});

Deno.test("resize: an empty scales beside sizes is absent; wrong counts and modes throw", () => {
  using x = tensor([[1, 2], [3, 4]]);
  using empty = tensor(new Float32Array(0), { shape: [0] });
  using sizes = ints([4]);
  using y = resize(x, [1], { scales: empty, sizes });
  assertEquals([[...y.shape], values(y)], [[2, 4], [1, 1, 2, 2, 3, 3, 4, 4]]);
  using two = tensor([2, 2]);
  assertThrows(() => resize(x, [1], { scales: two }), RangeError, "2 scales for 1 axes");
  assertThrows(() => resize(x, [1], { sizes }, { mode: "bilinear" }), TypeError, "mode");
  assertThrows(() => resize(x, [1], { sizes }, { antialias: 1 }), RangeError, "antialias");
});
