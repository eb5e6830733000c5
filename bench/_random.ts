/**
 * Deterministic inputs shared by the benchmarks, so every run (and every
 * library compared) sees the same numbers.
 *
 * @module
 */

/** `n` deterministic values in [-1, 1) from a linear congruential generator seeded with `seed`. */
export function randomValues(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}
