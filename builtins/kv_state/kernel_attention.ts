/**
 * `vm.builtin.attention_kv_cache_attention_with_fused_qkv` with the kernels the
 * executable handed the cache (TVM's TIR kernels; on WebGPU, a TVM package's host
 * functions over its WGSL kernels), called as TVM's `AttentionWithFusedQKV`
 * (`paged_kv_cache.cc`) calls them:
 *
 * ```text
 * split_rotary(qkv, q_rope_position_map, q, k, v, rope_mode == normal)
 * decode:  transpose_append(pages, k, v, append_position_map)       (before attention)
 * prefill: ragged_prefill(q, append_length_indptr, k, v, append_length_indptr,
 *                         q_rope_position_map, k_ragged_rope_pos_offset, o, lse, causal 1, …)
 * each depth with pages:
 *          decode(q, pages, page_indptr, page_indices, last_page_len, k_rope_pos_offset,
 *                 q_rope_position_map, o', lse', …)                  (every entry one query)
 *       or prefill(q, qo_indptr, pages, page_indptr, page_indices, last_page_len,
 *                  k_rope_pos_offset, q_rope_position_map, o', lse', causal 0, …)
 *          merge_state(o, lse, o', lse')                             (but for the first part)
 * prefill: transpose_append(pages, k, v, append_position_map)       (after attention)
 * ```
 *
 * The kernels get rotary mode 0 (RoPE was applied by split-rotary, mode normal), TVM's
 * choice for every mode but inline. The forward's int32 arrays go to the device once per
 * forward, packed in one tensor the kernels read at element offsets
 * (`PagedKVCache.deviceArrays`), as TVM's auxiliary data manager does.
 *
 * @module
 */

import { Closure } from "../../ground/closure.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { describe } from "../describe.ts";
import type { PagedKVCache } from "./paged_kv_cache.ts";
import type { DepthPlan } from "./page_table.ts";
import { uploadForwardArrays } from "./forward_arrays.ts";

const WHO = "attention_kv_cache_attention_with_fused_qkv";

/** Calls a kernel operand: a closure (a function of the executable) or a packed function. */
function call(kernel: unknown, what: string, args: unknown[]): void {
  if (kernel instanceof Closure) kernel.call(args);
  else if (typeof kernel === "function") kernel(...args);
  else {
    throw new RangeError(
      `${WHO}: the cache has no ${what} kernel (the executable passed ${describe(kernel)})`,
    );
  }
}

/** The function of a `[backend, function]` tuple; TVM's TIR backend only. */
function tirFunction(tuple: readonly unknown[] | undefined, what: string): unknown {
  if (tuple === undefined || tuple.length < 2) {
    throw new RangeError(`${WHO}: the cache has no ${what} kernel`);
  }
  const backend = String(tuple[0]);
  if (backend !== "tir" && backend !== "tirx") {
    throw new RangeError(
      `${WHO}: the ${what} kernel's backend ${JSON.stringify(backend)} is not supported (TIR only)`,
    );
  }
  return tuple[1];
}

/**
 * Attention of the forward in progress on `cache`'s layer `layerId` with the kernels
 * the executable passed: `qkv` `[tokens, qo + 2 kv heads, d]` in, `out`
 * `[tokens, qo heads, d]` written, K/V appended to the layer's pages. Everything is
 * queued on the pages' device; nothing waits.
 */
export function kernelAttention(
  cache: PagedKVCache,
  layerId: number,
  smScale: number,
  qkv: NDArray,
  out: NDArray,
): void {
  const c = cache.config;
  const plan = cache.forwardPlan(WHO);
  if (c.ropeMode === "inline") {
    throw new RangeError(`${WHO}: inline RoPE (rope_mode 2) is not supported by relaxvm`);
  }
  const layer = cache.layerIndex(layerId, WHO);
  const H = c.numQoHeads, KH = c.numKvHeads, D = c.headDim, T = plan.totalLength;
  const pages = cache.pages(layer);
  for (const [t, what] of [[qkv, "qkv"], [out, "the output"]] as const) {
    if (t.device !== pages.device) {
      throw new RangeError(`${WHO}: ${what} is on ${t.device}, the pages on ${pages.device}`);
    }
  }
  if (qkv.shape.join() !== [T, H + 2 * KH, D].join()) {
    throw new RangeError(
      `${WHO}: qkv has shape [${qkv.shape.join(", ")}], not [${T}, ${H + 2 * KH}, ${D}]`,
    );
  }
  if (out.shape.join() !== [T, H, D].join()) {
    throw new RangeError(
      `${WHO}: the output has shape [${out.shape.join(", ")}], not [${T}, ${H}, ${D}]`,
    );
  }
  const k = cache.kernels;
  const dev = pages.device;
  const arrays = cache.deviceArrays(() => uploadForwardArrays(plan, dev));
  const temps: NDArray[] = [];
  const temp = (shape: number[]) => {
    const t = NDArray.empty(shape, c.dtype, dev);
    temps.push(t);
    return t;
  };
  try {
    const q = temp([T, H, D]), kData = temp([T, KH, D]), vData = temp([T, KH, D]);
    call(k.splitRotary, "split-rotary", [
      qkv,
      arrays.qRopePositionMap,
      q,
      kData,
      vData,
      c.ropeMode === "normal" ? 1 : 0,
    ]);
    const append = () =>
      call(k.transposeAppend, "transpose-append", [
        pages,
        kData,
        vData,
        arrays.appendPositionMap,
      ]);
    if (plan.appendBeforeAttention) append();
    const lse = temp([T, H]);
    // TVM's kernels get rotary mode 0 unless RoPE is inline (refused above).
    const rope = [0, c.ropeScale, c.ropeTheta, smScale];
    let first = true;
    if (!plan.appendBeforeAttention) {
      call(tirFunction(k.raggedPrefill, "ragged prefill"), "ragged prefill", [
        q,
        arrays.appendLengthIndptr,
        kData,
        vData,
        arrays.appendLengthIndptr,
        arrays.qRopePositionMap,
        arrays.kRaggedRopePosOffset,
        out,
        lse,
        1,
        ...rope,
      ]);
      first = false;
    }
    let otherOut: NDArray | null = null, otherLse: NDArray | null = null;
    plan.depths.forEach((depth: DepthPlan, d) => {
      if (depth.pageIndices.length === 0) return; // TVM skips a depth with no page
      const a = arrays.depths[d];
      let o = out, l = lse;
      if (!first) {
        otherOut ??= temp([T, H, D]);
        otherLse ??= temp([T, H]);
        o = otherOut;
        l = otherLse;
      }
      if (depth.useDecodeKernel) {
        call(tirFunction(k.decode, "paged decode"), "paged decode", [
          q,
          pages,
          a.pageIndptr,
          a.pageIndices,
          a.lastPageLen,
          a.kRopePosOffset,
          arrays.qRopePositionMap,
          o,
          l,
          ...rope,
        ]);
      } else {
        call(tirFunction(k.prefill, "paged prefill"), "paged prefill", [
          q,
          a.qoIndptr,
          pages,
          a.pageIndptr,
          a.pageIndices,
          a.lastPageLen,
          a.kRopePosOffset,
          arrays.qRopePositionMap,
          o,
          l,
          0,
          ...rope,
        ]);
      }
      if (!first) {
        call(k.mergeState?.[0], "merge-state", [out, lse, otherOut, otherLse]);
      }
      first = false;
    });
    if (first) {
      throw new RangeError(`${WHO}: the forward attends to nothing (no new token, no page)`);
    }
    if (!plan.appendBeforeAttention) append();
  } finally {
    // Queued work keeps its order on the device, so the temporaries go back now.
    for (const t of temps) t.dispose();
  }
}
