/**
 * Products of few rows by a sealed weight stored `[N, K]` (the resident
 * "gemm" panels: MiniLM at batch 1, GPT's prefill) through `wasmGemm` alone,
 * on one thread and on the pool, interleaved in one process (issue 21).
 * `gap` runs about 0.3 ms of other work before each call, as a model's
 * other ops do, so that the pool's workers have gone to sleep.
 *
 * ```sh
 * deno run -A bench/small_rows_bench.ts
 * ```
 *
 * @module
 */

import { cpu, tensor } from "../mod.ts";
import { cpuKernelInfo, cpuThreadsReady } from "../kernels/cpu/wasm/runtime.ts";
import { gemmBlocking, wasmGemm } from "../kernels/cpu/wasm/gemm.ts";
import { poolSpin } from "../kernels/cpu/wasm/thread_pool.ts";
import { randomValues } from "./_random.ts";
import { median } from "./_stats.ts";

const ROUNDS = 9;
const shapes: [number, number, number][] = [
  [8, 384, 384],
  [16, 384, 384],
  [16, 384, 1536],
  [16, 1536, 384],
  [16, 384, 4096],
  [38, 384, 384],
  [38, 384, 1536],
  [38, 1536, 384],
];
const settings = [
  { name: "pool", poolMinFlops: 2 ** 20, workerUs: 200, callerUs: 0 },
  { name: "pool c100", poolMinFlops: 2 ** 20, workerUs: 200, callerUs: 100 },
  { name: "pool w2000 c100", poolMinFlops: 2 ** 20, workerUs: 2000, callerUs: 100 },
  { name: "1 thread", poolMinFlops: Infinity, workerUs: 200, callerUs: 0 },
];

function busy(ms: number): number {
  const until = performance.now() + ms;
  let x = 0;
  while (performance.now() < until) x += Math.sqrt(x + 1);
  return x;
}

cpu(0, { threads: 2 });
const got = await cpuThreadsReady();
for (const gap of [0, 0.3]) {
  for (const [M, K, N] of shapes) {
    const a = randomValues(M * K, 1), wv = randomValues(N * K, 2), c = new Float32Array(M * N);
    using w = tensor(wv, { shape: [N, K] }).seal();
    const reps = 20;
    const times: number[][] = settings.map(() => []);
    for (let r = 0; r < ROUNDS + 1; r++) {
      for (let j = 0; j < settings.length; j++) {
        const i = (r + j) % settings.length;
        gemmBlocking.poolMinFlops = settings[i].poolMinFlops;
        poolSpin.workerUs = settings[i].workerUs;
        poolSpin.callerUs = settings[i].callerUs;
        await cpuThreadsReady();
        let t = 0;
        for (let n = 0; n < reps; n++) {
          if (gap > 0) busy(gap);
          const t0 = performance.now();
          if (!wasmGemm(a, 0, wv, 0, c, 0, M, K, N, true, w)) throw new Error("not taken");
          t += performance.now() - t0;
        }
        if (r > 0) times[i].push(t / reps);
      }
    }
    const cells = settings.map((s, i) =>
      `${s.name}: ${(median(times[i]) * 1000).toFixed(0).padStart(5)} µs`
    );
    console.log(`gap ${gap} [${M},${K}]@[${N},${K}]ᵀ`.padEnd(30) + cells.join("   "));
  }
}
console.log(`${got} threads, ${cpuKernelInfo().simd}; medians of ${ROUNDS} interleaved rounds`);
Deno.exit(0);
