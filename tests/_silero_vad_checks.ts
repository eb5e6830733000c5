/**
 * Silero VAD's ONNX variants (the silero-vad wheel's, `.weights/silero-vad/`)
 * imported and run chunk by chunk against onnxruntime on the same windows of
 * real speech (espeak-ng's, with silence around it), each side carrying its
 * own LSTM state from call to call: every chunk's probability and the final
 * state within max |Δ| / max |want| ≤ 1e-4. Shared by `silero_vad_test.ts`
 * (CPU) and `webgpu/silero_vad_suite.ts`.
 *
 * @module
 */

import { assert } from "@std/assert";
import { type Device, importONNX, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { readWav, resample } from "../models/silero_vad/wav.ts";
import { SileroVAD } from "../models/silero_vad/session.ts";
import { decodeModel } from "../onnx/onnx_proto.ts";
import { haveOnnxruntime, onnxruntimeRun, relativeError } from "./_onnx_reference.ts";
import { ignoreWithoutWeights, requireWeights, weightsDir } from "./_weights.ts";

/** The variants checked: every streaming one of the wheel's (not `_16k_sequence`). */
export const SILERO_VARIANTS = [
  "silero_vad",
  "silero_vad_16k_op15",
  "silero_vad_half",
  "silero_vad_op18_ifless",
  "silero_vad_openvino_16k",
] as const;

/** Where the ONNX files are. */
export const SILERO_DIR = weightsDir("silero-vad");
const FILES = [...SILERO_VARIANTS, "silero_vad_16k_sequence"].map((v) => `${v}.onnx`);

/** The bound each variant is held to: max |Δ| / max |want|. */
export const BOUND = 1e-4;

/** Whether espeak-ng runs here (CI installs it; without it the checks are ignored). */
export function haveEspeak(): boolean {
  try {
    return new Deno.Command("espeak-ng", { args: ["--version"], stdout: "null", stderr: "null" })
      .outputSync().success;
  } catch {
    if (Deno.env.get("RELAXVM_REQUIRE_WEIGHTS") === "1") return true; // fail in the test instead
    console.warn("no espeak-ng: the Silero VAD checks are ignored (apt-get install espeak-ng)");
    return false;
  }
}

/** Whether the checks are ignored here (no model files, no onnxruntime venv or no espeak-ng). */
export function ignoreSilero(): boolean {
  return ignoreWithoutWeights("silero-vad", SILERO_DIR, FILES) || !haveOnnxruntime() ||
    !haveEspeak();
}

/** `text` spoken by espeak-ng at 16 kHz, with `pad` seconds of silence before and after. */
export async function spoken(text: string, pad = 0.3): Promise<Float32Array> {
  const out = await new Deno.Command("espeak-ng", { args: ["--stdout", text], stdout: "piped" })
    .output();
  assert(out.success, "espeak-ng failed");
  const wav = readWav(out.stdout);
  const voice = resample(wav.samples, wav.sampleRate, 16000);
  const audio = new Float32Array(voice.length + 2 * Math.round(pad * 16000));
  audio.set(voice, Math.round(pad * 16000));
  return audio;
}

/** What one variant gave against onnxruntime. */
export interface SileroComparison {
  chunks: number;
  probs: number;
  state: number;
}

/** Runs `variant` on `device` and on onnxruntime over the first `chunks` chunks of `audio`. */
export async function compareSilero(
  variant: string,
  device: Device,
  audio: Float32Array,
  chunks: number,
): Promise<SileroComparison> {
  requireWeights("silero-vad", SILERO_DIR, FILES);
  const file = new URL(`${variant}.onnx`, SILERO_DIR);
  using vad = await SileroVAD.create(file, { device });
  const got = await vad.probabilities(audio.subarray(0, chunks * vad.chunkSize));
  const gotState = await vad.state();
  // The same windows SileroVAD feeds: the previous 64 samples, then the chunk's 512.
  const model = await Deno.readFile(file);
  const hasSr = decodeModel(model).graph!.inputs.some((v) => v.name === "sr");
  const calls = [];
  for (let i = 0; i < chunks; i++) {
    const x = new Float32Array(576);
    const from = i * 512 - 64;
    x.set(audio.subarray(Math.max(0, from), (i + 1) * 512), from < 0 ? 64 : 0);
    const feeds: Record<
      string,
      { dtype: "float32" | "int64"; shape: number[]; data: Float32Array | BigInt64Array }
    > = {
      input: { dtype: "float32", shape: [1, 576], data: x },
    };
    if (i === 0) {
      feeds.state = { dtype: "float32", shape: [2, 1, 128], data: new Float32Array(256) };
    }
    if (hasSr) feeds.sr = { dtype: "int64", shape: [], data: new BigInt64Array([16000n]) };
    calls.push(feeds);
  }
  const outs = await onnxruntimeRun(file, calls, { stateN: "state" });
  const want = outs.map((o) => (o.output.data as Float32Array)[0]);
  const wantState = outs[outs.length - 1].stateN.data as Float32Array;
  return {
    chunks,
    probs: relativeError(got, want),
    state: relativeError(gotState, wantState),
  };
}

/**
 * `silero_vad_16k_sequence.onnx`, which takes many windows `[n, 576]` through its LSTM in one call
 * (h and c given apart), imported with `n` fixed, against onnxruntime: the probabilities, hn, cn.
 */
export async function compareSileroSequence(
  device: Device,
  audio: Float32Array,
  n: number,
): Promise<number> {
  requireWeights("silero-vad", SILERO_DIR, FILES);
  const file = new URL("silero_vad_16k_sequence.onnx", SILERO_DIR);
  const x = new Float32Array(n * 576);
  for (let i = 0; i < n; i++) {
    const from = i * 512 - 64;
    x.set(audio.subarray(Math.max(0, from), (i + 1) * 512), i * 576 + (from < 0 ? 64 : 0));
  }
  const zeros = () => new Float32Array(128);
  using model = await importONNX(file, { inputShapes: { input: [n, 576] } });
  const vm = new VirtualMachine(model.executable, device);
  using input = tensor(x, { shape: [n, 576] });
  using h = tensor(zeros(), { shape: [1, 1, 128] });
  using c = tensor(zeros(), { shape: [1, 1, 128] });
  const outs = await vm.invoke("main", input, h, c, model.params) as NDArray[];
  const got = await Promise.all(
    outs.map(async (t) => new Float32Array(await t.data() as Float32Array)),
  );
  for (const t of outs) t.dispose();
  const [want] = await onnxruntimeRun(file, [{
    input: { dtype: "float32", shape: [n, 576], data: x },
    h: { dtype: "float32", shape: [1, 1, 128], data: zeros() },
    c: { dtype: "float32", shape: [1, 1, 128], data: zeros() },
  }]);
  return Math.max(
    relativeError(got[0], want.speech_probs.data as Float32Array),
    relativeError(got[1], want.hn.data as Float32Array),
    relativeError(got[2], want.cn.data as Float32Array),
  );
}

/** Registers one test per variant through `register`, on the device `getDevice` gives. */
export function defineSileroTests(
  label: string,
  getDevice: () => Promise<Device>,
  register: (name: string, fn: () => Promise<void>) => void,
): void {
  let audio: Promise<Float32Array> | undefined;
  for (const variant of SILERO_VARIANTS) {
    register(
      `${label}: Silero VAD ${variant}.onnx matches onnxruntime over 48 chunks of speech, state carried`,
      async () => {
        audio ??= spoken("Silero voice activity detection, imported from ONNX.");
        const r = await compareSilero(variant, await getDevice(), await audio, 48);
        const detail = `probabilities ${r.probs.toExponential(2)}, state ${
          r.state.toExponential(2)
        } (max |Δ| / max |want|)`;
        assert(r.probs <= BOUND && r.state <= BOUND, `${variant} on ${label}: ${detail}`);
      },
    );
  }
  register(
    `${label}: Silero VAD silero_vad_16k_sequence.onnx (16 windows in one call) matches onnxruntime`,
    async () => {
      audio ??= spoken("Silero voice activity detection, imported from ONNX.");
      const err = await compareSileroSequence(await getDevice(), await audio, 16);
      assert(err <= BOUND, `max |Δ| / max |want| ${err.toExponential(2)} on ${label}`);
    },
  );
}
