/**
 * The CPU kernel of paged attention (float32): a batch of sequences, each attending
 * causally to its own tokens in the pages of a paged KV cache.
 *
 * ```text
 * 1. every new token's K and V are written to its slot in the pages
 * 2. per sequence: its keys and values are gathered from the pages into two
 *    contiguous [KV heads, tokens, D] scratch arrays (one gather serves every query
 *    head of a group and every new token)
 * 3. per sequence, the causal attention of its new tokens to them: on the WebAssembly
 *    SIMD path of `vm.op.attention` (kernels/cpu/wasm/attention_heads.ts, each KV head
 *    a batch of its group's query heads) where the work pays for the copies, else in
 *    TypeScript: per new token and query head, scores over the keys up to the token,
 *    their softmax (maximum subtracted), the weighted sum of the values in float64
 * ```
 *
 * Appending first and then attending over the pages is what TVM's decode does; TVM's
 * prefill attends to the new tokens from q/k/v and appends after, which gives the same
 * numbers (the same keys in the same order). A sequence's result depends on its own
 * rows and pages only, so a batch gives each sequence what it gets alone.
 *
 * @module
 */

import type { NDArray } from "../../devices/ndarray.ts";
import type { AttentionGeometry } from "../attention_layout.ts";
import type { PagedAttentionBatch } from "../kernel_backend.ts";
import { wasmAttention } from "./wasm/attention_heads.ts";

// Scratch reused across calls; JS runs one kernel at a time.
let keys = new Float32Array(0);
let values = new Float32Array(0);
let scores = new Float64Array(0);
let acc = new Float64Array(0);

/** Paged attention; see `OpBackend.pagedAttention`. */
export function pagedAttentionKernel(
  qkv: NDArray,
  pages: NDArray,
  batch: PagedAttentionBatch,
  scale: number,
  out: NDArray,
): void {
  const { numQoHeads: H, numKvHeads: KH, headDim: D, pageSize: P } = batch;
  const { rowIndptr, slotIndptr, slots } = batch;
  // The pages are written (this step's K and V go into their slots): a write view, which ends
  // any seal, as a write must.
  const src = qkv.readView() as Float32Array, pv = pages.cpuView() as Float32Array;
  const ov = out.cpuView() as Float32Array;
  const fused = (H + 2 * KH) * D, group = H / KH;
  /** Element offset of (K or V, head, slot) in the pages. */
  const at = (kv: number, head: number, slot: number) => {
    const page = Math.floor(slot / P);
    return (((page * 2 + kv) * KH + head) * P + slot - page * P) * D;
  };
  const sequences = rowIndptr.length - 1;
  // 1. append
  for (let s = 0; s < sequences; s++) {
    const rows = rowIndptr[s + 1] - rowIndptr[s];
    const firstNew = slotIndptr[s + 1] - rows;
    for (let r = 0; r < rows; r++) {
      const row = (rowIndptr[s] + r) * fused, slot = slots[firstNew + r];
      for (let h = 0; h < KH; h++) {
        const k = row + (H + h) * D, v = row + (H + KH + h) * D;
        pv.set(src.subarray(k, k + D), at(0, h, slot));
        pv.set(src.subarray(v, v + D), at(1, h, slot));
      }
    }
  }
  let longest = 0;
  for (let s = 0; s < sequences; s++) {
    longest = Math.max(longest, slotIndptr[s + 1] - slotIndptr[s]);
  }
  if (keys.length < KH * longest * D) {
    keys = new Float32Array(KH * longest * D);
    values = new Float32Array(KH * longest * D);
    scores = new Float64Array(longest);
  }
  if (acc.length < D) acc = new Float64Array(D);
  const kb = keys, vb = values, sc = scores, a = acc;
  for (let s = 0; s < sequences; s++) {
    const n = slotIndptr[s + 1] - slotIndptr[s];
    const rows = rowIndptr[s + 1] - rowIndptr[s], past = n - rows, first = rowIndptr[s];
    // 2. gather: keys and values [KH, n, D]
    for (let kh = 0; kh < KH; kh++) {
      for (let j = 0; j < n; j++) {
        const slot = slots[slotIndptr[s] + j], at0 = (kh * n + j) * D;
        const k = at(0, kh, slot), v = at(1, kh, slot);
        kb.set(pv.subarray(k, k + D), at0);
        vb.set(pv.subarray(v, v + D), at0);
      }
    }
    // 3. attend: WebAssembly SIMD where the work pays for the copies (kernels/cpu/wasm/),
    // each KV head a batch of its group's query heads, which all read its keys (stride 0).
    const geometry: AttentionGeometry = {
      batches: KH,
      heads: group,
      Tq: rows,
      Tk: n,
      D,
      Dv: D,
      q: [group * D, D, fused],
      k: [n * D, 0, D],
      v: [n * D, 0, D],
      out: [group * D, D, H * D],
    };
    const q0 = first * fused, o0 = first * H * D;
    if (
      wasmAttention(
        src.subarray(q0),
        kb,
        vb,
        ov.subarray(o0, o0 + rows * H * D),
        geometry,
        scale,
        past,
      )
    ) continue;
    for (let kh = 0; kh < KH; kh++) {
      const base = kh * n * D;
      for (let r = 0; r < rows; r++) {
        const visible = past + r + 1, row = first + r;
        for (let h = kh * group; h < (kh + 1) * group; h++) {
          const qo = row * fused + h * D;
          let max = -Infinity;
          for (let j = 0; j < visible; j++) {
            let dot = 0;
            const ko = base + j * D;
            for (let d = 0; d < D; d++) dot += src[qo + d] * kb[ko + d];
            const x = Math.fround(dot * scale);
            sc[j] = x;
            if (x > max) max = x;
          }
          let sum = 0;
          for (let j = 0; j < visible; j++) sum += sc[j] = Math.exp(sc[j] - max);
          a.fill(0, 0, D);
          for (let j = 0; j < visible; j++) {
            const p = sc[j], vo = base + j * D;
            for (let d = 0; d < D; d++) a[d] += p * vb[vo + d];
          }
          const inv = 1 / sum, oo = (row * H + h) * D;
          for (let d = 0; d < D; d++) ov[oo + d] = a[d] * inv;
        }
      }
    }
  }
}
