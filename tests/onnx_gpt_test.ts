/**
 * A whole transformer through `importONNX`: the GPT decoder of models/gpt
 * written as ONNX by the benchmarks (bench/_gpt_onnx.ts, the graph
 * onnxruntime-web runs in the peer benchmarks, with symbolic `n`, `past` and
 * `total`, `Reshape` by -1, `Gemm`, `LayerNormalization`, `Erf`, KV caches
 * concatenated as inputs and outputs), imported and run for a prefill and
 * greedy decode steps with one executable, against the float64 reference
 * decoder (tests/_gpt_reference.ts) within the GPT tests' tolerances.
 */

import { assertEquals } from "@std/assert";
import { importONNX, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { causalMask, gptOnnxModel } from "../bench/_gpt_onnx.ts";
import { TINY } from "../models/gpt/config.ts";
import { headSize } from "../models/gpt/config.ts";
import { makeWeights } from "../models/gpt/weights.ts";
import { ReferenceGPT } from "./_gpt_reference.ts";
import { assertLogits, prompt } from "./_gpt_checks.ts";
import { argmax } from "../models/gpt/session.ts";

Deno.test("onnx gpt: the exported tiny decoder imports and matches the float64 reference", async () => {
  const weights = makeWeights(TINY);
  using imported = await importONNX(gptOnnxModel(TINY, weights));
  assertEquals(imported.inputs.slice(0, 3).map((i) => i.shape), [["n"], ["n"], ["n", "total"]]);
  const vm = new VirtualMachine(imported.executable);
  const reference = new ReferenceGPT(TINY, weights);
  const H = TINY.heads, Dh = headSize(TINY);
  let caches: NDArray[] = [];
  for (let l = 0; l < TINY.layers; l++) {
    caches.push(tensor(new Float32Array(0), { shape: [H, 0, Dh] }));
    caches.push(tensor(new Float32Array(0), { shape: [H, 0, Dh] }));
  }
  let tokens = prompt(7), past = 0;
  try {
    for (let step = 0; step < 3; step++) {
      const n = tokens.length;
      using ids = tensor(BigInt64Array.from(tokens, BigInt));
      using positions = tensor(BigInt64Array.from(tokens, (_, i) => BigInt(past + i)));
      using mask = tensor(causalMask(n, past), { shape: [n, past + n] });
      const outs = await vm.invoke(
        "main",
        ids,
        positions,
        mask,
        ...caches,
        imported.params,
      ) as NDArray[];
      const [logits, ...present] = outs;
      const want = reference.forward(tokens);
      assertLogits(logits.dataSync() as Float32Array, want, `step ${step}`);
      for (const c of caches) c.dispose();
      caches = present;
      tokens = [argmax(logits.dataSync() as Float32Array)];
      logits.dispose();
      past += n;
    }
  } finally {
    for (const c of caches) c.dispose();
  }
});
