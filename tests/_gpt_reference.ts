/**
 * The decoder of models/gpt written directly in plain TypeScript, in
 * float64, from the same weight arrays: the reference the VM's logits are
 * checked against. Nothing here comes from relaxvm but the configuration
 * and the weight layout (models/gpt/weights.ts): no operators, no kernels.
 *
 * @module
 */

import { type GPTConfig, headSize } from "../models/gpt/config.ts";
import { BlockParam, layerBase } from "../models/gpt/weights.ts";

/** erf to about double precision: its Taylor series below 2, the continued fraction of erfc above. */
function erf(x: number): number {
  const ax = Math.abs(x);
  if (ax < 2) {
    // Taylor series: erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1))
    let term = x, sum = x;
    for (let n = 1; n < 60; n++) {
      term *= -x * x / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return (2 / Math.sqrt(Math.PI)) * sum;
  }
  // erfc(x) by its continued fraction (Lentz), accurate for x ≥ 2.
  let f = ax, C = ax, Dn = 0;
  for (let n = 1; n < 200; n++) {
    const a = n / 2;
    Dn = ax + a * Dn;
    Dn = 1 / Dn;
    C = ax + a / C;
    const delta = C * Dn;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  const erfc = Math.exp(-ax * ax) / (f * Math.sqrt(Math.PI));
  return Math.sign(x) * (1 - erfc);
}

/** The decoder in float64 with its own KV caches. */
export class ReferenceGPT {
  readonly #c: GPTConfig;
  readonly #w: Float64Array[];
  readonly #keys: Float64Array[];
  readonly #values: Float64Array[];
  #position = 0;

  constructor(config: GPTConfig, weights: readonly Float32Array[]) {
    this.#c = config;
    this.#w = weights.map((w) => Float64Array.from(w));
    const rows = config.context * config.dModel;
    this.#keys = Array.from({ length: config.layers }, () => new Float64Array(rows));
    this.#values = Array.from({ length: config.layers }, () => new Float64Array(rows));
  }

  /** Tokens cached so far. */
  get position(): number {
    return this.#position;
  }

  /** Forgets the cached tokens. */
  reset(): void {
    this.#position = 0;
  }

  /** Runs `tokens` after the cached ones; returns the logits of the last. */
  forward(tokens: readonly number[]): Float64Array {
    const c = this.#c, D = c.dModel, w = this.#w;
    let x: Float64Array[] = tokens.map((t, i) => {
      const row = new Float64Array(D);
      for (let d = 0; d < D; d++) {
        row[d] = w[0][t * D + d] + w[1][(this.#position + i) * D + d];
      }
      return row;
    });
    for (let l = 0; l < c.layers; l++) x = this.#block(l, x);
    this.#position += tokens.length;
    const lnF = w.length - 2;
    const h = layerNorm(x[x.length - 1], w[lnF], w[lnF + 1], c.eps);
    return linear(h, w[0], null, c.vocab, D);
  }

  #block(l: number, x: Float64Array[]): Float64Array[] {
    const c = this.#c, D = c.dModel, H = c.heads, Dh = headSize(c);
    const p = (j: number) => this.#w[layerBase(l) + j];
    const keys = this.#keys[l], values = this.#values[l];
    const n = x.length, past = this.#position;
    const q: Float64Array[] = [];
    for (let i = 0; i < n; i++) {
      const h = layerNorm(x[i], p(BlockParam.ln1Gamma), p(BlockParam.ln1Beta), c.eps);
      q.push(linear(h, p(BlockParam.wq), p(BlockParam.bq), D, D));
      keys.set(linear(h, p(BlockParam.wk), p(BlockParam.bk), D, D), (past + i) * D);
      values.set(linear(h, p(BlockParam.wv), p(BlockParam.bv), D, D), (past + i) * D);
    }
    const scale = 1 / Math.sqrt(Dh);
    return x.map((xi, i) => {
      const seen = past + i + 1; // causal: the cache and this token
      const attended = new Float64Array(D);
      for (let h = 0; h < H; h++) {
        const scores = new Float64Array(seen);
        let max = -Infinity;
        for (let j = 0; j < seen; j++) {
          let s = 0;
          for (let d = 0; d < Dh; d++) s += q[i][h * Dh + d] * keys[j * D + h * Dh + d];
          scores[j] = s * scale;
          max = Math.max(max, scores[j]);
        }
        let sum = 0;
        for (let j = 0; j < seen; j++) sum += scores[j] = Math.exp(scores[j] - max);
        for (let j = 0; j < seen; j++) {
          for (let d = 0; d < Dh; d++) {
            attended[h * Dh + d] += (scores[j] / sum) * values[j * D + h * Dh + d];
          }
        }
      }
      const o = linear(attended, p(BlockParam.wo), p(BlockParam.bo), D, D);
      const x1 = xi.map((v, d) => v + o[d]);
      const h2 = layerNorm(x1, p(BlockParam.ln2Gamma), p(BlockParam.ln2Beta), c.eps);
      const up = linear(h2, p(BlockParam.wFc), p(BlockParam.bFc), c.dMLP, D)
        .map((v) => 0.5 * v * (1 + erf(v / Math.SQRT2)));
      const down = linear(up, p(BlockParam.wProj), p(BlockParam.bProj), D, c.dMLP);
      return x1.map((v, d) => v + down[d]);
    });
  }
}

function layerNorm(x: Float64Array, g: Float64Array, b: Float64Array, eps: number): Float64Array {
  let mean = 0;
  for (const v of x) mean += v;
  mean /= x.length;
  let variance = 0;
  for (const v of x) variance += (v - mean) ** 2;
  variance /= x.length;
  const inv = 1 / Math.sqrt(variance + eps);
  return x.map((v, i) => (v - mean) * inv * g[i] + b[i]);
}

/** `y = W x + b` for `W [out, in]`. */
function linear(
  x: Float64Array,
  w: Float64Array,
  b: Float64Array | null,
  out: number,
  inp: number,
): Float64Array {
  const y = new Float64Array(out);
  for (let o = 0; o < out; o++) {
    let s = b === null ? 0 : b[o];
    for (let i = 0; i < inp; i++) s += w[o * inp + i] * x[i];
    y[o] = s;
  }
  return y;
}

/** The largest `|a - e|` over the largest `|e|`: how far `actual` is from `expected`, relatively. */
export function maxRelativeDiff(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  let diff = 0, scale = 0;
  for (let i = 0; i < expected.length; i++) {
    diff = Math.max(diff, Math.abs(actual[i] - expected[i]));
    scale = Math.max(scale, Math.abs(expected[i]));
  }
  return diff / scale;
}
