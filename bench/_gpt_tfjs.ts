/**
 * The decoder of models/gpt written with TensorFlow.js ops, from the same
 * weight arrays: what a TF.js user would write, and what `gpt_bench.ts`
 * measures relaxvm against. Same model and layout as the VM program (weights
 * `[out, in]`, `matMul(x, w, false, true)`; KV caches `[heads, tokens, head
 * size]` grown with `concat`; only the last position's logits), on whichever
 * TF.js backend is active.
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import * as tf from "npm:@tensorflow/tfjs-core@4.22.0";
import { type GPTConfig, headSize } from "../models/gpt/config.ts";
import { BlockParam, layerBase } from "../models/gpt/weights.ts";

/** A TF.js decoder with its KV caches. */
export class TfjsGPT {
  readonly #c: GPTConfig;
  readonly #w: tf.Tensor[];
  #keys: (tf.Tensor | null)[];
  #values: (tf.Tensor | null)[];
  #position = 0;

  /** Uploads the weights (in cache order) to the active backend. */
  constructor(config: GPTConfig, weights: readonly Float32Array[], shapes: readonly number[][]) {
    this.#c = config;
    this.#w = weights.map((w, i) => tf.tensor(w, shapes[i]));
    this.#keys = new Array(config.layers).fill(null);
    this.#values = new Array(config.layers).fill(null);
  }

  /** Drops the KV caches. */
  reset(): void {
    for (const t of [...this.#keys, ...this.#values]) t?.dispose();
    this.#keys.fill(null);
    this.#values.fill(null);
    this.#position = 0;
  }

  /** Runs `tokens` after the cached ones; returns the last position's logits `[1, vocab]`. */
  forward(tokens: readonly number[]): tf.Tensor {
    const c = this.#c, w = this.#w, n = tokens.length, past = this.#position;
    const H = c.heads, Dh = headSize(c), D = c.dModel;
    const newKeys: tf.Tensor[] = [], newValues: tf.Tensor[] = [];
    const logits = tf.tidy(() => {
      const ids = tf.tensor1d(Int32Array.from(tokens), "int32");
      let x = tf.add(tf.gather(w[0], ids), tf.slice(w[1], [past, 0], [n, D]));
      // Additive causal mask for a prefill: query i sees keys j <= past + i.
      const mask = n === 1 ? null : tf.tensor2d(
        Float32Array.from(
          { length: n * (past + n) },
          (_, e) => (e % (past + n) > Math.floor(e / (past + n)) + past ? -1e9 : 0),
        ),
        [n, past + n],
      );
      const linear = (x: tf.Tensor, wi: number, bi: number | null) => {
        const y = tf.matMul(x as tf.Tensor2D, w[wi] as tf.Tensor2D, false, true);
        return bi === null ? y : tf.add(y, w[bi]);
      };
      const heads = (t: tf.Tensor) => tf.transpose(tf.reshape(t, [n, H, Dh]), [1, 0, 2]);
      for (let l = 0; l < c.layers; l++) {
        const p = layerBase(l);
        const h = layerNorm(x, w[p + BlockParam.ln1Gamma], w[p + BlockParam.ln1Beta], c.eps);
        const q = heads(linear(h, p + BlockParam.wq, p + BlockParam.bq));
        const k = heads(linear(h, p + BlockParam.wk, p + BlockParam.bk));
        const v = heads(linear(h, p + BlockParam.wv, p + BlockParam.bv));
        const K = this.#keys[l] === null ? k : tf.concat([this.#keys[l]!, k], 1);
        const V = this.#values[l] === null ? v : tf.concat([this.#values[l]!, v], 1);
        newKeys.push(tf.keep(K));
        newValues.push(tf.keep(V));
        let scores = tf.mul(tf.matMul(q, K, false, true), 1 / Math.sqrt(Dh));
        if (mask !== null) scores = tf.add(scores, mask);
        const attended = tf.matMul(tf.softmax(scores), V); // [H, n, Dh]
        const merged = tf.reshape(tf.transpose(attended, [1, 0, 2]), [n, D]);
        x = tf.add(x, linear(merged, p + BlockParam.wo, p + BlockParam.bo));
        const h2 = layerNorm(x, w[p + BlockParam.ln2Gamma], w[p + BlockParam.ln2Beta], c.eps);
        const up = linear(h2, p + BlockParam.wFc, p + BlockParam.bFc);
        const act = tf.mul(tf.mul(up, 0.5), tf.add(tf.erf(tf.mul(up, Math.SQRT1_2)), 1));
        x = tf.add(x, linear(act, p + BlockParam.wProj, p + BlockParam.bProj));
      }
      const lnF = w.length - 2;
      const last = layerNorm(tf.slice(x, [n - 1, 0], [1, D]), w[lnF], w[lnF + 1], c.eps);
      return linear(last, 0, null);
    });
    for (let l = 0; l < c.layers; l++) {
      this.#keys[l]?.dispose();
      this.#values[l]?.dispose();
      this.#keys[l] = newKeys[l];
      this.#values[l] = newValues[l];
    }
    this.#position += n;
    return logits;
  }

  /** Releases the weights and caches. */
  dispose(): void {
    this.reset();
    for (const t of this.#w) t.dispose();
  }
}

/** Layer norm over the last axis, from TF.js ops (TF.js has no fused one). */
function layerNorm(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, eps: number): tf.Tensor {
  const { mean, variance } = tf.moments(x, -1, true);
  return tf.add(tf.mul(tf.mul(tf.sub(x, mean), tf.rsqrt(tf.add(variance, eps))), gamma), beta);
}
