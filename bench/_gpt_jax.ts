/**
 * The decoder of models/gpt written with @jax-js/jax (its numpy-like API
 * under `jit`), from the same weight arrays: the second WebAssembly peer of
 * bench/gpt_cpu_peers_bench.ts. Same math as the VM program (and as
 * bench/_gpt_onnx.ts): weights `[out, in]` (`x @ Wᵀ + b`), layer norm with
 * the config's ε, exact (erf) GELU, attention over the KV caches scaled by
 * 1/√head size with an additive causal mask, the tied output projection.
 *
 * KV caches are `[heads, tokens, head size]` arrays grown with
 * `concatenate`; `jit` specializes on shapes, so each cache length is
 * compiled once (a warm-up run compiles every length the timed runs use).
 * jax-js counts references: every argument passed is consumed, so the
 * weights go in as `.ref`, and arrays used twice inside are `.ref`'d first.
 *
 * @module
 */

import { type GPTConfig, headSize } from "../models/gpt/config.ts";
import { BlockParam, layerBase, paramSpecs } from "../models/gpt/weights.ts";
import { causalMask } from "./_gpt_onnx.ts";

// deno-lint-ignore no-explicit-any -- the peers are untyped (bench/_peer.ts)
type Any = any;

/** The jax-js decoder with its KV caches. */
export class JaxGPT {
  readonly config: GPTConfig;
  readonly #jax: Any;
  readonly #w: Any[];
  readonly #forward: Any;
  #caches: Any[] = [];
  #position = 0;

  /**
   * Uploads the weights (cache order) to jax-js's current default device.
   * With `transposed`, every matrix a linear reads is uploaded as a
   * transposed copy `[in, out]` (and the tied embedding twice) so that
   * `matmul` needs no transpose.
   */
  constructor(jax: Any, config: GPTConfig, weights: readonly Float32Array[], transposed = false) {
    this.config = config;
    this.#jax = jax;
    const np = jax.numpy;
    const specs = paramSpecs(config);
    const isLinear = (i: number) => specs[i].shape.length === 2 && i > 1;
    this.#w = weights.map((w, i) =>
      transposed && isLinear(i)
        ? np.array(transpose(w, specs[i].shape)).reshape([...specs[i].shape].reverse())
        : np.array(w).reshape(specs[i].shape)
    );
    if (transposed) {
      this.#w.push(
        np.array(transpose(weights[0], specs[0].shape)).reshape([config.dModel, config.vocab]),
      );
    }
    this.#forward = jax.jit((w: Any[], tokens: Any, positions: Any, mask: Any, caches: Any[]) =>
      forward(jax, config, w, tokens, positions, mask, caches, transposed)
    );
    this.reset();
  }

  /** Tokens in the caches. */
  get position(): number {
    return this.#position;
  }

  /** Empties the KV caches. */
  reset(): void {
    const c = this.config, np = this.#jax.numpy;
    for (const t of this.#caches) t.dispose();
    this.#caches = Array.from(
      { length: 2 * c.layers },
      () => np.zeros([c.heads, 0, headSize(c)], { dtype: np.float32 }),
    );
    this.#position = 0;
  }

  /** Runs `tokens` after the cached ones; returns the last position's logits. */
  async forward(tokens: readonly number[]): Promise<Float32Array> {
    const np = this.#jax.numpy, n = tokens.length, past = this.#position;
    const ids = np.array(Int32Array.from(tokens), { dtype: np.int32 });
    const positions = np.array(Int32Array.from({ length: n }, (_, i) => past + i), {
      dtype: np.int32,
    });
    const mask = np.array(causalMask(n, past)).reshape([n, past + n]);
    const [logits, caches] = this.#forward(
      this.#w.map((w) => w.ref),
      ids,
      positions,
      mask,
      this.#caches,
    );
    this.#caches = caches;
    this.#position += n;
    return await logits.data() as Float32Array;
  }
}

/** The model: `(logits [1, vocab], present caches)`. */
function forward(
  jax: Any,
  c: GPTConfig,
  w: Any[],
  tokens: Any,
  positions: Any,
  mask: Any,
  caches: Any[],
  transposed: boolean,
): [Any, Any[]] {
  const np = jax.numpy, nn = jax.nn;
  const H = c.heads, Dh = headSize(c), D = c.dModel;
  const n = tokens.shape[0];
  // With transposed weights, the head's [D, vocab] copy is the last array.
  const head = transposed ? w.pop() : null;
  const linear = (x: Any, wi: number, bi: number | null) => {
    const y = transposed
      ? np.matmul(x, wi === 0 ? head : w[wi])
      : np.matmul(x, np.transpose(w[wi]));
    return bi === null ? y : y.add(w[bi]);
  };
  const layerNorm = (x: Any, gamma: number) =>
    nn.standardize(x, -1, { epsilon: c.eps }).mul(w[gamma]).add(w[gamma + 1]);
  const heads = (t: Any) => np.transpose(t.reshape([n, H, Dh]), [1, 0, 2]);
  const wte = w[0];
  let x = np.take(transposed ? wte : wte.ref, tokens, 0).add(np.take(w[1], positions, 0));
  const present: Any[] = [];
  for (let l = 0; l < c.layers; l++) {
    const p = layerBase(l);
    const h = layerNorm(x.ref, p + BlockParam.ln1Gamma);
    const q = heads(linear(h.ref, p + BlockParam.wq, p + BlockParam.bq));
    const k = heads(linear(h.ref, p + BlockParam.wk, p + BlockParam.bk));
    const v = heads(linear(h, p + BlockParam.wv, p + BlockParam.bv));
    const keys = np.concatenate([caches[2 * l], k], 1);
    const values = np.concatenate([caches[2 * l + 1], v], 1);
    present.push(keys.ref, values.ref);
    const scores = np.matmul(q, np.transpose(keys, [0, 2, 1])).mul(1 / Math.sqrt(Dh))
      .add(mask.ref);
    const attended = np.matmul(nn.softmax(scores, -1), values); // [H, n, Dh]
    const merged = np.transpose(attended, [1, 0, 2]).reshape([n, D]);
    x = x.add(linear(merged, p + BlockParam.wo, p + BlockParam.bo));
    const up = linear(
      layerNorm(x.ref, p + BlockParam.ln2Gamma),
      p + BlockParam.wFc,
      p + BlockParam.bFc,
    );
    const act = nn.gelu(up, { approximate: false });
    x = x.add(linear(act, p + BlockParam.wProj, p + BlockParam.bProj));
  }
  mask.dispose();
  const last = x.slice([n - 1, n]);
  const lnF = w.length - 2; // (after the head's copy was popped)
  const logits = linear(layerNorm(last, lnF), 0, null);
  return [logits, present];
}

/** A row-major `[rows, cols]` matrix as `[cols, rows]`. */
function transpose(a: Float32Array, [rows, cols]: readonly number[]): Float32Array {
  const t = new Float32Array(a.length);
  for (let r = 0; r < rows; r++) for (let k = 0; k < cols; k++) t[k * rows + r] = a[r * cols + k];
  return t;
}
