/**
 * The memory-copy floor the CPU benchmarks print beside their figures: what
 * this machine's plain `TypedArray.set` moves, so a kernel's bandwidth reads
 * against the best a copy does here.
 *
 * @module
 */

import { randomValues } from "./_random.ts";
import { median } from "./_stats.ts";

/** GB/s of read + write traffic of a 128 MiB `TypedArray.set`, median of 5. */
export function copyFloor(): number {
  const n = 32 * 2 ** 20, src = randomValues(n, 3), dst = new Float32Array(n);
  dst.set(src);
  const t: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    dst.set(src);
    t.push(performance.now() - t0);
  }
  return 2 * n * 4 / median(t) / 1e6;
}
