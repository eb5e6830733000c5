/**
 * The WebAssembly gemm alone (kernels/cpu/wasm/gemm.ts's `wasmGemm`, no VM
 * call, no peers): GFLOP/s on one thread and on the pool, for tuning its
 * blocking. issue 21's figures against the peers come from
 * cpu_wasm_bench.ts; this one says where the time goes.
 *
 * ```sh
 * deno run -A bench/gemm_blocking_bench.ts
 * ```
 *
 * @module
 */

import { cpu } from "../mod.ts";
import { cpuKernelInfo, cpuThreadsReady } from "../kernels/cpu/wasm/runtime.ts";
import { wasmGemm } from "../kernels/cpu/wasm/gemm.ts";
import { randomValues } from "./_random.ts";
import { median } from "./_stats.ts";

const shapes: [string, number, number, number, boolean][] = [
  ["256³", 256, 256, 256, false],
  ["1024³", 1024, 1024, 1024, false],
  ["[2048,512]@[512,512]", 2048, 512, 512, false],
  ["[128,384]@[1536,384]ᵀ", 128, 384, 1536, true],
];

for (const threads of [1, 2]) {
  cpu(0, { threads });
  const got = await cpuThreadsReady();
  for (const [name, M, K, N, transB] of shapes) {
    const a = randomValues(M * K, 1), b = randomValues(K * N, 2), c = new Float32Array(M * N);
    const t: number[] = [];
    const reps = M * N * K > 2 ** 28 ? 7 : 31;
    for (let i = 0; i < reps + 2; i++) {
      const t0 = performance.now();
      if (!wasmGemm(a, 0, b, 0, c, 0, M, K, N, transB)) throw new Error("not taken");
      if (i >= 2) t.push(performance.now() - t0);
    }
    const ms = median(t);
    console.log(
      `${got} thread(s) ${name.padEnd(22)} ${ms.toFixed(2).padStart(8)} ms ${
        (2 * M * N * K / ms / 1e6).toFixed(1).padStart(6)
      } GFLOP/s`,
    );
  }
}
console.log(cpuKernelInfo().simd);
Deno.exit(0);
