/**
 * Where a MiniLM forward pass on the CPU spends its time: `vm.profile` of
 * one `embed` call (after three warm-up calls) on a batch of synthetic token
 * ids, printing the profiler's by-function table. Used to choose which CPU
 * operators to move to WebAssembly (README, "CPU kernels in WebAssembly
 * SIMD").
 *
 * ```sh
 * deno run -A bench/minilm_profile.ts [batch = 32] [tokens = 38]
 * ```
 *
 * Needs `.weights/all-MiniLM-L6-v2/` (`bash tools/fetch_weights.sh`).
 *
 * @module
 */

import { cpu, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { buildMiniLM } from "../models/minilm/program.ts";

const base = new URL("../.weights/all-MiniLM-L6-v2/", import.meta.url);
const B = Number(Deno.args[0] ?? 32), S = Number(Deno.args[1] ?? 38);
const dev = cpu();
const vm = new VirtualMachine(buildMiniLM(), dev, { tensorCacheRoots: [base.href] });
const params = await vm.invoke("load_params", base.href, dev.deviceType, dev.id) as NDArray[];
try {
  await Deno.stat(new URL("tensor-cache.json", base));
} catch {
  console.log(
    `minilm profile: ${base.pathname} is missing; make it with bash tools/fetch_weights.sh`,
  );
  Deno.exit(0);
}
// Token ids spread over the vocabulary; no padding.
using ids = tensor(new Int32Array(B * S).map((_, i) => 100 + (i * 37) % 20000), {
  shape: [B, S],
  dtype: "int32",
});
using mask = tensor(new Int32Array(B * S).fill(1), { shape: [B, S], dtype: "int32" });
for (let i = 0; i < 3; i++) (await vm.invokeTensor("embed", ids, mask, params)).dispose();
const report = await vm.profile("embed", ids, mask, params);
const table = report.table().split("\n");
console.log(table.slice(0, table.findIndex((l) => l.startsWith("By instruction"))).join("\n"));
Deno.exit(0); // the worker pool's idle timer would keep the process a moment longer
