/**
 * The decoder of models/gpt on WebGPU: the shared checks (`_gpt_checks.ts`),
 * greedy generation equal on both devices, and the waits: one read back per
 * token on the token-by-token path, one per call with `decode_n`.
 *
 * @module
 */

import { assertEquals } from "@std/assert";
import { cpu } from "../../mod.ts";
import { TINY } from "../../models/gpt/config.ts";
import { argmax, GPTSession } from "../../models/gpt/session.ts";
import { defineGPTTests, prompt, tinyExecutable } from "../_gpt_checks.ts";
import { getTestGPU, gpuTest } from "./suite_registry.ts";

defineGPTTests("webgpu", getTestGPU, gpuTest);

/** Counts `mapAsync` and `onSubmittedWorkDone` calls (every way to wait for a GPU) during `fn`. */
async function countWaits(fn: () => Promise<void>): Promise<number> {
  const map = GPUBuffer.prototype.mapAsync, done = GPUQueue.prototype.onSubmittedWorkDone;
  let waits = 0;
  GPUBuffer.prototype.mapAsync = function (...args) {
    waits++;
    return map.apply(this, args);
  };
  GPUQueue.prototype.onSubmittedWorkDone = function () {
    waits++;
    return done.apply(this);
  };
  try {
    await fn();
  } finally {
    GPUBuffer.prototype.mapAsync = map;
    GPUQueue.prototype.onSubmittedWorkDone = done;
  }
  return waits;
}

gpuTest(
  "webgpu: gpt greedy generation gives the same tokens on the CPU and on WebGPU",
  async (gpu) => {
    const onCpu = await GPTSession.create(TINY, { executable: tinyExecutable(), device: cpu() });
    const onGpu = await GPTSession.create(TINY, { device: gpu, executable: tinyExecutable() });
    try {
      for (const n of [1, 7, 64]) {
        const a = await onCpu.generate(prompt(n, 3), 16);
        const b = await onGpu.generate(prompt(n, 3), 16);
        assertEquals(b, a, `prompt of ${n}`);
        onCpu.reset();
        onGpu.reset();
      }
      assertEquals(onCpu.device, cpu());
    } finally {
      onCpu.dispose();
      onGpu.dispose();
    }
  },
);

gpuTest("webgpu: gpt waits once per generated token, and once per decode_n call", async (gpu) => {
  const s = await GPTSession.create(TINY, { device: gpu, executable: tinyExecutable() });
  try {
    const first = argmax(await s.prefill(prompt(7, 4)));
    const submits = gpu.submitCount;
    let token = first;
    const waits = await countWaits(async () => {
      for (let i = 0; i < 6; i++) token = argmax(await s.decode(token));
    });
    assertEquals(waits, 6, "one read back (the logits) per token, nothing else");
    // Per step: the call's kernels when it returns, the read back's copy when data() runs.
    assertEquals(gpu.submitCount - submits, 12, "two submits per step");
    const batched = await countWaits(async () => {
      await s.decodeN(token, 12);
    });
    assertEquals(batched, 1, "twelve tokens, one read back (their ids)");
  } finally {
    s.dispose();
  }
});
