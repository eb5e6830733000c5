/**
 * The GPT-2-style decoder of models/gpt on the CPU: the shared checks
 * (`_gpt_checks.ts`) and what only the host side needs to show: weights
 * written with the tensor-cache writer and loaded from a directory or from
 * memory, and the executable's round trip through bytes. The WebGPU run of
 * the same checks is `webgpu/gpt_suite.ts`.
 *
 * @module
 */

import { assertEquals } from "@std/assert";
import {
  cpu,
  dumpTensorCache,
  encodeTensorCache,
  Executable,
  getGlobalFunc,
  loadTensorCache,
  type NDArray,
  tensor,
} from "../mod.ts";
import { TINY } from "../models/gpt/config.ts";
import { GPTSession } from "../models/gpt/session.ts";
import { makeWeights, PARAM_PREFIX, paramSpecs, publishInMemory } from "../models/gpt/weights.ts";
import { defineGPTTests, prompt, tinyExecutable } from "./_gpt_checks.ts";
import { cpuThreadSetting } from "../devices/cpu_device.ts";
import { cpuThreadsReady, setCpuKernelMode } from "../kernels/cpu/wasm/runtime.ts";

defineGPTTests("cpu", () => Promise.resolve(cpu()), (name, fn) => Deno.test(name, fn));
// The same checks on the TypeScript kernels alone (where WebAssembly cannot be compiled), and
// with every product on the WebAssembly kernels split over two threads.
for (const [mode, threads] of [["typescript", 1], ["wasm", 2]] as const) {
  defineGPTTests(`cpu (${mode} kernels, ${threads} thread(s))`, () => Promise.resolve(cpu()), (
    name,
    fn,
  ) =>
    Deno.test(name, async () => {
      const before = cpuThreadSetting();
      setCpuKernelMode(mode);
      cpu(0, { threads });
      const ready = await cpuThreadsReady();
      if (mode === "wasm") assertEquals(ready, threads);
      try {
        await fn();
      } finally {
        setCpuKernelMode("auto");
        cpu(0, { threads: before });
      }
    }));
}

Deno.test("cpu: gpt weights dumped to a directory load like the ones published in memory", async () => {
  const dir = await Deno.makeTempDir();
  const specs = paramSpecs(TINY), weights = makeWeights(TINY, 1);
  const tensors = specs.map((s, i) =>
    [
      `${PARAM_PREFIX}_${i}`,
      tensor(weights[i], { shape: [...s.shape] }),
    ] as const
  );
  try {
    await dumpTensorCache(tensors, dir, { shardCapMB: 1 }); // several shards
    const fromDir = await GPTSession.create(TINY, {
      weights: dir,
      executable: tinyExecutable(),
      device: cpu(),
    });
    const inMemory = await GPTSession.create(TINY, { executable: tinyExecutable(), device: cpu() });
    const a = await fromDir.prefill(prompt(7));
    const b = await inMemory.prefill(prompt(7));
    assertEquals(a, b);
    fromDir.dispose();
    inMemory.dispose();
  } finally {
    for (const [, t] of tensors) t.dispose();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a tensor cache published as blob: URLs loads without file access", async () => {
  using a = tensor([1, 2, 3], { dtype: "int32" });
  using b = tensor([[0.5, 1.5]]);
  const { files } = await encodeTensorCache({ blob_0: a, blob_1: b });
  const { url, revoke } = publishInMemory(files);
  try {
    const loaded = await loadTensorCache(url);
    assertEquals(loaded.names, ["blob_0", "blob_1"]);
    const get = getGlobalFunc("vm.builtin.tensor_cache.get")!;
    assertEquals([...(get("blob_1") as NDArray).dataSync()], [0.5, 1.5]);
    getGlobalFunc("vm.builtin.tensor_cache.remove")!("blob_0");
    getGlobalFunc("vm.builtin.tensor_cache.remove")!("blob_1");
  } finally {
    revoke();
  }
});

Deno.test("cpu: the gpt executable saved as bytes and loaded back runs the same", async () => {
  const ex = tinyExecutable();
  const loaded = Executable.load(ex.save());
  assertEquals(loaded.save(), ex.save());
  assertEquals(loaded.function_names, ex.function_names);
  const a = await GPTSession.create(TINY, { executable: ex, device: cpu() });
  const b = await GPTSession.create(TINY, { executable: loaded, mode: "compiled", device: cpu() });
  assertEquals(await b.prefill(prompt(5)), await a.prefill(prompt(5)));
  assertEquals(await b.decode(3), await a.decode(3));
  a.dispose();
  b.dispose();
});
