/**
 * A whole transformer through `importONNX`: the GPT decoder of models/gpt
 * written as ONNX by the benchmarks (bench/_gpt_onnx.ts, the graph
 * onnxruntime-web runs in the peer benchmarks, with symbolic `n`, `past` and
 * `total`, `Reshape` by -1, `Gemm`, `LayerNormalization`, `Erf`, KV caches
 * concatenated as inputs and outputs), imported and run on the CPU for a
 * prefill and greedy decode steps with one executable, against the float64
 * reference decoder within the GPT tests' tolerances (tests/_onnx_gpt_checks.ts;
 * tests/webgpu/onnx_gpt_suite.ts runs it on WebGPU).
 */

import { checkOnnxGPT } from "./_onnx_gpt_checks.ts";

Deno.test("onnx gpt: the exported tiny decoder imports and matches the float64 reference", async () => {
  await checkOnnxGPT();
});
