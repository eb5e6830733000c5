/**
 * Statistics the benchmarks share.
 *
 * @module
 */

/** The median of `xs` (the mean of the middle two for an even count); `xs` is not changed. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}
