/**
 * GPT-small's decode on the CPU with its weights sealed (as the tensor
 * cache loads them: each linear reads a packed copy kept in the kernels'
 * WebAssembly memory, kernels/cpu/wasm/resident.ts) against the same
 * weights unsealed (copied into the kernels' memory on every call), and
 * against the bandwidth ceiling: weight bytes over the copy floor measured
 * in the same process (issue 21's target: ≥ 65% of it).
 *
 * ```sh
 * deno run -A bench/gpt_cpu_decode_bench.ts            # 8 rounds of each
 * deno run -A bench/gpt_cpu_decode_bench.ts --quick    # 4 rounds
 * ```
 *
 * One session; rounds alternate between the two ways. A round empties the
 * KV caches, prefills 16 tokens, then times 32 greedy decode steps (one
 * model call, one read back of the logits and an argmax each). Unsealing
 * is a `cpuView()` of every parameter; sealing again is `seal()`, after
 * which one untimed step makes the copies. Nothing writes the weights, so
 * the seal after a view is safe here (it is not in general: NDArray.seal).
 * Both ways must choose the same tokens.
 *
 * @module
 */

import { cpu, getGlobalFunc, type NDArray } from "../mod.ts";
import type { Tuple } from "../ground/tuple.ts";
import { cpuThreadsReady } from "../kernels/cpu/wasm/runtime.ts";
import { GPTSession } from "../models/gpt/session.ts";
import { SMALL } from "../models/gpt/config.ts";
import { PARAM_PREFIX, paramCount } from "../models/gpt/weights.ts";

const ROUNDS = Deno.args.includes("--quick") ? 4 : 8;
const STEPS = 32;

await cpuThreadsReady();
const session = await GPTSession.create(SMALL, { device: cpu() });
const fromCache = getGlobalFunc("vm.builtin.param_array_from_cache")!;
const params = [...(fromCache(PARAM_PREFIX, -1) as Tuple).fields] as NDArray[];
if (!params.every((p) => p.sealed)) throw new Error("the tensor cache did not seal the weights");

async function run(): Promise<{ tokensPerSecond: number; tokens: string }> {
  session.reset();
  let logits = await session.prefill(Array.from({ length: 16 }, (_, i) => i + 1));
  await cpuThreadsReady();
  const tokens: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < STEPS; i++) {
    let best = 0;
    for (let j = 1; j < logits.length; j++) if (logits[j] > logits[best]) best = j;
    tokens.push(best);
    logits = await session.decode(best);
  }
  return { tokensPerSecond: STEPS / ((performance.now() - t0) / 1000), tokens: tokens.join(",") };
}

const rates: Record<string, number[]> = { copy: [], sealed: [] };
const chosen: Record<string, string> = {};
for (let r = 0; r < ROUNDS; r++) {
  for (const way of ["copy", "sealed"] as const) {
    if (way === "copy") { for (const p of params) p.cpuView(); }
    else {
      for (const p of params) p.seal();
      session.reset();
      await session.decode(1); // makes the copies, untimed
    }
    const { tokensPerSecond, tokens } = await run();
    rates[way].push(tokensPerSecond);
    if (chosen[way] !== undefined && chosen[way] !== tokens) throw new Error(`${way}: tokens vary`);
    chosen[way] = tokens;
  }
}
if (chosen.copy !== chosen.sealed) throw new Error("sealed and copied weights chose other tokens");

const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];
const big = new Float32Array(32 * 2 ** 20), dst = new Float32Array(32 * 2 ** 20);
big.fill(1);
const floorMs: number[] = [];
for (let i = 0; i < 9; i++) {
  const t0 = performance.now();
  dst.set(big);
  floorMs.push(performance.now() - t0);
}
const floorGBs = 2 * big.byteLength / median(floorMs) / 1e6;
const weightBytes = paramCount(SMALL) * 4;
const ceiling = floorGBs * 1e9 / weightBytes;
console.log(
  `GPT-small decode, ${cpu().description}; ${ROUNDS} rounds of ${STEPS} steps each way, medians`,
);
console.log(
  `weights ${(weightBytes / 1e6).toFixed(1)} MB; copy floor ${floorGBs.toFixed(1)} GB/s; ceiling ${
    ceiling.toFixed(0)
  } tokens/s`,
);
console.log("| weights | tokens/s | % of ceiling |");
console.log("| --- | ---: | ---: |");
for (const way of ["copy", "sealed"] as const) {
  const v = median(rates[way]);
  const name = way === "copy" ? "unsealed (copied per call)" : "sealed (packed copy kept)";
  console.log(`| ${name} | ${v.toFixed(0)} | ${(100 * v / ceiling).toFixed(0)}% |`);
}
console.log(`sealed / unsealed: ${(median(rates.sealed) / median(rates.copy)).toFixed(2)}×`);
