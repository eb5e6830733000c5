/**
 * The CPU reference of `vm.builtin.attention_kv_cache_attention_with_fused_qkv` over a
 * `PagedKVCache`, in plain TypeScript (float32 only): what TVM's
 * `AttentionWithFusedQKV` does with its kernels, done from the arrays
 * `begin_forward` built, so a wrong page table gives a wrong answer.
 *
 * ```text
 * 1. split qkv [tokens, qo + 2 kv heads, d] into q, k, v; RoPE on q and k at
 *    qRopePositionMap (rope mode normal; TVM's split-rotary kernel)
 * 2. a decode (appendBeforeAttention): write k, v at appendPositionMap first
 * 3. a prefill: each sequence's new tokens attend to each other, causally (TVM's
 *    ragged prefill kernel, on q/k/v, not the pages)
 * 4. each depth: the queries of entry i attend to every token of pages
 *    pageIndices[pageIndptr[i]..pageIndptr[i+1]] (the last holding lastPageLen[i])
 * 5. the parts are merged by their log-sum-exp (TVM's merge-state kernel); here every
 *    part's scores go into one softmax, which is the same
 * 6. a prefill: write k, v at appendPositionMap after
 * ```
 *
 * It is a reference, not a fast path: with the pages on a GPU the builtin calls the
 * kernels the executable handed the cache instead (kernel_attention.ts).
 *
 * @module
 */

import type { NDArray } from "../../devices/ndarray.ts";
import type { PagedKVCache } from "./paged_kv_cache.ts";

const WHO = "attention_kv_cache_attention_with_fused_qkv";

/**
 * RoPE on one head vector in place, as TVM's `llama_rope_with_position_map`
 * (rotate-half pairs `x[i]`, `x[i + d/2]`; frequency `theta^(-2i/d)`; position times
 * `scale`).
 */
export function applyRope(
  x: Float32Array,
  offset: number,
  headDim: number,
  position: number,
  theta: number,
  scale: number,
): void {
  const half = headDim / 2;
  for (let i = 0; i < half; i++) {
    const angle = position * scale / Math.pow(theta, (2 * i) / headDim);
    const c = Math.cos(angle), s = Math.sin(angle);
    const a = x[offset + i], b = x[offset + i + half];
    x[offset + i] = a * c - b * s;
    x[offset + i + half] = b * c + a * s;
  }
}

function f32(t: NDArray, what: string): Float32Array {
  if (t.device.kind !== "cpu") {
    throw new RangeError(
      `${WHO}: ${what} is on ${t.device}; the reference attention runs on the CPU only (with the pages on a GPU the executable's kernels run)`,
    );
  }
  if (t.dtype !== "float32") {
    throw new TypeError(`${WHO}: ${what} has dtype ${t.dtype}; the reference attention is float32`);
  }
  return t.cpuView() as Float32Array;
}

/**
 * Appends the forward's K/V to `layerId`'s pages and writes into `out`
 * `[tokens, numQoHeads, headDim]` the attention of each new token to its sequence
 * (the cached tokens and the new ones up to it), scaled by `smScale`.
 */
export function referenceAttention(
  cache: PagedKVCache,
  layerId: number,
  smScale: number,
  qkv: NDArray,
  out: NDArray,
): void {
  const c = cache.config;
  const plan = cache.forwardPlan(WHO);
  if (c.ropeMode === "inline") {
    throw new RangeError(
      `${WHO}: inline RoPE (rope_mode 2) is not supported by relaxvm's reference attention`,
    );
  }
  const layer = cache.layerIndex(layerId, WHO);
  const H = c.numQoHeads, KH = c.numKvHeads, D = c.headDim, T = plan.totalLength;
  const fused = H + 2 * KH;
  const want = (t: NDArray, heads: number) =>
    t.shape.length === 3 && t.shape[0] >= T && t.shape[1] === heads && t.shape[2] === D;
  if (!want(qkv, fused)) {
    throw new RangeError(
      `${WHO}: qkv has shape [${qkv.shape.join(", ")}], not [${T}, ${fused}, ${D}]`,
    );
  }
  if (!want(out, H) || out.shape[0] !== qkv.shape[0]) {
    throw new RangeError(
      `${WHO}: the output has shape [${out.shape.join(", ")}], not [${qkv.shape[0]}, ${H}, ${D}]`,
    );
  }
  const src = f32(qkv, "qkv"), dst = f32(out, "the output");
  const pages = f32(cache.pages(layer), "the pages");

  // 1. split and rotate
  const q = new Float32Array(T * H * D), k = new Float32Array(T * KH * D);
  const v = new Float32Array(T * KH * D);
  for (let t = 0; t < T; t++) {
    const row = t * fused * D;
    q.set(src.subarray(row, row + H * D), t * H * D);
    k.set(src.subarray(row + H * D, row + (H + KH) * D), t * KH * D);
    v.set(src.subarray(row + (H + KH) * D, row + fused * D), t * KH * D);
    if (c.ropeMode === "normal") {
      const pos = plan.qRopePositionMap[t];
      for (let h = 0; h < H; h++) applyRope(q, (t * H + h) * D, D, pos, c.ropeTheta, c.ropeScale);
      for (let h = 0; h < KH; h++) {
        applyRope(k, (t * KH + h) * D, D, pos, c.ropeTheta, c.ropeScale);
      }
    }
  }
  const P = c.pageSize;
  /** Element offset of (K or V, head, slot) in the pages; slot = page * P + offset. */
  const at = (kv: number, head: number, slot: number) => {
    const page = Math.floor(slot / P), off = slot % P;
    return (((page * 2 + kv) * KH + head) * P + off) * D;
  };
  const append = () => {
    for (let t = 0; t < T; t++) {
      const slot = plan.appendPositionMap[t];
      for (let h = 0; h < KH; h++) {
        pages.set(k.subarray((t * KH + h) * D, (t * KH + h + 1) * D), at(0, h, slot));
        pages.set(v.subarray((t * KH + h) * D, (t * KH + h + 1) * D), at(1, h, slot));
      }
    }
  };
  if (plan.appendBeforeAttention) append();

  // The keys each token attends to: slots of the pages (depths), and rows of the batch.
  const slots: number[][] = Array.from({ length: T }, () => []);
  const rows: number[][] = Array.from({ length: T }, () => []);
  if (!plan.appendBeforeAttention) {
    const indptr = plan.appendLengthIndptr;
    for (let i = 0; i + 1 < indptr.length; i++) {
      for (let t = indptr[i]; t < indptr[i + 1]; t++) {
        for (let r = indptr[i]; r <= t; r++) rows[t].push(r);
      }
    }
  }
  for (const depth of plan.depths) {
    if (depth.pageIndices.length === 0) continue; // TVM skips a depth with no page
    for (let e = 0; e + 1 < depth.qoIndptr.length; e++) {
      const first = depth.pageIndptr[e], end = depth.pageIndptr[e + 1];
      const entry: number[] = [];
      for (let p = first; p < end; p++) {
        const used = p === end - 1 ? depth.lastPageLen[e] : P;
        for (let o = 0; o < used; o++) entry.push(depth.pageIndices[p] * P + o);
      }
      for (let t = depth.qoIndptr[e]; t < depth.qoIndptr[e + 1]; t++) {
        for (const slot of entry) slots[t].push(slot);
      }
    }
  }

  // 4-5. one softmax over every key of each (token, head)
  const group = H / KH;
  for (let t = 0; t < T; t++) {
    const n = slots[t].length + rows[t].length;
    const scores = new Float64Array(n);
    for (let h = 0; h < H; h++) {
      const kh = Math.floor(h / group), qo = (t * H + h) * D;
      const keyAt = (j: number): [Float32Array, number] =>
        j < slots[t].length
          ? [pages, at(0, kh, slots[t][j])]
          : [k, (rows[t][j - slots[t].length] * KH + kh) * D];
      const valueAt = (j: number): [Float32Array, number] =>
        j < slots[t].length
          ? [pages, at(1, kh, slots[t][j])]
          : [v, (rows[t][j - slots[t].length] * KH + kh) * D];
      let max = -Infinity;
      for (let j = 0; j < n; j++) {
        const [buf, o] = keyAt(j);
        let dot = 0;
        for (let d = 0; d < D; d++) dot += q[qo + d] * buf[o + d];
        scores[j] = dot * smScale;
        if (scores[j] > max) max = scores[j];
      }
      let sum = 0;
      for (let j = 0; j < n; j++) sum += scores[j] = Math.exp(scores[j] - max);
      const o0 = (t * H + h) * D;
      for (let d = 0; d < D; d++) dst[o0 + d] = 0;
      for (let j = 0; j < n; j++) {
        const [buf, o] = valueAt(j);
        const w = scores[j] / sum;
        for (let d = 0; d < D; d++) dst[o0 + d] += w * buf[o + d];
      }
    }
  }
  if (!plan.appendBeforeAttention) append();
}
