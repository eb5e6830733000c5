/**
 * The engine's aggregate throughput (engine/, continuous batching) serving relaxvm's
 * GPT (models/gpt, `small` by default: vocab 4096, d_model 384, 6 layers, context 256)
 * on a paged KV cache, at 1, 4 and 16 concurrent requests, on the CPU and on WebGPU, in
 * one process.
 *
 * ```sh
 * deno run -A bench/engine_bench.ts             # small, 16-token prompts, 32 tokens each
 * deno run -A bench/engine_bench.ts --tiny      # the test model, a quick look
 * ```
 *
 * Each request: a 16-token prompt, 32 greedy tokens (`max_tokens`), no stop. A level
 * runs its N requests at once (`Promise.all`) after one warm-up run of the same level;
 * aggregate tokens/s is N × 32 over the wall time from the first `create` to the last
 * completion (prefills included), per request the aggregate over N. Steps are the
 * engine's forwards in the run (one batched model call and one logits read back each).
 * On Linux each line also gives the CPU time the process spent per token (all its
 * threads, llvmpipe's among them, from `/proc/self/task/<tid>/schedstat`): on a
 * software adapter that is the work a token costs, which the load of a shared
 * machine changes far less than the wall time; the first line gives the load average.
 *
 * @module
 */

import { cpu, type Device, Engine, webgpu } from "../mod.ts";
import { SMALL, TINY } from "../models/gpt/config.ts";
import { buildPagedGPT } from "../models/gpt/paged_program.ts";
import { PagedGPT } from "../models/gpt/paged_session.ts";

const config = Deno.args.includes("--tiny") ? TINY : SMALL;
const PROMPT = 16, TOKENS = 32, LEVELS = [1, 4, 16];
const executable = buildPagedGPT(config);

/** CPU time of all the process's threads so far, in ms; null where /proc cannot tell. */
function processCpuMs(): number | null {
  try {
    let ns = 0;
    for (const task of Deno.readDirSync("/proc/self/task")) {
      try {
        ns += Number(Deno.readTextFileSync(`/proc/self/task/${task.name}/schedstat`).split(" ")[0]);
      } catch {
        // The thread ended between the listing and the read.
      }
    }
    return ns / 1e6;
  } catch {
    return null;
  }
}

/** The load average over 1, 5 and 15 minutes (Linux), else "unknown". */
function loadAverage(): string {
  try {
    return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  } catch {
    return "unknown";
  }
}

async function run(
  engine: Engine,
  n: number,
): Promise<{ ms: number; steps: number; cpuMs: number | null }> {
  const steps = engine.stats().steps;
  const cpu0 = processCpuMs();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: n }, (_, i) =>
    engine.completions.create({
      prompt: String.fromCharCode(...Array.from({ length: PROMPT }, (_, j) => 97 + (i + j) % 26)),
      max_tokens: TOKENS,
      temperature: 0,
    })));
  const ms = performance.now() - t0, cpu1 = processCpuMs();
  const cpuMs = cpu0 === null || cpu1 === null ? null : cpu1 - cpu0;
  return { ms, steps: engine.stats().steps - steps, cpuMs };
}

async function measure(label: string, device: Device): Promise<void> {
  const model = await PagedGPT.create(config, {
    executable,
    device,
    pageSize: 16,
    maxTotalSequenceLength: 16 * (PROMPT + TOKENS + 16),
    maxBatchSize: 16,
    prefillChunkSize: 16 * PROMPT,
  });
  try {
    const engine = new Engine(model);
    let one = 0;
    for (const n of LEVELS) {
      await run(engine, n); // warm: shaders, pools
      const { ms, steps, cpuMs } = await run(engine, n);
      const rate = (n * TOKENS) / (ms / 1000);
      if (n === 1) one = rate;
      console.log(
        `${label.padEnd(22)} ${String(n).padStart(2)} concurrent  ${
          rate.toFixed(1).padStart(7)
        } tokens/s  ` +
          `(${(rate / n).toFixed(1)} per request, ${steps} steps, ${(rate / one).toFixed(2)}× one` +
          (cpuMs === null ? ")" : `, CPU ${(cpuMs / (n * TOKENS)).toFixed(2)} ms a token)`),
      );
    }
  } finally {
    model.dispose();
  }
}

console.log(
  `engine, GPT ${config.name}: ${PROMPT}-token prompts, ${TOKENS} greedy tokens each; load ${loadAverage()}`,
);
await measure("cpu", cpu());
let gpu: Device | null = null;
try {
  gpu = await webgpu();
} catch (e) {
  console.log(`webgpu: no adapter (${(e as Error).message})`);
}
if (gpu !== null) await measure(`webgpu`, gpu);
