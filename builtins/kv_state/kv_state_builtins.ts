/**
 * TVM's paged KV cache builtins (`kv_state.cc`, `paged_kv_cache.cc`) over
 * paged_kv_cache.ts, under TVM's global function names, so host code written for
 * TVM's Python or WebLLM ports line for line:
 *
 * ```text
 * paged_attention_kv_cache_create(<TVM's 28 arguments>) -> cache
 * kv_state_add_sequence(cache, seq_id)            kv_state_remove_sequence(cache, seq_id)
 * kv_state_fork_sequence(cache, parent, child[, fork_pos])
 * kv_state_popn(cache, seq_id, n)                 kv_state_clear(cache)
 * kv_state_begin_forward(cache, seq_ids, append_lengths[, token_tree_parent_ptr])
 * kv_state_end_forward(cache)
 * attention_kv_cache_get_num_available_pages(cache) -> int
 * attention_kv_cache_get_total_sequence_length(cache) -> int
 * attention_kv_cache_get_query_positions(cache) -> int32 tensor
 * attention_kv_cache_empty(cache) -> bool
 * attention_kv_cache_debug_get_kv(cache, seq_id, start, end, k_out, v_out)
 * attention_kv_cache_attention_with_fused_qkv(cache, layer, sm_scale, qkv, out)   the executable's kernels (GPU) or a CPU reference
 * vm.op.paged_attention(cache, layer, sm_scale, qkv) -> out     relaxvm's own (paged_attention_builtin.ts)
 * ```
 *
 * Errors: `TypeError` for arguments of the wrong kind, `RangeError` for values that do
 * not fit (an unknown sequence, a fork of a missing parent, popn past the length, a
 * batch beyond the chunk or the free pages, an id already present) and for a refused
 * feature (named); the VM wraps either in a `VMError`. A refused call changes nothing.
 *
 * @module
 */

import { ShapeTuple } from "../../ground/shape_tuple.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { describe } from "../describe.ts";
import { integerArg, tensorArg } from "../validate.ts";
import { parseCreateArguments } from "./create_arguments.ts";
import { PagedKVCache } from "./paged_kv_cache.ts";
import { referenceAttention } from "./reference_attention.ts";
import { kernelAttention } from "./kernel_attention.ts";
import { addPagedAttention } from "./paged_attention_builtin.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const kvStateBuiltins = new BuiltinTable("Paged KV cache", import.meta.url);

function cacheArg(v: unknown, who: string): PagedKVCache {
  if (!(v instanceof PagedKVCache)) {
    throw new TypeError(`${who}: expected a paged KV cache, got ${describe(v)}`);
  }
  if (v.disposed) throw new TypeError(`${who}: the paged KV cache was released`);
  return v;
}

function idsArg(v: unknown, who: string, what: string): readonly number[] {
  if (v instanceof ShapeTuple) return v.dims;
  if (Array.isArray(v)) return v;
  throw new TypeError(`${who}: ${what} must be a shape tuple, got ${describe(v)}`);
}

const TVM_FILE = "(kv_state.cc, paged_kv_cache.cc)";
const CACHE_ERRORS = "`TypeError` when the first argument is not a live paged KV cache";

kvStateBuiltins.add(
  "vm.builtin.paged_attention_kv_cache_create",
  (...args: unknown[]) => {
    const { config, kernels } = parseCreateArguments(args);
    return new PagedKVCache(config, kernels);
  },
  {
    signature:
      "(config, layer_partition, num_qo_heads, num_kv_heads, qk_head_dim, v_head_dim, attn_kinds, enable_kv_transfer, rope_mode, rope_scale, rope_theta, rope_ext_factors, init, …15 kernels) → cache",
    summary:
      "A paged KV cache from TVM's 28 arguments (as `relax.frontend.nn.llm.kv_cache` passes them): `ceil(max_total_seq_len / page_size) + 1` pages per layer, each layer's K/V one tensor `[pages, 2, kv_heads, page_size, head_dim]` of `init`'s dtype on `init`'s device, from the running VM's allocator. The kernels are kept for the attention builtins.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` for an argument of the wrong kind or count; `RangeError` for sizes that do not fit, and for what relaxvm leaves out, named: sliding window, per-layer sliding window, MLA, linear attention, KV transfer, RoPE extension factors, pipeline-parallel layer partitions, CUDA graphs.",
    tvm: `vm.builtin.paged_attention_kv_cache_create (paged_kv_cache.cc)`,
  },
);

kvStateBuiltins.add("vm.builtin.kv_state_add_sequence", (kv: unknown, seqId: unknown) => {
  cacheArg(kv, "kv_state_add_sequence").addSequence(seqId as number);
  return null;
}, {
  signature: "(cache, seq_id) → null",
  summary: "Adds an empty sequence.",
  dtypes: null,
  devices: ["cpu", "webgpu"],
  errors: `${CACHE_ERRORS}; \`RangeError\` when the id is already in the cache.`,
  tvm: `vm.builtin.kv_state_add_sequence ${TVM_FILE}`,
});

kvStateBuiltins.add("vm.builtin.kv_state_remove_sequence", (kv: unknown, seqId: unknown) => {
  cacheArg(kv, "kv_state_remove_sequence").removeSequence(seqId as number);
  return null;
}, {
  signature: "(cache, seq_id) → null",
  summary:
    "Removes a sequence; the pages only it held are free again (a prefix it shares with others stays).",
  dtypes: null,
  devices: ["cpu", "webgpu"],
  errors: `${CACHE_ERRORS}; \`RangeError\` for an unknown sequence.`,
  tvm: `vm.builtin.kv_state_remove_sequence ${TVM_FILE}`,
});

kvStateBuiltins.add("vm.builtin.kv_state_fork_sequence", (...args: unknown[]) => {
  const who = "kv_state_fork_sequence";
  if (args.length !== 3 && args.length !== 4) {
    throw new TypeError(`${who}: expects 3 or 4 arguments, got ${args.length}`);
  }
  const forkPos = args.length === 4 ? integerArg(args[3], "fork_pos", who) : -1;
  cacheArg(args[0], who).forkSequence(args[1] as number, args[2] as number, forkPos);
  return null;
}, {
  signature: "(cache, parent_seq_id, child_seq_id[, fork_pos]) → null",
  summary:
    "Adds `child_seq_id` holding the first `fork_pos` tokens of the parent (-1, the default: all). Full pages are shared (the prefix becomes a block both sequences point to); a partial last page is copied to a new page of the child, in every layer. Forking at the end of a parent whose length is a multiple of the page size gives the parent a new empty block, so it can go on decoding.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors:
    `${CACHE_ERRORS}; \`RangeError\` for a missing parent, a child id already present, \`fork_pos\` outside -1..length, or no free page for the copy.`,
  tvm: `vm.builtin.kv_state_fork_sequence ${TVM_FILE}`,
});

kvStateBuiltins.add("vm.builtin.kv_state_popn", (kv: unknown, seqId: unknown, n: unknown) => {
  cacheArg(kv, "kv_state_popn").popN(seqId as number, n as number);
  return null;
}, {
  signature: "(cache, seq_id, n) → null",
  summary:
    "Drops the last `n` tokens of a sequence, freeing the pages no longer used. Popping into a prefix shared with another sequence forks the sequence at its new length first (copying a partial page), as TVM does.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: `${CACHE_ERRORS}; \`RangeError\` for an unknown sequence or \`n\` outside 0..length.`,
  tvm: `vm.builtin.kv_state_popn ${TVM_FILE}`,
});

kvStateBuiltins.add("vm.builtin.kv_state_clear", (kv: unknown) => {
  cacheArg(kv, "kv_state_clear").clear();
  return null;
}, {
  signature: "(cache) → null",
  summary: "Removes every sequence; every page is free.",
  dtypes: null,
  devices: ["cpu", "webgpu"],
  errors: CACHE_ERRORS + ".",
  tvm: `vm.builtin.kv_state_clear ${TVM_FILE}`,
});

kvStateBuiltins.add("vm.builtin.kv_state_begin_forward", (...args: unknown[]) => {
  const who = "kv_state_begin_forward";
  if (args.length !== 3 && args.length !== 4) {
    throw new TypeError(`${who}: expects 3 or 4 arguments, got ${args.length}`);
  }
  if (args.length === 4 && args[3] !== null && args[3] !== undefined) {
    throw new RangeError(
      `${who}: token trees (token_tree_parent_ptr) are not supported by relaxvm's paged KV cache`,
    );
  }
  const kv = cacheArg(args[0], who);
  kv.beginForward(idsArg(args[1], who, "seq_ids"), idsArg(args[2], who, "append_lengths"));
  return null;
}, {
  signature: "(cache, seq_ids, append_lengths[, token_tree_parent_ptr]) → null",
  summary:
    "Starts a forward appending `append_lengths[i]` tokens to sequence `seq_ids[i]`: reserves the pages and builds TVM's arrays for up to two depths of shared prefixes (query and page index pointers, page indices, last page lengths, RoPE offsets, the query position map and the append position map). A decode (every length 1) appends K/V before attention, a prefill after.",
  dtypes: null,
  devices: ["cpu", "webgpu"],
  errors:
    `${CACHE_ERRORS}; \`RangeError\` for an unknown sequence, one twice in the batch, a length below 1, more sequences than the max batch size, more tokens than the prefill chunk, more new pages than are free, or a token tree (refused). Nothing changes then.`,
  tvm:
    `vm.builtin.kv_state_begin_forward ${TVM_FILE}; relaxvm checks the batch before changing anything`,
});

kvStateBuiltins.add("vm.builtin.kv_state_end_forward", (kv: unknown) => {
  cacheArg(kv, "kv_state_end_forward").endForward();
  return null;
}, {
  signature: "(cache) → null",
  summary: "Ends the forward: its arrays are no longer valid until the next `begin_forward`.",
  dtypes: null,
  devices: ["cpu", "webgpu"],
  errors: CACHE_ERRORS + ".",
  tvm: `vm.builtin.kv_state_end_forward ${TVM_FILE}`,
});

kvStateBuiltins.add(
  "vm.builtin.attention_kv_cache_get_num_available_pages",
  (kv: unknown) => cacheArg(kv, "attention_kv_cache_get_num_available_pages").numAvailablePages,
  {
    signature: "(cache) → int",
    summary: "The free pages.",
    dtypes: null,
    devices: ["cpu", "webgpu"],
    errors: CACHE_ERRORS + ".",
    tvm: `vm.builtin.attention_kv_cache_get_num_available_pages ${TVM_FILE}`,
  },
);

kvStateBuiltins.add(
  "vm.builtin.attention_kv_cache_get_total_sequence_length",
  (kv: unknown) => cacheArg(kv, "attention_kv_cache_get_total_sequence_length").totalSequenceLength,
  {
    signature: "(cache) → int",
    summary: "The sum of the sequences' lengths.",
    dtypes: null,
    devices: ["cpu", "webgpu"],
    errors: CACHE_ERRORS + ".",
    tvm: `vm.builtin.attention_kv_cache_get_total_sequence_length ${TVM_FILE}`,
  },
);

kvStateBuiltins.add("vm.builtin.attention_kv_cache_get_query_positions", (kv: unknown) => {
  const who = "attention_kv_cache_get_query_positions";
  const plan = cacheArg(kv, who).plan;
  if (plan === null) throw new RangeError(`${who}: no forward in progress`);
  const out = NDArray.empty([plan.totalLength], "int32");
  (out.cpuView() as Int32Array).set(plan.qRopePositionMap);
  return out;
}, {
  signature: "(cache) → tensor (int32, CPU)",
  summary:
    "The position in its sequence of each token of the forward in progress (the RoPE positions).",
  dtypes: ["int32"],
  devices: ["cpu", "webgpu"],
  errors: `${CACHE_ERRORS}; \`RangeError\` outside a forward.`,
  tvm: `vm.builtin.attention_kv_cache_get_query_positions ${TVM_FILE}`,
});

kvStateBuiltins.add(
  "vm.builtin.attention_kv_cache_empty",
  (kv: unknown) => {
    const c = cacheArg(kv, "attention_kv_cache_empty");
    return c.table.sequenceIds.length === 0 && c.numAvailablePages === c.config.numPages;
  },
  {
    signature: "(cache) → bool",
    summary: "Whether the cache holds no sequence and every page is free.",
    dtypes: null,
    devices: ["cpu", "webgpu"],
    errors: CACHE_ERRORS + ".",
    tvm: `vm.builtin.attention_kv_cache_empty ${TVM_FILE}`,
  },
);

kvStateBuiltins.add("vm.builtin.attention_kv_cache_debug_get_kv", (...args: unknown[]) => {
  const who = "attention_kv_cache_debug_get_kv";
  if (args.length !== 6) throw new TypeError(`${who}: expects 6 arguments, got ${args.length}`);
  const kv = cacheArg(args[0], who);
  const seqId = integerArg(args[1], "seq_id", who);
  const start = integerArg(args[2], "start_pos", who);
  const end = integerArg(args[3], "end_pos", who);
  const map = kv.table.positionMap(seqId, who);
  if (start < 0 || end > map.length || start >= end) {
    throw new RangeError(`${who}: positions ${start}..${end} are not within 0..${map.length}`);
  }
  const c = kv.config;
  const outs = [
    tensorArg(args[4], "k_data", who, c.dtype),
    tensorArg(args[5], "v_data", who, c.dtype),
  ];
  const want = [c.numLayers, end - start, c.numKvHeads, c.headDim];
  for (const o of outs) {
    if (o.device.kind !== "cpu") throw new RangeError(`${who}: the outputs must be CPU tensors`);
    if (o.shape.length !== 4 || o.shape.some((d, i) => d !== want[i])) {
      throw new RangeError(
        `${who}: an output has shape [${o.shape.join(", ")}], not [${want.join(", ")}]`,
      );
    }
  }
  const P = c.pageSize, KH = c.numKvHeads, D = c.headDim;
  /** Copies the tokens' K and V of one layer out of `src`, the layer's pages as stored. */
  const gather = (layer: number, src: ArrayLike<number | bigint>) => {
    outs.forEach((o, kvIndex) => {
      const dst = o.cpuView() as unknown as (number | bigint)[];
      for (let p = start; p < end; p++) {
        const slot = map[p], page = Math.floor(slot / P), off = slot % P;
        for (let h = 0; h < KH; h++) {
          const from = (((page * 2 + kvIndex) * KH + h) * P + off) * D;
          const to = (((layer * (end - start) + p - start) * KH) + h) * D;
          for (let d = 0; d < D; d++) dst[to + d] = src[from + d];
        }
      }
    });
  };
  if (kv.pages(0).device.kind === "cpu") {
    for (let layer = 0; layer < c.numLayers; layer++) gather(layer, kv.pages(layer).readView());
    return null;
  }
  // Pages on a GPU: read each layer's bytes back (a wait), viewed as the outputs store them.
  const View = outs[0].cpuView().constructor as new (b: ArrayBuffer) => ArrayLike<number>;
  return (async () => {
    for (let layer = 0; layer < c.numLayers; layer++) {
      const pages = kv.pages(layer);
      const bytes = await pages.device.readBlock(pages.block, pages.byteOffset, pages.nbytes);
      gather(layer, new View(bytes.slice().buffer));
    }
    return null;
  })();
}, {
  signature: "(cache, seq_id, start_pos, end_pos, k_data, v_data) → null",
  summary:
    "Copies the cached K and V of positions `start_pos..end_pos-1` of a sequence into `k_data` and `v_data`, each `[layers, end - start, kv_heads, head_dim]` on the CPU. With the pages on a GPU it reads them back and returns a Promise (a wait).",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors:
    `${CACHE_ERRORS}; \`RangeError\` for an unknown sequence, positions outside it, outputs of another shape or device.`,
  tvm: `vm.builtin.attention_kv_cache_debug_get_kv ${TVM_FILE}`,
});

kvStateBuiltins.add(
  "vm.builtin.attention_kv_cache_attention_with_fused_qkv",
  (kv: unknown, layerId: unknown, smScale: unknown, qkv: unknown, out: unknown) => {
    const who = "attention_kv_cache_attention_with_fused_qkv";
    const cache = cacheArg(kv, who);
    if (typeof smScale !== "number") {
      throw new TypeError(`${who}: sm_scale must be a number, got ${describe(smScale)}`);
    }
    // Pages on a GPU: the executable's kernels, as TVM; on the CPU, relaxvm's reference.
    const attend = cache.config.device.kind === "cpu" ? referenceAttention : kernelAttention;
    attend(
      cache,
      integerArg(layerId, "layer_id", who),
      smScale,
      tensorArg(qkv, "qkv", who),
      tensorArg(out, "o_data", who),
    );
    return null;
  },
  {
    signature: "(cache, layer_id, sm_scale, qkv, o_data) → null",
    summary:
      "Attention of the forward's tokens (`qkv` `[tokens, qo_heads + 2 kv_heads, head_dim]`, split as TVM, RoPE applied in mode normal) to their sequences, written to `o_data` `[tokens, qo_heads, head_dim]`; appends K/V to the layer's pages. Pages on a GPU: the kernels the executable passed, called as TVM's runtime calls them (split-rotary, transpose-append, ragged and paged prefill or paged decode per depth, merge-state), the forward's arrays uploaded once per forward, nothing waited for. Pages on the CPU: relaxvm's reference in TypeScript, float32.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors:
      `${CACHE_ERRORS}; \`RangeError\` outside a forward, for a layer not in the cache, shapes that differ, tensors on another device than the pages, inline RoPE (refused), a missing kernel or one of a backend other than TIR (named); \`TypeError\` for another dtype; a kernel's own refusal (a host function's check) as its error.`,
    tvm: `vm.builtin.attention_kv_cache_attention_with_fused_qkv ${TVM_FILE}`,
  },
);

addPagedAttention(kvStateBuiltins);

/** Builtins of TVM's for features relaxvm leaves out: each refuses, naming the feature. */
const REFUSED: readonly [string, string, string][] = [
  [
    "vm.builtin.attention_kv_cache_enable_sliding_window_for_seq",
    "sliding window",
    "(cache, seq_id, sliding_window_size, attn_sink_size)",
  ],
  [
    "vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes",
    "token trees",
    "(cache, leaf_indices)",
  ],
  [
    "vm.builtin.kv_cache_disagg_prepare_recv",
    "KV transfer (disaggregation)",
    "(cache, seq_id, length)",
  ],
  [
    "vm.builtin.kv_cache_disagg_mark_send",
    "KV transfer (disaggregation)",
    "(cache, seq_id, begin, positions, recver)",
  ],
  [
    "vm.builtin.attention_kv_cache_debug_get_kv_mla",
    "MLA (multi-head latent attention)",
    "(cache, seq_id, start, end, kv_data)",
  ],
  [
    "vm.builtin.attention_kv_cache_append_mla_kv",
    "MLA (multi-head latent attention)",
    "(cache, layer_id, kv_data)",
  ],
];

for (const [name, feature, args] of REFUSED) {
  const short = name.slice("vm.builtin.".length);
  kvStateBuiltins.add(name, () => {
    throw new RangeError(`${short}: ${feature} is not supported by relaxvm's paged KV cache`);
  }, {
    signature: `${args} → never`,
    summary: `Refuses: ${feature} is not supported by relaxvm's paged KV cache.`,
    dtypes: null,
    devices: ["cpu", "webgpu"],
    errors: "`RangeError` naming the feature, always.",
    tvm: `${name} ${TVM_FILE}`,
  });
}
