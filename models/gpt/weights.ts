/**
 * The decoder's weights: which tensors there are, in which order, and how
 * they are made. Real weights would come from training; these are
 * deterministic (a seeded generator, no transcendental functions, so every
 * machine and runtime makes the same bits), written once in TVM's tensor
 * cache format and loaded back by the program with
 * `vm.builtin.tensor_cache.load` / `vm.builtin.param_array_from_cache`,
 * exactly as a compiled model's weights are.
 *
 * Matrices use the layout of `vm.op.linear` (PyTorch's `nn.Linear`, TVM's
 * `relax.op.linear`): `[out, in]`, so `y = x Wᵀ + b`. The token embedding
 * `[vocab, d_model]` is also the output projection (tied weights): the
 * logits are `linear(x, wte)`.
 *
 * @module
 */

import { encodeTensorCache, type NDArray, tensor } from "../../mod.ts";
import type { GPTConfig } from "./config.ts";

/** One parameter: its name in the model, its shape and how it is initialized. */
export interface ParamSpec {
  /** Readable name, e.g. `h.0.attn.wq`; the cache stores it as `param_<index>`. */
  readonly name: string;
  /** Shape. */
  readonly shape: readonly number[];
  /** Values are `center + U(-spread, spread)`. */
  readonly center: number;
  /** Half-width of the uniform distribution. */
  readonly spread: number;
}

/** Parameters per transformer block, in cache order (see `paramSpecs`). */
export const PARAMS_PER_LAYER = 16;

/** Cache names are `<PARAM_PREFIX>_<index>`, what `param_array_from_cache(prefix, n)` reads. */
export const PARAM_PREFIX = "param";

/** Index of a block parameter in the parameter tuple. */
export const BlockParam = {
  ln1Gamma: 0,
  ln1Beta: 1,
  wq: 2,
  bq: 3,
  wk: 4,
  bk: 5,
  wv: 6,
  bv: 7,
  wo: 8,
  bo: 9,
  ln2Gamma: 10,
  ln2Beta: 11,
  wFc: 12,
  bFc: 13,
  wProj: 14,
  bProj: 15,
} as const;

/** Index of block `layer`'s first parameter in the parameter tuple. */
export function layerBase(layer: number): number {
  return 2 + layer * PARAMS_PER_LAYER;
}

/**
 * Every parameter in cache order: `wte`, `wpe`, then per block the 16 of
 * `BlockParam`, then the final layer norm's gamma and beta.
 */
export function paramSpecs(c: GPTConfig): ParamSpec[] {
  const D = c.dModel, F = c.dMLP;
  // Uniform U(-a, a) has standard deviation a/√3; matrices get 1/√fan_in. The token
  // embedding is small next to what the blocks add: with tied weights, a larger one makes
  // an untrained model repeat its input token forever (greedy output is then one id).
  const matrix = (fanIn: number) => Math.sqrt(3 / fanIn);
  const specs: ParamSpec[] = [
    { name: "wte", shape: [c.vocab, D], center: 0, spread: 0.02 },
    { name: "wpe", shape: [c.context, D], center: 0, spread: 0.05 },
  ];
  const gamma = { center: 1, spread: 0.1 }, bias = { center: 0, spread: 0.02 };
  for (let l = 0; l < c.layers; l++) {
    const p = `h.${l}`;
    specs.push(
      { name: `${p}.ln_1.gamma`, shape: [D], ...gamma },
      { name: `${p}.ln_1.beta`, shape: [D], ...bias },
      { name: `${p}.attn.wq`, shape: [D, D], center: 0, spread: matrix(D) },
      { name: `${p}.attn.bq`, shape: [D], ...bias },
      { name: `${p}.attn.wk`, shape: [D, D], center: 0, spread: matrix(D) },
      { name: `${p}.attn.bk`, shape: [D], ...bias },
      { name: `${p}.attn.wv`, shape: [D, D], center: 0, spread: matrix(D) },
      { name: `${p}.attn.bv`, shape: [D], ...bias },
      { name: `${p}.attn.wo`, shape: [D, D], center: 0, spread: matrix(D) },
      { name: `${p}.attn.bo`, shape: [D], ...bias },
      { name: `${p}.ln_2.gamma`, shape: [D], ...gamma },
      { name: `${p}.ln_2.beta`, shape: [D], ...bias },
      { name: `${p}.mlp.w_fc`, shape: [F, D], center: 0, spread: matrix(D) },
      { name: `${p}.mlp.b_fc`, shape: [F], ...bias },
      { name: `${p}.mlp.w_proj`, shape: [D, F], center: 0, spread: matrix(F) },
      { name: `${p}.mlp.b_proj`, shape: [D], ...bias },
    );
  }
  specs.push(
    { name: "ln_f.gamma", shape: [D], ...gamma },
    { name: "ln_f.beta", shape: [D], ...bias },
  );
  return specs;
}

/** Elements of all parameters together. */
export function paramCount(c: GPTConfig): number {
  return paramSpecs(c).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
}

/**
 * The values of every parameter, in cache order, from `seed`. Each tensor
 * has its own stream (mulberry32 seeded from `seed` and its index), so a
 * tensor's values do not depend on the sizes of the ones before it.
 */
export function makeWeights(c: GPTConfig, seed = 1): Float32Array[] {
  return paramSpecs(c).map((spec, index) => {
    const n = spec.shape.reduce((a, b) => a * b, 1);
    const out = new Float32Array(n);
    let s = (Math.imul(seed, 0x9e3779b1) ^ Math.imul(index + 1, 0x85ebca6b)) >>> 0;
    for (let i = 0; i < n; i++) {
      // mulberry32
      s = (s + 0x6d2b79f5) | 0;
      let t = Math.imul(s ^ (s >>> 15), 1 | s);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      const u = ((t ^ (t >>> 14)) >>> 0) / 4294967296; // [0, 1)
      out[i] = spec.center + (2 * u - 1) * spec.spread;
    }
    return out;
  });
}

/** The weights as tensor-cache files in memory (`tensor-cache.json` and its shards). */
export async function encodeWeights(
  c: GPTConfig,
  weights: readonly Float32Array[],
): Promise<Map<string, Uint8Array>> {
  const specs = paramSpecs(c);
  const tensors: [string, NDArray][] = specs.map((s, i) => [
    `${PARAM_PREFIX}_${i}`,
    tensor(weights[i], { shape: [...s.shape] }),
  ]);
  try {
    const { files } = await encodeTensorCache(tensors, {
      metadata: { model: `gpt-${c.name}`, paramNames: specs.map((s) => s.name) },
    });
    return files;
  } finally {
    for (const [, t] of tensors) t.dispose();
  }
}

/**
 * Makes a tensor cache that is in memory (`encodeWeights`' files) loadable
 * by URL without touching the file system, so `deno run` needs no
 * permission: each shard becomes a `blob:` URL, the index names those URLs
 * as its shards' `dataPath`, and the index itself becomes a `blob:` URL,
 * which is returned, with every URL made (`urls`: what a VM grants a program
 * that loads it, `tensorCacheRoots`). `revoke()` frees them once loaded. In a browser this
 * is also how weights fetched or generated by a page are handed to
 * `vm.builtin.tensor_cache.load`.
 */
export function publishInMemory(
  files: ReadonlyMap<string, Uint8Array>,
): { url: string; urls: string[]; revoke: () => void } {
  const urls: string[] = [];
  const blobUrl = (bytes: Uint8Array | string, type: string) => {
    const url = URL.createObjectURL(new Blob([bytes as BlobPart], { type }));
    urls.push(url);
    return url;
  };
  const index = JSON.parse(new TextDecoder().decode(files.get("tensor-cache.json")!)) as {
    records: { dataPath: string }[];
  };
  for (const shard of index.records) {
    shard.dataPath = blobUrl(files.get(shard.dataPath)!, "application/octet-stream");
  }
  const url = blobUrl(JSON.stringify(index), "application/json");
  return { url, urls: [...urls], revoke: () => urls.forEach((u) => URL.revokeObjectURL(u)) };
}
