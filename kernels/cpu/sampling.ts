/**
 * CPU kernels for choosing tokens: `argmax` along an axis and top-p
 * (nucleus) sampling over rows of logits. They are the reference for the
 * WebGPU kernels, which compute the same results without sorting.
 *
 * @module
 */

import type { NumberArray } from "../../ground/dtype.ts";
import type { NDArray } from "../../devices/ndarray.ts";

const f32 = Math.fround;

/**
 * `out[o, i] = argmax_j x[o, j, i]` for `x` viewed as `[outer, n, inner]`
 * (`n > 0`): the first maximal element, NaN counting as larger than any
 * number (NumPy's rule). `out` is int32.
 */
export function argmaxKernel(
  x: NDArray,
  outer: number,
  n: number,
  inner: number,
  out: NDArray,
): void {
  const xv = x.readView() as NumberArray, ov = out.cpuView() as Int32Array;
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      const base = o * n * inner + i;
      let best = 0, bestValue = xv[base] as number;
      if (!Number.isNaN(bestValue)) {
        for (let j = 1; j < n; j++) {
          const v = xv[base + j * inner] as number;
          if (v > bestValue || Number.isNaN(v)) {
            best = j;
            bestValue = v;
            if (Number.isNaN(v)) break;
          }
        }
      }
      ov[o * inner + i] = best;
    }
  }
}

/** Reused weights of one row, for rows of up to `REUSED_WEIGHTS` elements. */
let weights = new Float64Array(0);
const REUSED_WEIGHTS = 1 << 20;

/**
 * Top-p sampling over each row of `logits` (`[rows, V]`, float32), one
 * uniform sample in [0, 1) per row from `uniform`, into int32 `out`; see
 * `sampleTopPRow`.
 */
export function sampleTopPKernel(
  logits: NDArray,
  uniform: NDArray,
  temperature: number,
  topP: number,
  out: NDArray,
): void {
  const V = logits.shape[logits.shape.length - 1];
  const lv = logits.readView() as Float32Array, uv = uniform.readView() as Float32Array;
  const ov = out.cpuView() as Int32Array;
  for (let r = 0; r < out.size; r++) {
    ov[r] = sampleTopPRow(lv.subarray(r * V, (r + 1) * V), uv[r], temperature, topP);
  }
}

/**
 * One row: NaN logits are never chosen. Below a temperature of 1e-6 the
 * result is the first maximal logit. Otherwise, with weights
 * `w_i = exp((x_i - max) / temperature)` (probabilities up to their sum
 * `Z`), taken largest first (ties by index), the nucleus is the shortest
 * prefix whose mass reaches `topP · Z`, and the result is the first element
 * of the prefix whose cumulative mass exceeds `u` times the nucleus's mass:
 * `vm.builtin.sample_top_p_from_prob` (TVM's rule, including its shortcut:
 * the first element outright when `u < p_max / topP`) applied to
 * `softmax(logits / temperature)`.
 */
export function sampleTopPRow(
  x: Float32Array,
  u: number,
  temperature: number,
  topP: number,
): number {
  const V = x.length;
  let best = -1;
  for (let i = 0; i < V; i++) if (!Number.isNaN(x[i]) && (best < 0 || x[i] > x[best])) best = i;
  if (best < 0) return 0;
  if (temperature < 1e-6) return best;
  // Rows of ordinary vocabularies reuse one array; a huge row gets its own, which goes with it
  // (kept, it would hold the memory of the largest row ever sampled for the process's life).
  if (weights.length < V && V <= REUSED_WEIGHTS) weights = new Float64Array(V);
  const w = V <= REUSED_WEIGHTS ? weights : new Float64Array(V);
  const max = x[best], inv = f32(1 / temperature);
  let Z = 0;
  for (let i = 0; i < V; i++) {
    w[i] = Number.isNaN(x[i]) ? 0 : f32(Math.exp(f32(f32(x[i] - max) * inv)));
    Z += w[i];
  }
  if (u * topP * Z < w[best]) return best; // u < p_max / top_p
  const order: number[] = [];
  for (let i = 0; i < V; i++) if (w[i] > 0) order.push(i);
  order.sort((a, b) => w[b] - w[a] || a - b);
  const target = topP * Z;
  let nucleus = 0, k = 0;
  for (; k < order.length && nucleus < target; k++) nucleus += w[order[k]];
  const threshold = u * nucleus;
  let cum = 0;
  for (let j = 0; j < k; j++) {
    cum += w[order[j]];
    if (cum > threshold) return order[j];
  }
  return order[Math.max(0, k - 1)];
}
