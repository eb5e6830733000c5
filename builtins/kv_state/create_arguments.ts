/**
 * The 28 arguments of `vm.builtin.paged_attention_kv_cache_create`, as TVM 0.27's
 * `relax.frontend.nn.llm.kv_cache` (`PagedKVCache` / `TIRPagedKVCache`) passes them
 * and `paged_kv_cache.cc` reads them, parsed into a `PagedKVCacheConfig` and the
 * kernels, with what relaxvm leaves out refused here, by name.
 *
 * ```text
 *  0 (max_batch_size, max_total_seq_len, prefill_chunk_size, page_size,
 *     support_sliding_window[, layer_sliding_window_size])          ShapeTuple of 5 or 6
 *  1 layer_partition (0, num_layers)                                ShapeTuple
 *  2 num_qo_heads   3 num_kv_heads   4 qk_head_dim   5 v_head_dim   integers
 *  6 attn_kinds, one per layer (0 MHA, 1 MLA, 2 linear, 3 MHA sliding)   ShapeTuple
 *  7 enable_kv_transfer   8 rope_mode (0 none, 1 normal, 2 inline)
 *  9 rope_scale  10 rope_theta  11 rope_ext_factors (a tensor or null)
 * 12 a zero tensor: the dtype and device of the pages
 * 13 transpose_append (MHA)  14 transpose_append (MLA)
 * 15 ragged prefill  16 prefill  17 decode  18 prefill, sliding window
 * 19 decode, sliding window  20 prefill with tree mask, paged
 * 21 prefill with tree mask  22 MLA prefill       (each a tuple: backend name, function, …)
 * 23 merge-state functions (a tuple)  24 split rotary  25 copy single page
 * 26 debug get kv  27 compact copy
 * ```
 *
 * @module
 */

import type { TensorDType } from "../../ground/dtype.ts";
import { ShapeTuple } from "../../ground/shape_tuple.ts";
import { tupleFields } from "../../ground/tuple.ts";
import type { Device } from "../../devices/device.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { describe } from "../describe.ts";

/** The configuration of a paged KV cache. */
export interface PagedKVCacheConfig {
  /** Most sequences in one forward. */
  readonly maxBatchSize: number;
  /** Tokens the pool is sized for. */
  readonly maxTotalSequenceLength: number;
  /** Most tokens in one forward. */
  readonly prefillChunkSize: number;
  /** Tokens per page. */
  readonly pageSize: number;
  /** Pages in the pool: `ceil(maxTotalSequenceLength / pageSize) + 1`, as TVM. */
  readonly numPages: number;
  /** Layers whose K/V this cache holds. */
  readonly numLayers: number;
  /** The model's layer id of this cache's first layer (TVM's layer partition). */
  readonly layerBegin: number;
  /** Query (and output) heads. */
  readonly numQoHeads: number;
  /** Key/value heads (`numQoHeads` a multiple of it: grouped-query attention). */
  readonly numKvHeads: number;
  /** Features per head, of Q, K and V alike. */
  readonly headDim: number;
  /** RoPE: none, applied to Q and K before K is cached (normal), or in the kernels (inline). */
  readonly ropeMode: "none" | "normal" | "inline";
  /** Positions are multiplied by this before RoPE. */
  readonly ropeScale: number;
  /** RoPE's base. */
  readonly ropeTheta: number;
  /** Element type of the pages. */
  readonly dtype: TensorDType;
  /** Where the pages live. */
  readonly device: Device;
}

/** The kernels an executable hands the cache (function operands, kept as given). */
export interface PagedKVCacheKernels {
  /** Writes K/V rows at positions of the pages (`kv_cache_transpose_append`). */
  readonly transposeAppend?: unknown;
  /** Causal attention among a forward's new tokens (`[backend, function]`). */
  readonly raggedPrefill?: readonly unknown[];
  /** Attention of queries to cached pages, many queries per sequence. */
  readonly prefill?: readonly unknown[];
  /** Attention of one query per sequence to cached pages. */
  readonly decode?: readonly unknown[];
  /** Merges two attention outputs by their log-sum-exp. */
  readonly mergeState?: readonly unknown[];
  /** Splits fused QKV, applying RoPE (`tir_split_rotary`). */
  readonly splitRotary?: unknown;
  /** Copies part of a page (`kv_cache_copy_single_page`); relaxvm copies with the device. */
  readonly copySinglePage?: unknown;
  /** Reads K/V of positions (`kv_cache_debug_get_kv`). */
  readonly debugGetKV?: unknown;
  /** Compacts accepted token-tree nodes (`kv_cache_compact_kv_copy`). */
  readonly compactCopy?: unknown;
}

const WHO = "paged_attention_kv_cache_create";

/** A refused feature: `RangeError` naming it. */
function refuse(feature: string, detail: string): never {
  throw new RangeError(
    `${WHO}: ${feature} is not supported by relaxvm's paged KV cache (${detail})`,
  );
}

function dims(v: unknown, what: string): readonly number[] {
  if (v instanceof ShapeTuple) return v.dims;
  if (Array.isArray(v) && v.every((d) => typeof d === "number" && Number.isSafeInteger(d))) {
    return v;
  }
  throw new TypeError(`${WHO}: ${what} must be a shape tuple, got ${describe(v)}`);
}

function int(v: unknown, what: string, min: number): number {
  const n = typeof v === "boolean" ? (v ? 1 : 0) : v;
  if (typeof n !== "number" || !Number.isSafeInteger(n)) {
    throw new TypeError(`${WHO}: ${what} must be an integer, got ${describe(v)}`);
  }
  if (n < min) throw new RangeError(`${WHO}: ${what} ${n} is less than ${min}`);
  return n;
}

function real(v: unknown, what: string): number {
  if (typeof v !== "number" || !Number.isFinite(v)) {
    throw new TypeError(`${WHO}: ${what} must be a finite number, got ${describe(v)}`);
  }
  return v;
}

/** A kernel tuple (`[backend, function, …]`), or an empty one. */
function kernelTuple(v: unknown, what: string): readonly unknown[] {
  const fields = tupleFields(v);
  if (fields === undefined) {
    throw new TypeError(`${WHO}: ${what} must be a tuple, got ${describe(v)}`);
  }
  return fields;
}

/** The config and kernels of TVM's 28 arguments; throws naming what is wrong or refused. */
export function parseCreateArguments(
  args: readonly unknown[],
): { config: PagedKVCacheConfig; kernels: PagedKVCacheKernels } {
  if (args.length === 29) {
    refuse("CUDA graph capture", "the 29th argument of TVM's create");
  }
  if (args.length !== 28) {
    throw new TypeError(`${WHO}: expects TVM's 28 arguments, got ${args.length}`);
  }
  const sizes = dims(args[0], "the cache config");
  if (sizes.length !== 5 && sizes.length !== 6) {
    throw new RangeError(
      `${WHO}: the cache config has ${sizes.length} fields, not 5 or 6 (max_batch_size, max_total_seq_len, prefill_chunk_size, page_size, support_sliding_window[, layer_sliding_window_size])`,
    );
  }
  const [maxBatchSize, maxTotal, chunk, pageSize, slidingWindow] = sizes;
  for (
    const [v, what] of [
      [maxBatchSize, "max_batch_size"],
      [maxTotal, "max_total_seq_len"],
      [chunk, "prefill_chunk_size"],
      [pageSize, "page_size"],
    ] as const
  ) {
    if (v < 1) throw new RangeError(`${WHO}: ${what} ${v} is not positive`);
  }
  if (slidingWindow !== 0) refuse("sliding window", "support_sliding_window is 1");
  const partition = dims(args[1], "layer_partition");
  if (partition.length !== 2) {
    refuse(
      "pipeline parallelism",
      `layer_partition [${partition.join(", ")}] has ${partition.length - 1} groups, not 1`,
    );
  }
  const [layerBegin, layerEnd] = partition;
  if (layerBegin < 0 || layerEnd <= layerBegin) {
    throw new RangeError(`${WHO}: layer_partition [${partition.join(", ")}] holds no layer`);
  }
  const numQoHeads = int(args[2], "num_qo_heads", 1);
  const numKvHeads = int(args[3], "num_kv_heads", 1);
  const qkHeadDim = int(args[4], "qk_head_dim", 1);
  const vHeadDim = int(args[5], "v_head_dim", 1);
  if (numQoHeads % numKvHeads !== 0) {
    throw new RangeError(
      `${WHO}: num_qo_heads ${numQoHeads} is not a multiple of num_kv_heads ${numKvHeads}`,
    );
  }
  const kinds = dims(args[6], "attn_kinds");
  if (kinds.length < layerEnd) {
    throw new RangeError(
      `${WHO}: attn_kinds has ${kinds.length} layers, the partition needs ${layerEnd}`,
    );
  }
  const KIND_NAMES = [
    "MHA",
    "MLA (multi-head latent attention)",
    "linear attention",
    "per-layer sliding window (mha_sliding)",
  ];
  kinds.forEach((k, layer) => {
    if (k !== 0) {
      if (k > 0 && k < KIND_NAMES.length) refuse(KIND_NAMES[k], `attn_kinds[${layer}] is ${k}`);
      throw new RangeError(`${WHO}: attn_kinds[${layer}] is ${k}, not an attention kind`);
    }
  });
  if (vHeadDim !== qkHeadDim) {
    refuse("a V head size other than the QK head size", `${vHeadDim} and ${qkHeadDim}`);
  }
  if (int(args[7], "enable_kv_transfer", 0) !== 0) {
    refuse("KV transfer (disaggregation)", "enable_kv_transfer is true");
  }
  const mode = int(args[8], "rope_mode", 0);
  if (mode > 2) throw new RangeError(`${WHO}: rope_mode ${mode} is not 0, 1 or 2`);
  const ropeScale = real(args[9], "rope_scale");
  const ropeTheta = real(args[10], "rope_theta");
  // TVM takes a tensor here as the factors and anything else (models pass `PrimValue(0)`) as none.
  if (args[11] instanceof NDArray) refuse("RoPE extension factors", "rope_ext_factors is a tensor");
  const init = args[12];
  if (!(init instanceof NDArray)) {
    throw new TypeError(
      `${WHO}: argument 12 must be a tensor (its dtype and device are the pages'), got ${
        describe(init)
      }`,
    );
  }
  const tuple = (i: number, what: string) => kernelTuple(args[i], what);
  const kernels: PagedKVCacheKernels = {
    transposeAppend: args[13],
    raggedPrefill: tuple(15, "the ragged prefill"),
    prefill: tuple(16, "the paged prefill"),
    decode: tuple(17, "the paged decode"),
    mergeState: tuple(23, "the merge-state functions"),
    splitRotary: args[24],
    copySinglePage: args[25],
    debugGetKV: args[26],
    compactCopy: args[27],
  };
  for (
    const [i, what] of [
      [18, "sliding-window prefill"],
      [19, "sliding-window decode"],
      [20, "tree-mask prefill"],
      [21, "tree-mask ragged prefill"],
      [22, "MLA prefill"],
    ] as const
  ) {
    tuple(i, `the ${what}`); // a tuple, as TVM requires; never called
  }
  return {
    config: {
      maxBatchSize,
      maxTotalSequenceLength: maxTotal,
      prefillChunkSize: chunk,
      pageSize,
      numPages: Math.ceil(maxTotal / pageSize) + 1,
      numLayers: layerEnd - layerBegin,
      layerBegin,
      numQoHeads,
      numKvHeads,
      headDim: qkHeadDim,
      ropeMode: (["none", "normal", "inline"] as const)[mode],
      ropeScale,
      ropeTheta,
      dtype: init.dtype,
      device: init.device,
    },
    kernels,
  };
}
