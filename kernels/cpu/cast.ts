/**
 * CPU dtype conversion between any two tensor dtypes.
 *
 * The rules, chosen so that every backend can give the same answer:
 *
 * - float → integer truncates toward zero and saturates at the target's
 *   range; NaN becomes 0. This is WGSL's conversion (and Rust's `as`),
 *   whereas JavaScript's TypedArray stores would wrap modulo 2^bits.
 * - anything → bool is `x != 0` (so NaN is true, as in NumPy).
 * - integer → narrower integer wraps modulo 2^bits (C and NumPy).
 * - integer or bool → float, and float64 → float32, round to nearest.
 *
 * This file is browser-safe: no `Deno.*`.
 *
 * @module
 */

import type { TensorDType } from "../../ground/dtype.ts";
import type { NDArray } from "../../devices/ndarray.ts";

/** The range of each integer dtype, for saturating float → integer conversion. */
const INT_RANGE: Partial<Record<TensorDType, readonly [number, number]>> = {
  int8: [-(2 ** 7), 2 ** 7 - 1],
  int16: [-(2 ** 15), 2 ** 15 - 1],
  int32: [-(2 ** 31), 2 ** 31 - 1],
  uint8: [0, 2 ** 8 - 1],
  uint16: [0, 2 ** 16 - 1],
  uint32: [0, 2 ** 32 - 1],
};

function isFloat(dt: TensorDType): boolean {
  return dt === "float32" || dt === "float64";
}

/** Converts `x` into `out` (same shape, `out.dtype` the target). */
export function castKernel(x: NDArray, out: NDArray): void {
  const xv = x.cpuView(), ov = out.cpuView();
  const n = xv.length;
  const range = INT_RANGE[out.dtype];
  if (out.dtype === "bool") {
    for (let i = 0; i < n; i++) ov[i] = xv[i] !== 0 ? 1 : 0;
  } else if (isFloat(x.dtype) && range !== undefined) {
    const [lo, hi] = range;
    for (let i = 0; i < n; i++) {
      const v = xv[i];
      // NaN fails both comparisons and lands on Math.trunc(NaN) → stored as 0.
      ov[i] = v <= lo ? lo : v >= hi ? hi : Math.trunc(v);
    }
  } else {
    // Integer → integer wraps and anything → float rounds: exactly what a
    // TypedArray store does.
    ov.set(xv);
  }
}
