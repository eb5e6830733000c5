/**
 * The GPT-2-style decoder of models/gpt (`small`: vocab 4096, d_model 384,
 * 6 layers, 6 heads, context 256) through relaxvm against the same model
 * written with TensorFlow.js ops (bench/_gpt_tfjs.ts), from identical
 * weights, in one process: WebGPU (`tfjs-backend-webgpu` on the same
 * adapter) and CPU (`tfjs-backend-cpu`).
 *
 * ```sh
 * deno run -A bench/gpt_bench.ts            # everything (about two minutes on llvmpipe)
 * deno run -A bench/gpt_bench.ts --quick    # shorter TF.js WebGPU warm-up
 * ```
 *
 * What is measured, each side warm (one identical run first: shaders
 * compiled, pools filled):
 *
 * - decode: a 16-token prompt, then 64 greedy steps, each one model call, one
 *   read back of the logits and an argmax on the host; tokens/s over the 64
 *   steps. `max logit rel diff` is the largest `max|a - b| / max|b|` between
 *   relaxvm's and TF.js's logits over the steps (both follow their own
 *   greedy choice; the line says whether the tokens agree).
 * - prefill: a 64-token prompt into empty caches, logits read back; median.
 * - decode_n (relaxvm only, issue 13's GPU-resident decoding): the same 64
 *   tokens generated N at a time (N = 1, 8, 32), the token chosen on the
 *   device, one read back per call; greedy, and checked equal to the
 *   token-by-token output. relaxvm's runs alternate between the token-by-token
 *   loop and the three batch sizes, three rounds after a warm-up round, so
 *   the load of a shared machine falls on all of them alike.
 * - memory: `memory_stats()` of the relaxvm VM (weights, which the VM's own
 *   tensor cache holds in its allocator, KV caches and activations), against
 *   the weights plus the KV caches.
 * - waits: `mapAsync` / `onSubmittedWorkDone` calls per generated token.
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import * as tf from "npm:@tensorflow/tfjs-core@4.22.0";
// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import "npm:@tensorflow/tfjs-backend-cpu@4.22.0";
// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import "npm:@tensorflow/tfjs-backend-webgpu@4.22.0";
import { cpu, type Device, webgpu } from "../mod.ts";
import { type GPTConfig, SMALL } from "../models/gpt/config.ts";
import { buildGPT } from "../models/gpt/program.ts";
import { argmax, GPTSession } from "../models/gpt/session.ts";
import { makeWeights, paramCount, paramSpecs } from "../models/gpt/weights.ts";
import { TfjsGPT } from "./_gpt_tfjs.ts";
import { median } from "./_stats.ts";

const PROMPT = 16, STEPS = 64, PREFILL = 64;

/** A deterministic prompt of `n` tokens. */
function prompt(c: GPTConfig, n: number): number[] {
  return Array.from({ length: n }, (_, i) => (i * 7919 + 13) % c.vocab);
}

/** One greedy run: the 64 steps' logits and tokens, and the time of the steps. */
interface DecodeRun {
  ms: number;
  tokens: number[];
  logits: Float32Array[];
}

/** The runs a side can do. */
interface Side {
  decode(steps: number): Promise<DecodeRun>;
  prefill(): Promise<number>;
}

function relaxvmSide(s: GPTSession): Side {
  return {
    async decode(steps) {
      s.reset();
      let token = argmax(await s.prefill(prompt(s.config, PROMPT)));
      const tokens: number[] = [], logits: Float32Array[] = [];
      const t0 = performance.now();
      for (let i = 0; i < steps; i++) {
        const l = await s.decode(token);
        token = argmax(l);
        tokens.push(token);
        logits.push(l);
      }
      return { ms: performance.now() - t0, tokens, logits };
    },
    async prefill() {
      s.reset();
      const t0 = performance.now();
      await s.prefill(prompt(s.config, PREFILL));
      return performance.now() - t0;
    },
  };
}

function tfjsSide(m: TfjsGPT, c: GPTConfig): Side {
  const run = async (tokens: number[]) => {
    const t = m.forward(tokens);
    const data = await t.data() as Float32Array;
    t.dispose();
    return data;
  };
  return {
    async decode(steps) {
      m.reset();
      let token = argmax(await run(prompt(c, PROMPT)));
      const tokens: number[] = [], logits: Float32Array[] = [];
      const t0 = performance.now();
      for (let i = 0; i < steps; i++) {
        const l = await run([token]);
        token = argmax(l);
        tokens.push(token);
        logits.push(l);
      }
      return { ms: performance.now() - t0, tokens, logits };
    },
    async prefill() {
      m.reset();
      const t0 = performance.now();
      await run(prompt(c, PREFILL));
      return performance.now() - t0;
    },
  };
}

/** The median run of `runs` (by time) after `warm` warm-up steps. */
async function measureDecode(side: Side, warm: number, runs: number): Promise<DecodeRun> {
  await side.decode(warm);
  const done: DecodeRun[] = [];
  for (let i = 0; i < runs; i++) done.push(await side.decode(STEPS));
  done.sort((a, b) => a.ms - b.ms);
  return done[done.length >> 1];
}

async function measurePrefill(side: Side, runs: number): Promise<number> {
  await side.prefill();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(await side.prefill());
  return median(times);
}

/** `max|a - b| / max|b|` over every step. */
function maxRelDiff(a: Float32Array[], b: Float32Array[]): number {
  let worst = 0;
  for (let s = 0; s < Math.min(a.length, b.length); s++) {
    let diff = 0, scale = 0;
    for (let i = 0; i < b[s].length; i++) {
      diff = Math.max(diff, Math.abs(a[s][i] - b[s][i]));
      scale = Math.max(scale, Math.abs(b[s][i]));
    }
    worst = Math.max(worst, diff / scale);
  }
  return worst;
}

/** Calls of `mapAsync` and `onSubmittedWorkDone` (every way to wait for a GPU) during `fn`. */
async function countWaits(fn: () => Promise<void>): Promise<number> {
  const map = GPUBuffer.prototype.mapAsync, done = GPUQueue.prototype.onSubmittedWorkDone;
  let waits = 0;
  GPUBuffer.prototype.mapAsync = function (...args) {
    waits++;
    return map.apply(this, args);
  };
  GPUQueue.prototype.onSubmittedWorkDone = function () {
    waits++;
    return done.apply(this);
  };
  try {
    await fn();
  } finally {
    GPUBuffer.prototype.mapAsync = map;
    GPUQueue.prototype.onSubmittedWorkDone = done;
  }
  return waits;
}

/** One greedy run of decode_n: the 64 tokens generated `n` per call, and the time. */
async function decodeNRun(s: GPTSession, n: number): Promise<{ ms: number; tokens: number[] }> {
  s.reset();
  let token = argmax(await s.prefill(prompt(s.config, PROMPT)));
  const tokens: number[] = [];
  const t0 = performance.now();
  while (tokens.length < STEPS) {
    const ids = await s.decodeN(token, Math.min(n, STEPS - tokens.length));
    tokens.push(...ids);
    token = ids[ids.length - 1];
  }
  return { ms: performance.now() - t0, tokens };
}

/**
 * relaxvm on one device: token by token and decode_n with N = 1, 8, 32,
 * interleaved over `rounds` rounds after a warm-up round (so drift on a
 * shared machine hits every variant alike); the median run of each.
 */
async function relaxvmRuns(s: GPTSession, rounds: number) {
  const side = relaxvmSide(s);
  const ns = [1, 8, 32];
  const byToken: DecodeRun[] = [];
  const batched: { ms: number; tokens: number[] }[][] = ns.map(() => []);
  for (let r = 0; r <= rounds; r++) {
    const run = await side.decode(STEPS);
    const batches = [];
    for (const n of ns) batches.push(await decodeNRun(s, n));
    if (r === 0) continue; // warm-up
    byToken.push(run);
    batches.forEach((b, i) => batched[i].push(b));
  }
  const mid = <T extends { ms: number }>(xs: T[]) =>
    [...xs].sort((a, b) => a.ms - b.ms)[xs.length >> 1];
  const tokenByToken = mid(byToken);
  return {
    tokenByToken,
    decodeN: ns.map((n, i) => {
      const m = mid(batched[i]);
      return {
        n,
        tokPerS: STEPS / m.ms * 1000,
        same: m.tokens.every((t, j) => t === tokenByToken.tokens[j]),
      };
    }),
  };
}

const MiB = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
const f1 = (x: number) => x.toFixed(1);

async function main(quick: boolean): Promise<void> {
  const c = SMALL;
  const gpu = await webgpu();
  const info = gpu.adapter.info;
  console.log(
    `gpt-${c.name}: vocab ${c.vocab}, d_model ${c.dModel}, ${c.layers} layers, ${c.heads} heads, ` +
      `context ${c.context}, ${(paramCount(c) / 1e6).toFixed(1)}M parameters; ` +
      `adapter ${info.description || info.vendor}; ${new Date().toISOString().slice(0, 10)}`,
  );
  console.log(
    `decode: ${PROMPT}-token prompt, ${STEPS} greedy steps, one read back per step; prefill: ` +
      `${PREFILL} tokens; warm; medians`,
  );
  const weights = makeWeights(c, 1);
  const shapes = paramSpecs(c).map((s) => [...s.shape]);
  const ex = buildGPT(c);
  const sessions = new Map<Device, GPTSession>();
  for (const device of [gpu, cpu()]) {
    sessions.set(device, await GPTSession.create(c, { device, executable: ex }));
  }
  tf.enableProdMode();

  const decodeNLines: string[] = [];
  for (const [name, device] of [["webgpu", gpu], ["cpu", cpu()]] as const) {
    const session = sessions.get(device)!;
    const mine = await relaxvmRuns(session, 3);
    const ours = mine.tokenByToken;
    await tf.setBackend(name);
    await tf.ready();
    const model = new TfjsGPT(c, weights, shapes);
    const theirs = await measureDecode(
      tfjsSide(model, c),
      name === "webgpu" && quick ? 8 : STEPS,
      name === "webgpu" ? 1 : 3,
    );
    const a = STEPS / ours.ms * 1000, b = STEPS / theirs.ms * 1000;
    const same = ours.tokens.every((t, i) => t === theirs.tokens[i]);
    console.log(
      `gpt decode ${name}: relaxvm ${f1(a)} tok/s, tfjs ${f1(b)} tok/s, ratio ${
        (a / b).toFixed(2)
      }, max logit rel diff ${maxRelDiff(ours.logits, theirs.logits).toExponential(1)}` +
        (same ? "" : " (greedy tokens differ)"),
    );
    if (name === "webgpu") {
      const x = await measurePrefill(relaxvmSide(session), 5);
      const y = await measurePrefill(tfjsSide(model, c), 3);
      console.log(
        `gpt prefill webgpu (${PREFILL} tokens): relaxvm ${f1(x)} ms, tfjs ${f1(y)} ms, ratio ${
          (y / x).toFixed(2)
        }`,
      );
    }
    model.dispose();
    // GPU-resident decoding: N tokens per VM call, one wait per call.
    decodeNLines.push(
      `gpt decode_n ${name}: ${
        mine.decodeN.map((d) =>
          `N=${d.n} ${f1(d.tokPerS)} tok/s (${(d.tokPerS / b).toFixed(1)}× tfjs)${
            d.same ? "" : " TOKENS DIFFER"
          }`
        ).join(", ")
      }; token by token ${f1(a)} tok/s; greedy, same tokens`,
    );
  }
  for (const line of decodeNLines) console.log(line);

  // Waits per token, and memory.
  const s = sessions.get(gpu)!;
  s.reset();
  let token = argmax(await s.prefill(prompt(c, PROMPT)));
  const perToken = await countWaits(async () => {
    for (let i = 0; i < 16; i++) token = argmax(await s.decode(token));
  }) / 16;
  const perCall = await countWaits(async () => {
    await s.decodeN(token, 32);
  });
  console.log(
    `gpt waits webgpu: ${perToken} per token (token by token), ${perCall} per decode_n call of 32`,
  );
  const weightBytes = paramCount(c) * 4;
  const cacheBytes = 2 * c.layers * c.context * c.dModel * 4;
  for (const [name, device] of [["webgpu", gpu], ["cpu", cpu()]] as const) {
    const peak = sessions.get(device)!.vm.memory_stats(device).peakBytes;
    const total = peak;
    console.log(
      `gpt memory ${name}: peak ${MiB(total)} MiB (the VM's: weights ${MiB(weightBytes)} ` +
        `in its tensor cache, KV caches and activations) vs weights + KV caches ${
          MiB(weightBytes + cacheBytes)
        } MiB: ${(total / (weightBytes + cacheBytes)).toFixed(3)}×`,
    );
  }
  for (const session of sessions.values()) session.dispose();
}

await main(Deno.args.includes("--quick"));
