/**
 * CPU attention kernels (float32): the causal mask and fused scaled
 * dot-product attention.
 *
 * Attention runs one query row at a time, in three tight loops over the keys
 * that row sees: scores `scale · q·k_j` (four keys per pass, so each element
 * of `q` is loaded once per four products), then `exp(s_j - max)` and their
 * sum, then `Σ_j p_j v_j` accumulated in float64 (four value rows per pass) and
 * divided by the sum once.
 * Keys a causal row cannot see are never touched, so causal prefill does
 * half the work of the unmasked product. Subtracting the row maximum keeps
 * `exp` from overflowing (as `vm.op.softmax` does); NaN in a row's scores
 * makes that row NaN.
 *
 * @module
 */

import type { NDArray } from "../../devices/ndarray.ts";
import type { AttentionLayout } from "../kernel_backend.ts";
import { attentionGeometry } from "../attention_layout.ts";
import { wasmAttention } from "./wasm/attention_heads.ts";

// Scratch reused across calls; JS runs one kernel at a time.
let scores = new Float64Array(0);
let acc = new Float64Array(0);

/** `out = x` with `x[..., i, j] = -Infinity` where `j > i + offset`. */
export function causalMaskKernel(x: NDArray, offset: number, out: NDArray): void {
  if (out.size === 0) return;
  const rank = x.shape.length;
  const m = x.shape[rank - 2], n = x.shape[rank - 1];
  const xv = x.readView() as Float32Array, ov = out.cpuView() as Float32Array;
  ov.set(xv);
  for (let base = 0; base < ov.length; base += m * n) {
    for (let i = 0; i < m; i++) {
      // Columns j > i + offset, clamped to the row.
      const first = Math.max(0, Math.min(n, i + offset + 1));
      ov.fill(-Infinity, base + i * n + first, base + (i + 1) * n);
    }
  }
}

/** Fused attention; see `OpBackend.attention`. */
export function attentionKernel(
  q: NDArray,
  k: NDArray,
  v: NDArray,
  scale: number,
  causalOffset: number | null,
  out: NDArray,
  layout: AttentionLayout = "BHSD",
): void {
  if (out.size === 0) return;
  const g = attentionGeometry(q.shape, k.shape, v.shape, layout);
  const { Tq, Tk, D, Dv } = g;
  const qv = q.readView() as Float32Array, kv = k.readView() as Float32Array;
  const vv = v.readView() as Float32Array, ov = out.cpuView() as Float32Array;
  // Prefill-sized calls run in WebAssembly SIMD (kernels/cpu/wasm/attention_heads.ts).
  if (wasmAttention(qv, kv, vv, ov, g, scale, causalOffset)) return;
  if (scores.length < Tk) scores = new Float64Array(Tk);
  if (acc.length < Dv) acc = new Float64Array(Dv);
  const s = scores, a = acc;
  const kT = g.k[2], vT = g.v[2];
  for (let b = 0; b < g.batches; b++) {
    for (let h = 0; h < g.heads; h++) {
      const kBase = b * g.k[0] + h * g.k[1], vBase = b * g.v[0] + h * g.v[1];
      for (let i = 0; i < Tq; i++) {
        const qo = b * g.q[0] + h * g.q[1] + i * g.q[2];
        const keys = causalOffset === null ? Tk : Math.min(Tk, i + causalOffset + 1);
        // Scores, four keys per pass.
        let j = 0;
        for (; j + 4 <= keys; j += 4) {
          const k0 = kBase + j * kT, k1 = k0 + kT, k2 = k1 + kT, k3 = k2 + kT;
          let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          for (let d = 0; d < D; d++) {
            const x = qv[qo + d];
            s0 += x * kv[k0 + d];
            s1 += x * kv[k1 + d];
            s2 += x * kv[k2 + d];
            s3 += x * kv[k3 + d];
          }
          s[j] = s0 * scale;
          s[j + 1] = s1 * scale;
          s[j + 2] = s2 * scale;
          s[j + 3] = s3 * scale;
        }
        for (; j < keys; j++) {
          const k0 = kBase + j * kT;
          let s0 = 0;
          for (let d = 0; d < D; d++) s0 += qv[qo + d] * kv[k0 + d];
          s[j] = s0 * scale;
        }
        // Softmax weights (unnormalized) and their sum. Scores are float32, as on the
        // WebAssembly path: one past its range is +Infinity, and when the maximum is +Infinity
        // those keys share the weight and the others get none (the softmax's limit), not NaN.
        let max = -Infinity;
        for (j = 0; j < keys; j++) max = Math.max(max, s[j] = Math.fround(s[j]));
        if (max === Infinity) {
          for (j = 0; j < keys; j++) s[j] = s[j] === Infinity ? 0 : -Infinity;
          max = 0;
        }
        let sum = 0;
        for (j = 0; j < keys; j++) {
          const p = Math.exp(s[j] - max);
          s[j] = p;
          sum += p;
        }
        // Weighted sum of the value rows.
        a.fill(0, 0, Dv);
        for (j = 0; j + 4 <= keys; j += 4) {
          // Four value rows per pass: one load and store of each accumulator per four products.
          const p0 = s[j], p1 = s[j + 1], p2 = s[j + 2], p3 = s[j + 3];
          const v0 = vBase + j * vT, v1 = v0 + vT, v2 = v1 + vT, v3 = v2 + vT;
          for (let d = 0; d < Dv; d++) {
            a[d] += p0 * vv[v0 + d] + p1 * vv[v1 + d] + p2 * vv[v2 + d] + p3 * vv[v3 + d];
          }
        }
        for (; j < keys; j++) {
          const p = s[j], vo = vBase + j * vT;
          for (let d = 0; d < Dv; d++) a[d] += p * vv[vo + d];
        }
        const inv = 1 / sum, oo = b * g.out[0] + h * g.out[1] + i * g.out[2];
        for (let d = 0; d < Dv; d++) ov[oo + d] = a[d] * inv;
      }
    }
  }
}
