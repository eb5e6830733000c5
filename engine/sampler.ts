/**
 * Per-request sampling on the host: logit bias, temperature, top-k, top-p, with a
 * seeded generator, so a request gives the same tokens whatever else runs beside it.
 *
 * ```text
 * 1. logits[id] += bias[id]                     (OpenAI's logit_bias, -100..100)
 * 2. temperature 0: the largest logit (the lowest id among equals); done
 * 3. top-k (k > 0): the k largest logits, ties by id
 * 4. softmax(logits / temperature) over them, largest first
 * 5. top-p: the shortest prefix whose mass reaches top_p (TVM's sample_top_p_from_prob)
 * 6. one uniform u from the request's generator picks in that prefix by u × its mass
 * ```
 *
 * @module
 */

/** How a request picks each token. */
export interface SamplingParams {
  /** 0: greedy. Default 1 (OpenAI's). */
  temperature?: number;
  /** Nucleus mass in (0, 1]; default 1. */
  topP?: number;
  /** Only the `topK` likeliest ids (0, the default: all). */
  topK?: number;
  /** Added to the logits of these ids before sampling (OpenAI's `logit_bias`). */
  logitBias?: Readonly<Record<string | number, number>>;
  /** Seed of the request's generator; default a random one. */
  seed?: number;
}

/** A seeded generator of uniforms in [0, 1) (SplitMix32): the same seed, the same numbers. */
export function seededUniform(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    z = (z ^ (z >>> 16)) >>> 0;
    return z / 2 ** 32;
  };
}

/** Checks `params` (a `RangeError` naming the field) and returns them with defaults. */
export function checkSampling(params: SamplingParams, vocab: number, who: string): {
  temperature: number;
  topP: number;
  topK: number;
  bias: [number, number][];
  seed: number;
} {
  const temperature = params.temperature ?? 1, topP = params.topP ?? 1, topK = params.topK ?? 0;
  if (!(temperature >= 0) || !Number.isFinite(temperature)) {
    throw new RangeError(`${who}: temperature must be a finite number ≥ 0, got ${temperature}`);
  }
  if (!(topP > 0 && topP <= 1)) {
    throw new RangeError(`${who}: top_p must be in (0, 1], got ${topP}`);
  }
  if (!Number.isSafeInteger(topK) || topK < 0) {
    throw new RangeError(`${who}: top_k must be an integer ≥ 0, got ${topK}`);
  }
  const bias: [number, number][] = [];
  for (const [key, value] of Object.entries(params.logitBias ?? {})) {
    const id = Number(key);
    if (!Number.isSafeInteger(id) || id < 0 || id >= vocab) {
      throw new RangeError(`${who}: logit_bias names token ${key}, not in 0..${vocab - 1}`);
    }
    if (typeof value !== "number" || !(value >= -100 && value <= 100)) {
      throw new RangeError(`${who}: logit_bias of token ${key} must be in -100..100, got ${value}`);
    }
    bias.push([id, value]);
  }
  const seed = params.seed ?? Math.floor(Math.random() * 2 ** 32);
  if (!Number.isSafeInteger(seed)) {
    throw new RangeError(`${who}: seed must be an integer, got ${seed}`);
  }
  return { temperature, topP, topK, bias, seed };
}

/** Picks the next id from one row of logits (see the module). */
export function sampleToken(
  logits: Float32Array,
  p: ReturnType<typeof checkSampling>,
  uniform: () => number,
): number {
  const x = Float64Array.from(logits);
  // -100 bans an id (OpenAI's meaning), whatever its logit.
  for (const [id, b] of p.bias) x[id] = b <= -100 ? -Infinity : x[id] + b;
  if (p.temperature === 0) {
    let best = 0;
    for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
    return best;
  }
  let order = Array.from(x.keys()).filter((i) => x[i] > -Infinity);
  if (order.length === 0) order = Array.from(x.keys()); // everything banned: sample them all
  order.sort((a, b) => x[b] - x[a] || a - b);
  if (p.topK > 0) order = order.slice(0, p.topK);
  const max = x[order[0]];
  const probs = order.map((i) => Math.exp((x[i] - max) / p.temperature));
  const sum = probs.reduce((a, b) => a + b, 0);
  let kept = 0, mass = 0;
  while (kept < probs.length && (kept === 0 || mass < p.topP * sum)) mass += probs[kept++];
  const target = uniform() * mass;
  let acc = 0;
  for (let i = 0; i < kept; i++) {
    acc += probs[i];
    if (target < acc) return order[i];
  }
  return order[kept - 1];
}
