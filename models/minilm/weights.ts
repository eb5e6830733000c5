/**
 * Which tensors all-MiniLM-L6-v2 has and in which order the tensor cache
 * stores them: `param_<i>` is the Hugging Face tensor `MINILM_PARAM_NAMES[i]`
 * (`tools/fetch_minilm.ts` writes the cache in this order), and the program
 * reads them with `param_array_from_cache("param", n)`.
 *
 * Matrices keep PyTorch's `nn.Linear` layout `[out, in]`, which
 * `vm.op.linear` reads as it is.
 *
 * @module
 */

import { MINILM_L6 } from "./config.ts";

/** Cache names are `<MINILM_PARAM_PREFIX>_<index>`. */
export const MINILM_PARAM_PREFIX = "param";

/** The embedding tensors, first in the cache, by index. */
export const EmbeddingParam = {
  word: 0,
  position: 1,
  tokenType: 2,
  lnGamma: 3,
  lnBeta: 4,
} as const;

/** Parameters per encoder layer, in cache order (see `LayerParam`). */
export const PARAMS_PER_LAYER = 16;

/** Index of a layer parameter, counted from the layer's first. */
export const LayerParam = {
  wq: 0,
  bq: 1,
  wk: 2,
  bk: 3,
  wv: 4,
  bv: 5,
  wo: 6,
  bo: 7,
  ln1Gamma: 8,
  ln1Beta: 9,
  wUp: 10,
  bUp: 11,
  wDown: 12,
  bDown: 13,
  ln2Gamma: 14,
  ln2Beta: 15,
} as const;

/** Index of layer `layer`'s first parameter. */
export function layerBase(layer: number): number {
  return 5 + layer * PARAMS_PER_LAYER;
}

function layerNames(l: number): string[] {
  const p = `encoder.layer.${l}`;
  return [
    `${p}.attention.self.query.weight`,
    `${p}.attention.self.query.bias`,
    `${p}.attention.self.key.weight`,
    `${p}.attention.self.key.bias`,
    `${p}.attention.self.value.weight`,
    `${p}.attention.self.value.bias`,
    `${p}.attention.output.dense.weight`,
    `${p}.attention.output.dense.bias`,
    `${p}.attention.output.LayerNorm.weight`,
    `${p}.attention.output.LayerNorm.bias`,
    `${p}.intermediate.dense.weight`,
    `${p}.intermediate.dense.bias`,
    `${p}.output.dense.weight`,
    `${p}.output.dense.bias`,
    `${p}.output.LayerNorm.weight`,
    `${p}.output.LayerNorm.bias`,
  ];
}

/** The Hugging Face name of every parameter, in cache order. */
export const MINILM_PARAM_NAMES: readonly string[] = Object.freeze([
  "embeddings.word_embeddings.weight",
  "embeddings.position_embeddings.weight",
  "embeddings.token_type_embeddings.weight",
  "embeddings.LayerNorm.weight",
  "embeddings.LayerNorm.bias",
  ...Array.from({ length: MINILM_L6.layers }, (_, l) => layerNames(l)).flat(),
]);
