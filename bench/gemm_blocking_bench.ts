/**
 * The WebAssembly gemm alone (kernels/cpu/wasm/gemm.ts's `wasmGemm`, no VM
 * call, no peers), on one thread and on the pool, under several blockings
 * (`gemmBlocking`) interleaved in one process: for choosing the blocking on
 * a shared machine, where only same-process comparisons hold. issue 21's
 * figures against the peers come from cpu_wasm_bench.ts.
 *
 * ```sh
 * deno run -A bench/gemm_blocking_bench.ts   # kc 256, 384; 4, 16 blocks per thread
 * deno run -A bench/gemm_blocking_bench.ts --kc=128,256 --a=128,256 --bpt=4 --rounds=9
 * deno run -A bench/gemm_blocking_bench.ts --kc=256,99999 --bpt=4 --pad=0,1  # no K-blocking, no padding
 * ```
 *
 * @module
 */

import { cpu } from "../mod.ts";
import { cpuKernelInfo, cpuThreadsReady } from "../kernels/cpu/wasm/runtime.ts";
import { gemmBlocking, wasmGemm } from "../kernels/cpu/wasm/gemm.ts";
import { randomValues } from "./_random.ts";
import { median } from "./_stats.ts";

const arg = (name: string, fallback: number[]) => {
  const a = Deno.args.find((s) => s.startsWith(`--${name}=`));
  return a === undefined ? fallback : a.slice(name.length + 3).split(",").map(Number);
};
const kcs = arg("kc", [256, 384]), aKiBs = arg("a", [256]), bpts = arg("bpt", [4, 16]);
const pads = arg("pad", [1]).map((p) => p !== 0);
const ROUNDS = arg("rounds", [7])[0];

const shapes: [string, number, number, number, boolean][] = [
  ["256³", 256, 256, 256, false],
  ["1024³", 1024, 1024, 1024, false],
  ["[2048,512]@[512,512]", 2048, 512, 512, false],
  ["[128,384]@[1536,384]ᵀ", 128, 384, 1536, true],
];
const settings = kcs.flatMap((kc) =>
  aKiBs.flatMap((aKiB) =>
    bpts.flatMap((blocksPerThread) =>
      pads.map((padRows) => ({ kc, aBlockBytes: aKiB * 1024, blocksPerThread, padRows }))
    )
  )
);

for (const threads of [1, 2]) {
  cpu(0, { threads });
  const got = await cpuThreadsReady();
  for (const [name, M, K, N, transB] of shapes) {
    const a = randomValues(M * K, 1), b = randomValues(K * N, 2), c = new Float32Array(M * N);
    const reps = M * N * K > 2 ** 28 ? 1 : 9;
    const times: number[][] = settings.map(() => []);
    for (let r = 0; r < ROUNDS + 1; r++) {
      for (let j = 0; j < settings.length; j++) {
        const i = (r + j) % settings.length;
        Object.assign(gemmBlocking, settings[i]);
        await cpuThreadsReady();
        const t0 = performance.now();
        for (let n = 0; n < reps; n++) {
          if (!wasmGemm(a, 0, b, 0, c, 0, M, K, N, transB)) throw new Error("not taken");
        }
        if (r > 0) times[i].push((performance.now() - t0) / reps);
      }
    }
    const cells = settings.map((s, i) =>
      `kc ${s.kc} A ${s.aBlockBytes / 1024}K ${s.blocksPerThread}/t${
        s.padRows ? "" : " unpadded"
      }: ${(2 * M * N * K / median(times[i]) / 1e6).toFixed(1).padStart(5)}`
    );
    console.log(`${got}t ${name.padEnd(22)} GFLOP/s  ${cells.join("  ")}`);
  }
}
console.log(`${cpuKernelInfo().simd}; medians of ${ROUNDS} interleaved rounds`);
Deno.exit(0);
