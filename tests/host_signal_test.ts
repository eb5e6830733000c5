/**
 * `vm.op.stft` (builtins/host_nn/host_signal_operators.ts) on frames worked
 * out by hand: a length-2 DFT is the sum and the difference of its two
 * samples. ONNX's node tests (`deno task onnx:nodes`) check it further
 * through the importer.
 *
 * @module
 */

import { assert, assertEquals, assertThrows } from "@std/assert";
import { getGlobalFunc, type NDArray, tensor } from "../mod.ts";

const stft = (...args: unknown[]) => getGlobalFunc("vm.op.stft")!(...args) as NDArray;
const scalar = (v: number) => tensor(new BigInt64Array([BigInt(v)]), { shape: [] });

Deno.test("stft: windowed frames of 2, one step apart, each a sum and a difference", () => {
  using x = tensor([1, 2, 3, 4], { shape: [1, 4, 1] });
  using step = scalar(1), window = tensor([0.5, 2]);
  // Frame f weighs (x[f], x[f+1]) by (0.5, 2); its two frequencies are their sum and difference.
  using y = stft(x, step, window, null, 1);
  assertEquals([...y.shape], [1, 3, 2, 2]);
  const got = [...y.dataSync() as Float32Array];
  const want = [4.5, 0, -3.5, 0, 7, 0, -5, 0, 9.5, 0, -6.5, 0];
  got.forEach((v, i) => assert(Math.abs(v - want[i]) < 1e-6, `[${i}] ${v} vs ${want[i]}`));
});

Deno.test("stft: the frame's length from its input, two steps apart; a frame past the signal throws", () => {
  using x = tensor([1, 0, 0, 0], { shape: [1, 4, 1] });
  using step = scalar(2), two = scalar(2), five = scalar(5);
  using y = stft(x, step, null, two, 0);
  assertEquals([...y.shape], [1, 2, 2, 2]);
  assertEquals([...y.dataSync()], [1, 0, 1, 0, 0, 0, 0, 0]);
  assertThrows(() => stft(x, step, null, five, 1), RangeError, "frame_length 5");
});
