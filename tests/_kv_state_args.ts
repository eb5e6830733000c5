/**
 * The 28 arguments of `vm.builtin.paged_attention_kv_cache_create`, as TVM's
 * executables pass them, for tests that make a cache with the builtin:
 * `kv_state_test.ts` and `kv_state_differential_test.ts`.
 *
 * @module
 */

import { type NDArray, shape } from "../mod.ts";

/** The sizes a test's cache takes; the rest of the arguments are TVM's defaults. */
export interface CacheSizes {
  maxBatchSize: number;
  maxTotalSeqLen: number;
  prefillChunkSize: number;
  pageSize: number;
  numLayers: number;
  numQoHeads: number;
  numKvHeads: number;
  headDim: number;
  /** TVM's RoPE mode: 0 none, 1 normal. */
  ropeMode: number;
}

/**
 * TVM's create arguments for `sizes`: `init` fixes the dtype and device, and
 * every kernel operand is `kernel` (a test's cache that must not run one
 * passes a function that throws).
 */
export function kvCreateArgs(sizes: CacheSizes, init: NDArray, kernel: unknown): unknown[] {
  const s = sizes;
  return [
    shape(s.maxBatchSize, s.maxTotalSeqLen, s.prefillChunkSize, s.pageSize, 0), // 0: no sliding window
    shape(0, s.numLayers), // the layers this cache holds
    s.numQoHeads,
    s.numKvHeads,
    s.headDim, // qk head dim
    s.headDim, // v head dim
    shape(...new Array(s.numLayers).fill(0)), // every layer's attention kind: MHA
    false, // no attention sinks
    s.ropeMode,
    1.0, // RoPE scale
    10000.0, // RoPE theta
    null, // RoPE extension factors
    init,
    kernel, // transpose-append
    null, // MLA append
    ["tirx", kernel], // ragged prefill
    ["tirx", kernel], // paged prefill
    ["tirx", kernel], // sliding-window paged prefill
    ["tirx", kernel], // paged decode
    ["tirx", kernel], // sliding-window paged decode
    ["tirx", kernel], // tree-mask prefill
    ["tirx", kernel], // tree-mask paged prefill
    [], // MLA prefill
    [kernel], // merge-state
    kernel, // split-rotary
    kernel, // copy single page
    kernel, // debug get KV
    kernel, // compact KV copy
  ];
}
