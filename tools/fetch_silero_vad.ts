/**
 * Extracts Silero VAD's ONNX models (MIT, the Silero Team) from the PyPI
 * wheel `silero-vad` 6.2.3 into `.weights/silero-vad/`, for
 * `models/silero_vad/`, `examples/vad.ts` and the tests against onnxruntime.
 *
 * The wheel ships the model as TorchScript (`silero_vad.jit`), safetensors
 * and seven ONNX files under `silero_vad/data/`; this takes the ONNX ones:
 * the default `silero_vad.onnx` (opset 16, 8 and 16 kHz behind an `If` on
 * `sr`), `silero_vad_16k_op15.onnx` (opset 15), `silero_vad_half.onnx`
 * (float16 weights, 16 kHz, no `sr` input), `silero_vad_op18_ifless.onnx`
 * (opset 18, its LSTM spelled out with `Gemm`), `silero_vad_openvino_16k.onnx`
 * (a fixed `[1, 576]` input) and `silero_vad_16k_sequence.onnx` (many chunks
 * through the LSTM at once). The wheel and each file are pinned by SHA-256:
 * a different byte fails before anything is written. `tools/fetch_weights.sh`
 * downloads the wheel with pip (`pip download --no-deps`, nothing installed).
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- a tool's own dependency, kept out of the library's imports
import { unzipSync } from "npm:fflate@0.8.2";

const WHEEL = {
  /** `pip download --no-deps silero-vad==6.2.3` writes this file. */
  name: "silero_vad-6.2.3-py3-none-any.whl",
  sha256: "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8",
};

/** The ONNX files taken from the wheel's `silero_vad/data/`, by name, with their SHA-256. */
export const SILERO_VAD_FILES: Readonly<Record<string, string>> = {
  "silero_vad.onnx": "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
  "silero_vad_16k_op15.onnx": "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49",
  "silero_vad_half.onnx": "1e0b195ad4806595ef4466f419d16fca7e4afcfc6669b8c0b5f76ea87547c769",
  "silero_vad_op18_ifless.onnx": "7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28",
  "silero_vad_openvino_16k.onnx":
    "7776b81ad1b0350c15d7f1555943b9232eb53e9ca5d989c6d0cea9ebc8664d87",
  "silero_vad_16k_sequence.onnx":
    "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85",
};

/** Where the files go (relative to the repository root). */
export const SILERO_VAD_DIR = new URL("../.weights/silero-vad/", import.meta.url);

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as BufferSource);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Whether `.weights/silero-vad/` already holds this wheel's files. */
export async function sileroVADDone(): Promise<boolean> {
  try {
    const source = JSON.parse(await Deno.readTextFile(new URL("source.json", SILERO_VAD_DIR)));
    return source.sha256 === WHEEL.sha256;
  } catch {
    return false;
  }
}

/** Extracts the ONNX files from the wheel pip downloaded into `downloads`, unless done. */
export async function extractSileroVAD(downloads: URL): Promise<void> {
  if (await sileroVADDone()) {
    console.log(`silero-vad: already in ${SILERO_VAD_DIR.pathname}`);
    return;
  }
  console.log(`silero-vad: extracting ${WHEEL.name}`);
  const wheel = await Deno.readFile(new URL(WHEEL.name, downloads));
  const digest = await sha256(wheel);
  if (digest !== WHEEL.sha256) {
    throw new Error(`${WHEEL.name}: SHA-256 ${digest}, expected ${WHEEL.sha256}`);
  }
  const path = (name: string) => `silero_vad/data/${name}`;
  const files = unzipSync(wheel, {
    filter: (f) => Object.keys(SILERO_VAD_FILES).some((n) => f.name === path(n)),
  });
  for (const [name, want] of Object.entries(SILERO_VAD_FILES)) {
    const bytes = files[path(name)];
    if (bytes === undefined) throw new Error(`${WHEEL.name}: no ${path(name)}`);
    const got = await sha256(bytes);
    if (got !== want) {
      throw new Error(`${WHEEL.name}: ${name} has SHA-256 ${got}, expected ${want}`);
    }
  }
  await Deno.mkdir(SILERO_VAD_DIR, { recursive: true });
  for (const name of Object.keys(SILERO_VAD_FILES)) {
    await Deno.writeFile(new URL(name, SILERO_VAD_DIR), files[path(name)]);
  }
  await Deno.writeTextFile(
    new URL("source.json", SILERO_VAD_DIR),
    JSON.stringify({ wheel: WHEEL.name, sha256: WHEEL.sha256, files: SILERO_VAD_FILES }, null, 2) +
      "\n",
  );
  const count = Object.keys(SILERO_VAD_FILES).length;
  console.log(`silero-vad: ${count} ONNX files written to ${SILERO_VAD_DIR.pathname}`);
}
