/**
 * MiniLM at batch 1 on the CPU called as an application calls it: a loop of
 * `await vm.invokeTensor(...)`, nothing else, no `cpuThreadsReady()`. Such
 * a loop never lets the event loop take the worker pool's "ready"
 * messages; until the pool was usable as soon as it was made
 * (thread_pool.ts), every product of it ran on one thread (54–55
 * sentences/s against 70–80 after, three runs each, the 2-core machine quiet). Prints
 * sentences/s and how many blocks of kernel calls the workers took.
 *
 * ```sh
 * deno run -A bench/minilm_await_loop_bench.ts
 * ```
 *
 * @module
 */

import { cpu, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { buildMiniLM } from "../models/minilm/program.ts";
import { cpuKernelInfo, cpuPoolWorkerBlocks } from "../kernels/cpu/wasm/runtime.ts";
import { median } from "./_stats.ts";

const base = new URL("../.weights/all-MiniLM-L6-v2/", import.meta.url);
try {
  await Deno.stat(new URL("tensor-cache.json", base));
} catch {
  console.log(`minilm loop: ${base.pathname} is missing; make it with bash tools/fetch_weights.sh`);
  Deno.exit(0);
}
const dev = cpu();
const vm = new VirtualMachine(buildMiniLM(), dev, { tensorCacheRoots: [base.href] });
const params = await vm.invoke("load_params", base.href, dev.deviceType, dev.id) as NDArray[];
// Sentences of 8 to 38 tokens (MiniLM bench's range), token ids spread over the vocabulary.
const inputs = [8, 12, 16, 20, 24, 30, 38].map((S) => [
  tensor(new Int32Array(S).map((_, i) => 100 + (i * 37) % 20000), {
    shape: [1, S],
    dtype: "int32",
  }),
  tensor(new Int32Array(S).fill(1), { shape: [1, S], dtype: "int32" }),
]);
const rates: number[] = [];
for (let round = 0; round < 12; round++) {
  const t0 = performance.now();
  for (const [ids, mask] of inputs) (await vm.invokeTensor("embed", ids, mask, params)).dispose();
  if (round > 1) rates.push(inputs.length / ((performance.now() - t0) / 1000));
}
console.log(
  `minilm batch 1 cpu in an await loop: ${median(rates).toFixed(1)} sentences/s ` +
    `(median of ${rates.length} rounds of ${inputs.length}); ${cpuKernelInfo().threads} threads, ` +
    `${cpuPoolWorkerBlocks()} blocks taken by workers`,
);
Deno.exit(0); // the worker pool's idle timer would keep the process a moment longer
