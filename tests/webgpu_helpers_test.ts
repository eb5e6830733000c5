// WebGPU helpers that need no adapter, so they run under `deno test` itself;
// everything that touches the GPU is in tests/webgpu/ (see webgpu_test.ts).
import { assert, assertEquals, assertRejects } from "@std/assert";
import { dispatchSize } from "../devices/webgpu/command_batch.ts";
import { webgpu } from "../devices/webgpu/webgpu_device.ts";
import { convertProgram } from "../kernels/webgpu/convert.ts";
import { binaryFn, unaryFn } from "../kernels/webgpu/elementwise_ops.ts";
import { elementwiseProgram } from "../kernels/webgpu/elementwise_program.ts";
import { planReduction } from "../kernels/webgpu/reduce.ts";
import { softmaxProgram } from "../kernels/webgpu/softmax.ts";

Deno.test("dispatchSize() folds more than 65535 workgroups into two dimensions", () => {
  assertEquals(dispatchSize(0), [1, 1]);
  assertEquals(dispatchSize(65535), [65535, 1]);
  const [x, y] = dispatchSize(65536);
  assert(x <= 65535 && x * y >= 65536, `${x} × ${y}`);
  const [x2, y2] = dispatchSize(10_000_000);
  assert(x2 <= 65535 && y2 <= 65535 && x2 * y2 >= 10_000_000);
  // The padding stays small: fewer than y extra workgroups.
  assert(x2 * y2 - 10_000_000 < y2);
});

Deno.test("webgpu() rejects a negative id with a RangeError", async () => {
  await assertRejects(() => webgpu(-1), RangeError, "non-negative integer");
});

Deno.test("NaN-aware WGSL tests bits, never `x != x`, which NVIDIA's compiler folds to false", () => {
  const sources: string[] = [];
  for (const op of ["maximum", "minimum"] as const) {
    for (const shape of [[8], [3, 5]]) { // vectorized and strided templates
      const strides = shape.length === 1 ? [1] : [5, 1];
      const input = { type: "f32" as const, offset: 0, strides };
      sources.push(
        elementwiseProgram(binaryFn(op, "f32"), [input, input], shape, "f32", 0).source(),
      );
    }
  }
  sources.push(
    elementwiseProgram(
      unaryFn("relu", "f32"),
      [{ type: "f32", offset: 0, strides: [1] }],
      [8],
      "f32",
      0,
    )
      .source(),
  );
  for (const n of [10, 100_000]) sources.push(softmaxProgram(4, n, 0, 0).source());
  for (const count of [10, 1_000_000]) {
    for (const pass of planReduction("max", "f32", [count], [0], 0, 0).passes) {
      sources.push(pass.source());
    }
  }
  for (const source of sources) {
    assert(!/\((\w+) != \1\)/.test(source), source);
    assert(source.includes("fn is_nan("), source);
  }
  // Conversions from float32 saturate and send NaN to 0 (to true for bool), by the bits.
  for (const to of ["int32", "uint32", "int8", "uint8", "int16", "uint16", "bool"] as const) {
    const source = convertProgram({
      from: "float32",
      to,
      shape: [8],
      strides: [1],
      srcByte: 0,
      dstByte: 0,
    }).source();
    assert(!/\b(\w+) != \1\b/.test(source), source);
  }
});
