/**
 * all-MiniLM-L6-v2 with its real weights (models/minilm) through relaxvm
 * against what users run for it, all in this process, on the same tokens:
 * onnxruntime-web with its WebAssembly and its WebGPU execution providers,
 * and onnxruntime-node (native CPU), each running the model's ONNX export
 * (`.weights/all-MiniLM-L6-v2/model.onnx`: encoder, mean pooling and
 * normalization in one graph as torch.onnx exports them, written from the
 * same weights by `tools/onnx/minilm_onnx.py`, which `tools/fetch_weights.sh`
 * runs).
 *
 * ```sh
 * deno run -A bench/minilm_bench.ts [--rounds N]
 * ```
 *
 * Sentences per second, warm, for batch 1 (16 sentences one call each) and
 * batch 32 (32 sentences padded to the longest, one call), over the first
 * reference sentences of `testdata/minilm/` (6 to 27 tokens). Every side
 * runs once first (shaders compiled, pools filled); then `--rounds` rounds
 * (default 2) run every side in turn, so the load of a shared machine falls
 * on all of them alike; the table holds medians. `max diff` is the largest
 * absolute difference of a side's embeddings from relaxvm's on the CPU.
 *
 * Without the weights or the ONNX file it says how to make them and exits.
 *
 * @module
 */

import { peer } from "./_peer.ts";
import { cpu, webgpu } from "../mod.ts";
import { buildMiniLM } from "../models/minilm/program.ts";
import { MiniLMSession, padBatch } from "../models/minilm/session.ts";
import { median } from "./_stats.ts";

const WEIGHTS = new URL("../.weights/all-MiniLM-L6-v2/", import.meta.url);
const ONNX = new URL("model.onnx", WEIGHTS);
const roundsAt = Deno.args.indexOf("--rounds");
const ROUNDS = roundsAt >= 0 ? Number(Deno.args[roundsAt + 1]) : 2;
const D = 384;

for (
  const [file, how] of [
    [new URL("tensor-cache.json", WEIGHTS), "bash tools/fetch_weights.sh"],
    [ONNX, "bash tools/fetch_weights.sh (with tools/onnx/.venv)"],
  ] as const
) {
  try {
    await Deno.stat(file);
  } catch {
    console.log(`minilm bench: ${file.pathname} is missing; make it with ${how}`);
    Deno.exit(0);
  }
}

/** A side embeds a padded batch; resolves to `[rows × 384]`. */
type Embed = (ids: readonly (readonly number[])[]) => Promise<Float32Array>;

function relaxvmSide(session: MiniLMSession): Embed {
  return async (ids) => {
    const rows = await session.embedBatch(ids);
    const out = new Float32Array(rows.length * D);
    rows.forEach((r, i) => out.set(r, i * D));
    return out;
  };
}

/** What the bench uses of either onnxruntime package (their APIs are the same). */
// deno-lint-ignore no-explicit-any -- the peers are untyped (bench/_peer.ts)
type Ort = any;

async function ortSide(
  ort: Ort,
  model: Uint8Array,
  options: Record<string, unknown>,
): Promise<Embed> {
  const session = await ort.InferenceSession.create(
    model,
    options,
  );
  return async (ids) => {
    const b = padBatch(ids);
    const shape = [b.rows, b.length];
    const feeds = {
      input_ids: new ort.Tensor("int64", BigInt64Array.from(b.ids, BigInt), shape),
      attention_mask: new ort.Tensor("int64", BigInt64Array.from(b.mask, BigInt), shape),
    };
    const out = await session.run(feeds);
    return out.embeddings.data as Float32Array;
  };
}

const ortWeb: Ort = await peer("npm:onnxruntime-web@1.30.0/webgpu");
const ortNode: Ort = await peer("npm:onnxruntime-node@1.30.0");

const gpu = await webgpu();
const executable = buildMiniLM();
const onCpu = await MiniLMSession.create(WEIGHTS, { executable, device: cpu() });
const onGpu = await MiniLMSession.create(WEIGHTS, { executable, device: gpu });
const model = await Deno.readFile(ONNX);
const sides: [string, Embed][] = [
  ["relaxvm cpu", relaxvmSide(onCpu)],
  ["relaxvm webgpu", relaxvmSide(onGpu)],
  ["ort-web wasm", await ortSide(ortWeb, model, { executionProviders: ["wasm"] })],
  ["ort-web webgpu", await ortSide(ortWeb, model, { executionProviders: ["webgpu"] })],
  ["ort-node cpu", await ortSide(ortNode, model, {})],
];

const reference = JSON.parse(
  await Deno.readTextFile(new URL("../testdata/minilm/reference.json", import.meta.url)),
);
const sentences: string[] = reference.sentences.filter((s: string) => s.length > 15).slice(0, 32);
const tokens = sentences.map((s) => onCpu.tokenize(s));
const singles = tokens.slice(0, 16);
const lengths = tokens.map((t) => t.length);

/** Sentences per second for one pass of `batches`, and the embeddings. */
async function pass(embed: Embed, batches: number[][][]): Promise<[number, Float32Array[]]> {
  const outs: Float32Array[] = [];
  const t0 = performance.now();
  for (const b of batches) outs.push(await embed(b));
  const seconds = (performance.now() - t0) / 1000;
  return [batches.reduce((n, b) => n + b.length, 0) / seconds, outs];
}

const workloads = { "batch 1": singles.map((t) => [t]), "batch 32": [tokens] };
const rates = new Map<string, number[]>();
const diffs = new Map<string, number>();
const baseline = new Map<string, Float32Array[]>();
for (let round = 0; round <= ROUNDS; round++) { // round 0 warms up
  for (const [name, embed] of sides) {
    for (const [workload, batches] of Object.entries(workloads)) {
      const [rate, outs] = await pass(embed, batches);
      if (round === 0) {
        if (name === "relaxvm cpu") baseline.set(workload, outs);
        const ref = baseline.get(workload)!;
        let worst = 0;
        outs.forEach((o, i) =>
          o.forEach((v, j) => worst = Math.max(worst, Math.abs(v - ref[i][j])))
        );
        diffs.set(name, Math.max(diffs.get(name) ?? 0, worst));
        continue;
      }
      const key = `${name}|${workload}`;
      rates.set(key, [...(rates.get(key) ?? []), rate]);
    }
  }
}

const rate = (name: string, workload: string) => median(rates.get(`${name}|${workload}`)!);
const adapter = gpu.adapter.info;
console.log(
  `minilm (all-MiniLM-L6-v2, 22.7M parameters, real weights); ${sentences.length} sentences of ` +
    `${Math.min(...lengths)}–${Math.max(...lengths)} tokens; adapter ${
      adapter.description || adapter.vendor
    }; ort-web wasm threads ${ortWeb.env.wasm.numThreads ?? "default"}; ` +
    `${ROUNDS} rounds, medians; ${new Date().toISOString().slice(0, 10)}`,
);
for (const workload of Object.keys(workloads)) {
  for (const device of ["cpu", "webgpu"]) {
    const ours = rate(`relaxvm ${device}`, workload);
    const peer = device === "cpu" ? "ort-web wasm" : "ort-web webgpu";
    const theirs = rate(peer, workload);
    console.log(
      `minilm ${workload} ${device}: relaxvm ${ours.toFixed(1)} sentences/s, ${peer} ` +
        `${theirs.toFixed(1)}, ratio ${(ours / theirs).toFixed(2)}; ort-node cpu ` +
        `${rate("ort-node cpu", workload).toFixed(1)}`,
    );
  }
}
console.log(
  `minilm max abs diff from relaxvm cpu: ${
    sides.slice(1).map(([n]) => `${n} ${diffs.get(n)!.toExponential(1)}`).join(", ")
  }`,
);
onCpu.dispose();
onGpu.dispose();
