/**
 * A decode GEMV whose weight is sealed (as a tensor cache loads it), so its
 * packed copy in the CPU kernels' WebAssembly memory is read on every call
 * (kernels/cpu/wasm/resident.ts), against the copy path and the copy floor
 * (issue 21, round 2), in one process, interleaved, medians.
 *
 * ```sh
 * deno run -A bench/gemv_resident_bench.ts            # 15 rounds
 * deno run -A bench/gemv_resident_bench.ts --quick    # 7 rounds
 * ```
 *
 * The case is the decode-shaped `linear` of `[1, 4096]` by a `[4096, 4096]`
 * weight (64 MiB read once), through a one-instruction VM function, result
 * read with `dataSync()`:
 * - **copy path**: a weight made by `tensor()`, not sealed: it is copied
 *   into the kernels' memory a cache-sized chunk at a time on every call.
 * - **sealed weight**: the same values, sealed: its copy is made on the
 *   first call (before timing) and read from then on, rows split over the
 *   worker pool (every thread of `cpu(0, { threads })`).
 * - **copy floor**: a 128 MiB `TypedArray.set`, counted as read + write
 *   (issue 21's floor; a GEMV only reads).
 *
 * The sealed result is checked against the copy path's before timing.
 *
 * @module
 */

import { cpu, ExecBuilder, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { cpuKernelInfo, cpuThreadsReady } from "../kernels/cpu/wasm/runtime.ts";
import { randomValues } from "./_random.ts";

const ROUNDS = Deno.args.includes("--quick") ? 7 : 15;
const K = 4096, N = 4096;
const WEIGHT_BYTES = N * K * 4;

const ib = new ExecBuilder();
ib.function("main", { num_inputs: 2 }, () => {
  ib.emit_call("vm.op.linear", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
  ib.emit_ret(ib.r(2));
});
const vm = new VirtualMachine(ib.get(), cpu());
const wv = randomValues(N * K, 2) as Float32Array<ArrayBuffer>;
const x = tensor(randomValues(K, 1), { shape: [1, K] });
const w = tensor(wv, { shape: [N, K] });
const sealedW = tensor(wv, { shape: [N, K] }).seal();
const threads = await cpuThreadsReady();

async function viaVM(weight: NDArray): Promise<Float32Array> {
  await cpuThreadsReady();
  const out = await vm.invoke("main", x, weight) as NDArray;
  const v = out.dataSync() as Float32Array;
  out.dispose();
  return v;
}

const want = await viaVM(w), got = await viaVM(sealedW);
if (!sealedW.sealed) throw new Error("the sealed weight lost its seal");
for (let j = 0; j < N; j++) {
  if (Math.abs(got[j] - want[j]) > 1e-4 * Math.max(1, Math.abs(want[j]))) {
    throw new Error(`sealed GEMV [${j}] = ${got[j]}, copy path ${want[j]}`);
  }
}

const big = new Float32Array(32 * 2 ** 20), dst = new Float32Array(32 * 2 ** 20);
big.fill(1);
const times: Record<string, number[]> = { copy: [], sealed: [], floor: [] };
for (let r = 0; r < ROUNDS; r++) {
  let t = performance.now();
  await viaVM(w);
  times.copy.push(performance.now() - t);
  await cpuThreadsReady();
  t = performance.now();
  await viaVM(sealedW);
  times.sealed.push(performance.now() - t);
  t = performance.now();
  dst.set(big);
  times.floor.push(performance.now() - t);
}
const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];
const floorGBs = 2 * big.byteLength / median(times.floor) / 1e6;
console.log(
  `GEMV [1, ${K}] x [${N}, ${K}]ᵀ, ${cpuKernelInfo().simd}, ${threads} thread(s), ${ROUNDS} rounds, medians`,
);
console.log("| path | ms | GB/s of weight read | % of copy floor |");
console.log("| --- | ---: | ---: | ---: |");
for (
  const [name, key] of [
    ["copy path (weight not sealed)", "copy"],
    ["sealed weight (packed copy kept)", "sealed"],
  ] as const
) {
  const ms = median(times[key]), gbs = WEIGHT_BYTES / ms / 1e6;
  console.log(
    `| ${name} | ${ms.toFixed(2)} | ${gbs.toFixed(1)} | ${(100 * gbs / floorGBs).toFixed(0)}% |`,
  );
}
console.log(
  `| copy floor (128 MiB set, read + write) | ${median(times.floor).toFixed(2)} | ${
    floorGBs.toFixed(1)
  } | 100% |`,
);
