/**
 * A decode GEMV whose weight lives in the CPU kernels' WebAssembly memory
 * (a sealed weight's copy, kernels/cpu/wasm/resident.ts) against the copy
 * path and the copy floor (issue 21, round 2).
 *
 * ```sh
 * deno run -A bench/gemv_resident_bench.ts            # 15 rounds
 * deno run -A bench/gemv_resident_bench.ts --quick    # 7 rounds
 * ```
 *
 * The case is the decode-shaped `linear` of `[1, 4096]` by a `[4096, 4096]`
 * weight (64 MiB read once). Interleaved each round, medians:
 * - **copy path**: `vm.op.linear` through a VM with a weight that is not
 *   sealed (made by `tensor()`): it is copied into the kernels' memory a
 *   cache-sized chunk at a time.
 * - **sealed weight**: the same call with the weight sealed, as a tensor
 *   cache loads it: its copy in the kernels' memory is made on the first
 *   call and read from then on, rows split over the worker pool.
 * - **resident, 1 thread**: the `dot_rows` kernel alone over the weight
 *   copied into the kernels' shared memory once, before timing; x copied in
 *   and the output copied out per call: what one thread can do.
 * - **resident, pool**: the same, its rows split over the worker pool
 *   (`Job.dot`, every thread of `cpu(0, { threads })`).
 * - **copy floor**: a 128 MiB `TypedArray.set`, counted as read + write
 *   (issue 21's floor; a GEMV only reads).
 *
 * Each result is checked against the copy path's before timing.
 *
 * @module
 */

import { cpu, ExecBuilder, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import {
  cpuKernelInfo,
  cpuThreadsReady,
  poolFor,
  SCRATCH_BASE_BYTES,
  scratchView,
  type WasmKernels,
  wasmKernelsFor,
} from "../kernels/cpu/wasm/runtime.ts";
import { DOT_ROWS } from "../kernels/cpu/wasm/gemm_module.ts";
import { Job } from "../kernels/cpu/wasm/thread_pool.ts";
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
const xv = randomValues(K, 1) as Float32Array<ArrayBuffer>;
const wv = randomValues(N * K, 2) as Float32Array<ArrayBuffer>;
const x = tensor(xv, { shape: [1, K] });
const w = tensor(wv, { shape: [N, K] });
const sealedW = tensor(wv, { shape: [N, K] }).seal();

const threads = await cpuThreadsReady();
const k = wasmKernelsFor(Infinity, 0) as WasmKernels;
// Layout in the shared memory, in floats: [control | x | weight | out], below the sealed
// weights' copies (RESIDENT_BASE). K is a multiple of 8.
const xOff = SCRATCH_BASE_BYTES / 4, wOff = xOff + K, oOff = wOff + N * K;
scratchView(k, (oOff + N) * 4).set(wv, wOff);

/** Resident GEMV on `threads` threads (1: the calling thread's call, else the pool). */
function resident(onPool: boolean): Float32Array {
  scratchView(k, 0).set(xv, xOff);
  const pool = onPool ? poolFor(k) : null;
  if (pool !== null) {
    const br = 64 * DOT_ROWS; // 256 rows, 4 MiB of weight per block: 16 blocks to claim
    pool.run(k.exports, Job.dot, [xOff * 4, wOff * 4, oOff * 4, N, K, br], N / br);
  } else {
    k.exports.dot_rows(xOff * 4, wOff * 4, oOff * 4, N, K);
  }
  return scratchView(k, 0).slice(oOff, oOff + N);
}

async function viaVM(weight: NDArray): Promise<Float32Array> {
  await cpuThreadsReady();
  const out = await vm.invoke("main", x, weight) as NDArray;
  const v = out.dataSync() as Float32Array;
  out.dispose();
  return v;
}

const want = await viaVM(w);
for (const onPool of [false, true, null]) {
  const got = onPool === null ? await viaVM(sealedW) : resident(onPool);
  if (!sealedW.sealed) throw new Error("the sealed weight lost its seal");
  for (let j = 0; j < N; j++) {
    if (Math.abs(got[j] - want[j]) > 1e-4 * Math.max(1, Math.abs(want[j]))) {
      throw new Error(`resident GEMV (pool: ${onPool}) [${j}] = ${got[j]}, copy path ${want[j]}`);
    }
  }
}

const big = new Float32Array(32 * 2 ** 20), dst = new Float32Array(32 * 2 ** 20);
big.fill(1);
const times: Record<string, number[]> = {
  copy: [],
  sealed: [],
  res1: [],
  resPool: [],
  floor: [],
};
for (let r = 0; r < ROUNDS; r++) {
  let t = performance.now();
  await viaVM(w);
  times.copy.push(performance.now() - t);
  await cpuThreadsReady();
  t = performance.now();
  await viaVM(sealedW);
  times.sealed.push(performance.now() - t);
  t = performance.now();
  resident(false);
  times.res1.push(performance.now() - t);
  await cpuThreadsReady();
  t = performance.now();
  resident(true);
  times.resPool.push(performance.now() - t);
  t = performance.now();
  dst.set(big);
  times.floor.push(performance.now() - t);
}
const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];
const floorGBs = 2 * big.byteLength / median(times.floor) / 1e6;
const info = cpuKernelInfo();
console.log(
  `GEMV [1, ${K}] x [${N}, ${K}]ᵀ, ${info.simd}, ${threads} thread(s), ${ROUNDS} rounds, medians`,
);
console.log("| path | ms | GB/s of weight read | % of copy floor |");
console.log("| --- | ---: | ---: | ---: |");
for (
  const [name, key] of [
    ["copy path (vm.op.linear, weight not sealed)", "copy"],
    ["sealed weight (vm.op.linear)", "sealed"],
    ["resident, 1 thread", "res1"],
    [`resident, pool of ${threads}`, "resPool"],
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
