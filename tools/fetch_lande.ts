/**
 * Converts the trained network of `lande` (npm, MIT: a language detector,
 * character n-gram frequencies → dense 620→120 → ReLU → dense 120→50 →
 * softmax over 50 languages) into a TVM tensor cache that `models/lande/`
 * loads with `vm.builtin.tensor_cache.load`.
 *
 * The package exports only its `lande(text)` function, so the network's
 * files are read from its tarball (pinned by version and the registry's
 * SHA-512 integrity) and decoded by the library that wrote them, `toygrad`
 * (lande's own dependency), exactly as `lande` decodes them at import.
 *
 * Writes `.weights/lande/` (git-ignored): `tensor-cache.json` and its
 * shard (`param_0` w1 `[120, 620]`, `param_1` b1, `param_2` w2 `[50, 120]`,
 * `param_3` b2: `[out, in]`, as `vm.op.linear` reads them) and `lande.json`
 * (the languages and the n-grams of each input). Run by
 * `tools/fetch_weights.sh`, which downloads the tarball with `npm pack lande@1.0.10`.
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- a tool's own dependency, kept out of the library's imports
import { NeuralNetwork } from "npm:toygrad@2.6.0";
import { dumpTensorCache, type NDArray, tensor } from "../mod.ts";

const TARBALL = {
  /** `npm pack lande@1.0.10` writes this file. */
  name: "lande-1.0.10.tgz",
  integrity:
    "sha512-yT52DQh+UV2pEp08jOYrA4drDv0DbjpiRyZYgl25ak9G2cVR2AimzrqkYQWrD9a7Ud+qkAcaiDDoNH9DXfHPmw==",
};

/** Where the converted model goes. */
export const LANDE_DIR = new URL("../.weights/lande/", import.meta.url);

/** The files of a tar archive, by name. */
function untar(bytes: Uint8Array): Map<string, Uint8Array> {
  const files = new Map<string, Uint8Array>();
  const text = (from: number, length: number) =>
    new TextDecoder().decode(bytes.subarray(from, from + length)).replace(/\0.*$/s, "");
  for (let at = 0; at + 512 <= bytes.length;) {
    const name = text(at, 100);
    if (name === "") break; // the two zero blocks that end the archive
    const size = parseInt(text(at + 124, 12).trim() || "0", 8);
    const prefix = text(at + 345, 155);
    files.set(prefix ? `${prefix}/${name}` : name, bytes.slice(at + 512, at + 512 + size));
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return files;
}

/** A module's default export, from its source text. */
async function defaultExport(source: Uint8Array): Promise<unknown> {
  const url = `data:text/javascript;base64,${btoa(String.fromCharCode(...source))}`;
  return (await import(url)).default;
}

interface DenseLayer {
  filters: { w: Float32Array }[];
  biases: { w: Float32Array };
}

/** Whether `.weights/` already holds this tarball's conversion. */
export async function landeDone(): Promise<boolean> {
  try {
    const done = JSON.parse(await Deno.readTextFile(new URL("lande.json", LANDE_DIR)));
    return done.integrity === TARBALL.integrity;
  } catch {
    return false; // not converted yet
  }
}

/**
 * Writes lande's network as a tensor cache from the tarball npm packed into
 * `downloads`, unless already done.
 */
export async function convertLande(downloads: URL): Promise<void> {
  if (await landeDone()) {
    console.log(`lande: already in ${LANDE_DIR.pathname}`);
    return;
  }
  console.log(`lande: converting ${TARBALL.name}`);
  const gz = await Deno.readFile(new URL(TARBALL.name, downloads));
  const digest = await crypto.subtle.digest("SHA-512", gz as BufferSource);
  const integrity = `sha512-${btoa(String.fromCharCode(...new Uint8Array(digest)))}`;
  if (integrity !== TARBALL.integrity) {
    throw new Error(`${TARBALL.name}: integrity ${integrity}, expected ${TARBALL.integrity}`);
  }
  const tar = new Uint8Array(
    await new Response(new Blob([gz]).stream().pipeThrough(new DecompressionStream("gzip")))
      .arrayBuffer(),
  );
  const files = untar(tar);
  const file = (name: string) => {
    const f = files.get(`package/standalone/${name}`);
    if (f === undefined) throw new Error(`${TARBALL.name}: no standalone/${name}`);
    return f;
  };
  const options = await defaultExport(file("t50-options.js"));
  const ngrams = await defaultExport(file("t50-ngrams.js"));
  const langs = await defaultExport(file("t50-langs.js"));

  // deno-lint-ignore no-explicit-any -- toygrad ships no types for its layers
  const layers = (new NeuralNetwork(options as any) as any).layers as unknown[];
  const dense = layers.filter((l) => (l as object).constructor.name === "Dense") as DenseLayer[];
  if (dense.length !== 2) throw new Error(`lande: expected 2 dense layers, found ${dense.length}`);
  const matrix = (l: DenseLayer) => {
    const rows = l.filters.length, cols = l.filters[0].w.length;
    const out = new Float32Array(rows * cols);
    l.filters.forEach((f, r) => out.set(f.w, r * cols));
    return tensor(out, { shape: [rows, cols] });
  };
  const tensors: [string, NDArray][] = [
    ["param_0", matrix(dense[0])],
    ["param_1", tensor(Float32Array.from(dense[0].biases.w))],
    ["param_2", matrix(dense[1])],
    ["param_3", tensor(Float32Array.from(dense[1].biases.w))],
  ];
  try {
    await dumpTensorCache(tensors, LANDE_DIR, { metadata: { model: "lande 1.0.10 (t50)" } });
  } finally {
    for (const [, t] of tensors) t.dispose();
  }
  await Deno.writeTextFile(
    new URL("lande.json", LANDE_DIR),
    JSON.stringify({ source: TARBALL.name, integrity: TARBALL.integrity, langs, ngrams }) + "\n",
  );
  console.log(`lande: written to ${LANDE_DIR.pathname}`);
}
