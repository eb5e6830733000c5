/**
 * The ONNX GPT check shared by tests/onnx_gpt_test.ts (CPU) and
 * tests/webgpu/onnx_gpt_suite.ts: the benchmarks' ONNX decoder
 * (bench/_gpt_onnx.ts) imported and run for a prefill and two greedy decode
 * steps, each step's logits against the float64 reference decoder.
 *
 * @module
 */

import { assertEquals } from "@std/assert";
import { type Device, importONNX, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { causalMask, gptOnnxModel } from "../bench/_gpt_onnx.ts";
import { headSize, TINY } from "../models/gpt/config.ts";
import { makeWeights } from "../models/gpt/weights.ts";
import { argmax } from "../models/gpt/session.ts";
import { ReferenceGPT } from "./_gpt_reference.ts";
import { assertLogits, prompt } from "./_gpt_checks.ts";

/** Runs the check on `device` (default: the CPU). */
export async function checkOnnxGPT(device?: Device): Promise<void> {
  const weights = makeWeights(TINY);
  using imported = await importONNX(gptOnnxModel(TINY, weights));
  assertEquals(imported.inputs.slice(0, 3).map((i) => i.shape), [["n"], ["n"], ["n", "total"]]);
  const vm = new VirtualMachine(imported.executable, device);
  const reference = new ReferenceGPT(TINY, weights);
  const H = TINY.heads, Dh = headSize(TINY);
  let caches: NDArray[] = [];
  for (let l = 0; l < 2 * TINY.layers; l++) {
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
      const got = await logits.data() as Float32Array;
      assertLogits(got, reference.forward(tokens), `step ${step}`);
      for (const c of caches) c.dispose();
      caches = present;
      tokens = [argmax(got)];
      logits.dispose();
      past += n;
    }
  } finally {
    for (const c of caches) c.dispose();
  }
}
