/**
 * Real ONNX files through `importONNX` against onnxruntime-web running the
 * same files, all in this process: Silero VAD (`.weights/silero-vad/`, the
 * silero-vad wheel's `silero_vad.onnx` and `silero_vad_op18_ifless.onnx`)
 * and all-MiniLM-L6-v2 as ONNX (`.weights/all-MiniLM-L6-v2/model.onnx`, the
 * graph torch.onnx writes, made by `tools/fetch_weights.sh` through
 * `tools/onnx/minilm_onnx.py`). relaxvm on the CPU is compared
 * with onnxruntime-web's WebAssembly backend, relaxvm on WebGPU with its
 * WebGPU backend.
 *
 * ```sh
 * deno run -A bench/onnx_models_bench.ts [--rounds N] [--only silero|minilm]
 * ```
 *
 * Silero VAD: a stream of 64 chunks (2 s of 16 kHz audio, espeak-ng speech
 * with silence around it), each call carrying the previous call's state, as
 * a live stream runs; chunks per second. MiniLM: batch 1 (16 sentences, one
 * call each, padded to 32 tokens) and batch 32 (32 sentences padded to the
 * longest, one call); sentences per second. relaxvm imports each model once
 * per input shape (`inputShapes`; the export slices its position ids by the
 * token count, which relaxvm needs at import), outside the timing, as
 * onnxruntime's session creation is. Every side runs once first (shaders
 * compiled, pools filled); then `--rounds` rounds (default 3) run every side
 * in turn, so a shared machine's load falls on all alike; medians.
 * `max |Δ|/max|want|` is each relaxvm side's output against onnxruntime-web
 * wasm's on the same inputs.
 *
 * @module
 */

import { peer } from "./_peer.ts";
import {
  cpu,
  type Device,
  importONNX,
  type NDArray,
  tensor,
  VirtualMachine,
  webgpu,
} from "../mod.ts";
import { padBatch } from "../models/minilm/session.ts";
import { readWav, resample } from "../models/silero_vad/wav.ts";
import { median } from "./_stats.ts";

const roundsAt = Deno.args.indexOf("--rounds");
const ROUNDS = roundsAt >= 0 ? Number(Deno.args[roundsAt + 1]) : 3;
const SILERO = new URL("../.weights/silero-vad/", import.meta.url);
const MINILM = new URL("../.weights/all-MiniLM-L6-v2/model.onnx", import.meta.url);
const VARIANTS = ["silero_vad", "silero_vad_op18_ifless"];
const CHUNKS = 64;
const onlyAt = Deno.args.indexOf("--only");
const ONLY = onlyAt >= 0 ? Deno.args[onlyAt + 1] : "";

// Only the files of the models asked for: `--only silero` runs without MiniLM's export.
const needed = [
  ["silero", new URL("silero_vad.onnx", SILERO), "bash tools/fetch_weights.sh"],
  ["minilm", MINILM, "bash tools/fetch_weights.sh (with tools/onnx/.venv)"],
] as const;
for (const [model, file, how] of needed) {
  if (ONLY !== "" && ONLY !== model) continue;
  try {
    await Deno.stat(file);
  } catch {
    console.log(`onnx models bench: ${file.pathname} is missing; make it with ${how}`);
    Deno.exit(0);
  }
}

// deno-lint-ignore no-explicit-any -- the peer is untyped (bench/_peer.ts)
type Ort = any;
const ort: Ort = await peer("npm:onnxruntime-web@1.30.0/webgpu");
ort.env.logLevel = "error";
const gpu = await webgpu();

/** One side runs a workload once; resolves to its outputs, flattened. */
type Run = () => Promise<Float32Array>;

// ---- Silero VAD: the stream's 576-sample windows (the previous 64 samples, then 512).
const speech = await new Deno.Command("espeak-ng", {
  args: ["--stdout", "Voice activity detection in relaxvm."],
  stdout: "piped",
}).output();
const wav = readWav(speech.stdout);
const voice = resample(wav.samples, wav.sampleRate, 16000);
const audio = new Float32Array(CHUNKS * 512);
audio.set(voice.subarray(0, audio.length - 8000), 8000);
const windows = Array.from({ length: CHUNKS }, (_, i) => {
  const x = new Float32Array(576);
  const from = i * 512 - 64;
  x.set(audio.subarray(Math.max(0, from), (i + 1) * 512), from < 0 ? 64 : 0);
  return x;
});

/** Moves `params` to `device` (the CPU's are used as they are). */
function onDevice(params: readonly NDArray[], device: Device): Promise<NDArray[]> {
  return device.kind === "cpu"
    ? Promise.resolve([...params])
    : Promise.all(params.map((p) => p.copyTo(device)));
}

async function sileroRelaxvm(variant: string, device: Device): Promise<Run> {
  using sr = tensor(new BigInt64Array([16000n]), { shape: [] });
  const model = await importONNX(new URL(`${variant}.onnx`, SILERO), {
    inputShapes: { input: [1, 576], state: [2, 1, 128] },
    inputValues: { sr },
  });
  const vm = new VirtualMachine(model.executable, device);
  const params = await onDevice(model.params, device);
  const names = model.inputs.map((i) => i.name);
  return async () => {
    const probs = new Float32Array(CHUNKS);
    let state: NDArray = tensor(new Float32Array(256), { shape: [2, 1, 128] });
    for (let i = 0; i < CHUNKS; i++) {
      using input = tensor(windows[i], { shape: [1, 576] });
      const feeds: Record<string, NDArray> = { input, state };
      const args: unknown[] = names.map((n) => feeds[n]);
      if (params.length > 0) args.push(params);
      const [p, next] = await vm.invoke("main", ...args) as NDArray[];
      state.dispose();
      state = next;
      probs[i] = (await p.data() as Float32Array)[0];
      p.dispose();
    }
    state.dispose();
    return probs;
  };
}

async function sileroOrt(variant: string, provider: string): Promise<Run> {
  const session = await ort.InferenceSession.create(
    await Deno.readFile(new URL(`${variant}.onnx`, SILERO)),
    { executionProviders: [provider], logSeverityLevel: 3 },
  );
  const sr = new ort.Tensor("int64", new BigInt64Array([16000n]), []);
  return async () => {
    const probs = new Float32Array(CHUNKS);
    let state = new ort.Tensor("float32", new Float32Array(256), [2, 1, 128]);
    for (let i = 0; i < CHUNKS; i++) {
      const out = await session.run({
        input: new ort.Tensor("float32", windows[i], [1, 576]),
        state,
        sr,
      });
      state = out.stateN;
      probs[i] = (out.output.data as Float32Array)[0];
    }
    return probs;
  };
}

// ---- MiniLM: the reference sentences' token ids.
const reference = JSON.parse(
  await Deno.readTextFile(new URL("../testdata/minilm/reference.json", import.meta.url)),
);
const ids: number[][] = (reference.ids as number[][]).filter((t) => t.length >= 6).slice(0, 32);
const singles = ids.slice(0, 16).map((t) => [...t, ...new Array(32 - t.length).fill(0)]);
const singleMask = ids.slice(0, 16).map((t) =>
  t.map(() => 1).concat(new Array(32 - t.length).fill(0))
);
const batch = padBatch(ids);

/** The token batches of a workload, with their masks, as [rows, length] int64 data. */
interface Batch {
  rows: number;
  length: number;
  ids: BigInt64Array;
  mask: BigInt64Array;
}
const big = (xs: ArrayLike<number>) => BigInt64Array.from(Array.from(xs), BigInt);
const MINILM_WORK: Record<string, Batch[]> = {
  "batch 1": singles.map((t, i) => ({
    rows: 1,
    length: 32,
    ids: big(t),
    mask: big(singleMask[i]),
  })),
  "batch 32": [{
    rows: batch.rows,
    length: batch.length,
    ids: big(batch.ids),
    mask: big(batch.mask),
  }],
};

async function minilmRelaxvm(work: Batch[], device: Device): Promise<Run> {
  const shape = [work[0].rows, work[0].length];
  const model = await importONNX(MINILM, {
    inputShapes: { input_ids: shape, attention_mask: shape },
  });
  const vm = new VirtualMachine(model.executable, device);
  const params = await onDevice(model.params, device);
  return async () => {
    const outs: Float32Array[] = [];
    for (const b of work) {
      using x = tensor(b.ids, { shape: [b.rows, b.length] });
      using m = tensor(b.mask, { shape: [b.rows, b.length] });
      using y = await vm.invokeTensor("main", x, m, params);
      outs.push(new Float32Array(await y.data() as Float32Array));
    }
    return concat(outs);
  };
}

async function minilmOrt(work: Batch[], provider: string): Promise<Run> {
  const session = await ort.InferenceSession.create(await Deno.readFile(MINILM), {
    executionProviders: [provider],
    logSeverityLevel: 3,
  });
  return async () => {
    const outs: Float32Array[] = [];
    for (const b of work) {
      const shape = [b.rows, b.length];
      const out = await session.run({
        input_ids: new ort.Tensor("int64", b.ids, shape),
        attention_mask: new ort.Tensor("int64", b.mask, shape),
      });
      outs.push(new Float32Array(out.embeddings.data as Float32Array));
    }
    return concat(outs);
  };
}

function concat(xs: Float32Array[]): Float32Array {
  const out = new Float32Array(xs.reduce((n, x) => n + x.length, 0));
  let at = 0;
  for (const x of xs) {
    out.set(x, at);
    at += x.length;
  }
  return out;
}

/** A row of the table: a workload, its unit count per run, and its four sides. */
interface Row {
  name: string;
  units: number;
  unit: string;
  sides: [string, Run][];
}
const rows: Row[] = [];
for (const v of ONLY === "minilm" ? [] : VARIANTS) {
  rows.push({
    name: `${v}.onnx, ${CHUNKS} chunks`,
    units: CHUNKS,
    unit: "chunks/s",
    sides: [
      ["relaxvm cpu", await sileroRelaxvm(v, cpu())],
      ["ort-web wasm", await sileroOrt(v, "wasm")],
      ["relaxvm webgpu", await sileroRelaxvm(v, gpu)],
      ["ort-web webgpu", await sileroOrt(v, "webgpu")],
    ],
  });
}
for (const [name, work] of Object.entries(ONLY === "silero" ? {} : MINILM_WORK)) {
  rows.push({
    name: `MiniLM-ONNX ${name}`,
    units: work.reduce((n, b) => n + b.rows, 0),
    unit: "sentences/s",
    sides: [
      ["relaxvm cpu", await minilmRelaxvm(work, cpu())],
      ["ort-web wasm", await minilmOrt(work, "wasm")],
      ["relaxvm webgpu", await minilmRelaxvm(work, gpu)],
      ["ort-web webgpu", await minilmOrt(work, "webgpu")],
    ],
  });
}

/** max |got − want| / max |want|. */
function relative(got: Float32Array, want: Float32Array): number {
  let d = 0, m = 0;
  got.forEach((g, i) => {
    d = Math.max(d, Math.abs(g - want[i]));
    m = Math.max(m, Math.abs(want[i]));
  });
  return d / m;
}

const rates = new Map<string, number[]>();
const errors = new Map<string, number>();
for (let round = 0; round <= ROUNDS; round++) { // round 0 warms up and compares the outputs
  for (const row of rows) {
    const outs = new Map<string, Float32Array>();
    for (const [side, run] of row.sides) {
      const t0 = performance.now();
      const out = await run();
      const seconds = (performance.now() - t0) / 1000;
      if (round === 0) outs.set(side, out);
      else {
        const key = `${row.name}|${side}`;
        rates.set(key, [...(rates.get(key) ?? []), row.units / seconds]);
      }
    }
    if (round === 0) {
      const want = outs.get("ort-web wasm")!;
      for (const device of ["cpu", "webgpu"]) {
        errors.set(`${row.name}|${device}`, relative(outs.get(`relaxvm ${device}`)!, want));
      }
    }
  }
}

const rate = (row: Row, side: string) => median(rates.get(`${row.name}|${side}`)!);
const adapter = gpu.adapter.info;
console.log(
  `onnx models: relaxvm vs onnxruntime-web 1.30.0; adapter ${
    adapter.description || adapter.vendor
  }; ort-web wasm threads ${ort.env.wasm.numThreads ?? "default"}; ${ROUNDS} rounds, medians; ${
    new Date().toISOString().slice(0, 10)
  }`,
);
for (const row of rows) {
  for (const device of ["cpu", "webgpu"]) {
    const ours = rate(row, `relaxvm ${device}`);
    const peerName = device === "cpu" ? "ort-web wasm" : "ort-web webgpu";
    const theirs = rate(row, peerName);
    console.log(
      `${row.name} ${device}: relaxvm ${ours.toFixed(1)} ${row.unit}, ${peerName} ${
        theirs.toFixed(1)
      }, ratio ${(ours / theirs).toFixed(2)}; max |Δ|/max|want| vs ort-web wasm ${
        errors.get(`${row.name}|${device}`)!.toExponential(1)
      }`,
    );
  }
}
