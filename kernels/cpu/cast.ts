/**
 * CPU dtype conversion between any two tensor dtypes.
 *
 * The rules, chosen so that every backend can give the same answer:
 *
 * - float → integer truncates toward zero and saturates at the target's
 *   range (int64's included); NaN becomes 0. This is WGSL's conversion (and
 *   Rust's `as`), whereas JavaScript's TypedArray stores would wrap modulo
 *   2^bits.
 * - anything → bool is `x != 0` (so NaN is true, as in NumPy).
 * - integer → narrower integer wraps modulo 2^bits (C and NumPy).
 * - integer or bool → float, and float64 → float32, round to nearest even;
 *   int64 → float32 rounds once, from the exact integer.
 * - → float16 and → bfloat16 round to nearest even from the float32 value
 *   (a float64 or int64 source is rounded to float32 first); values beyond
 *   the format's range become infinities, NaN stays NaN. float16 and
 *   bfloat16 → anything go through their exact float32 value.
 *
 * @module
 */

import { NATIVE_FLOAT16, type NumberArray, type TensorDType } from "../../ground/dtype.ts";
import {
  bfloat16ArrayToFloat32,
  float16ArrayToFloat32,
  float32ToBfloat16BitsRounded,
  float32ToFloat16Bits,
} from "../../ground/float_formats.ts";
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

/** Width and signedness of the integer dtypes below 64 bits, for int64's wrapping. */
const INT_BITS: Partial<Record<TensorDType, readonly [number, boolean]>> = {
  int8: [8, true],
  int16: [16, true],
  int32: [32, true],
  uint8: [8, false],
  uint16: [16, false],
  uint32: [32, false],
};

const INT64_MAX = 2n ** 63n - 1n, INT64_MIN = -(2n ** 63n);

function isFloat(dt: TensorDType): boolean {
  return dt === "float32" || dt === "float64" || dt === "float16" || dt === "bfloat16";
}

/** Converts `x` into `out` (same shape, `out.dtype` the target). */
export function castKernel(x: NDArray, out: NDArray): void {
  if (x.dtype === out.dtype) {
    (out.cpuView() as NumberArray).set(x.readView() as NumberArray); // the same bits
  } else if (x.dtype === "int64") {
    fromInt64(x.readView() as BigInt64Array, out);
  } else {
    fromNumbers(numbersOf(x), isFloat(x.dtype), out);
  }
}

/** The elements of a tensor of any dtype but int64, as numbers (16-bit floats decoded). */
function numbersOf(x: NDArray): NumberArray {
  const view = x.readView() as NumberArray;
  // Loops, not Float32Array.from(view, f): that dies past about 2^27 elements (float_formats.ts).
  if (x.dtype === "bfloat16") return bfloat16ArrayToFloat32(view as Uint16Array);
  if (x.dtype === "float16" && !NATIVE_FLOAT16) return float16ArrayToFloat32(view as Uint16Array);
  return view;
}

/** Stores the numbers `v` into `out` by the rules above; `fromFloat` says what they came from. */
function fromNumbers(v: NumberArray, fromFloat: boolean, out: NDArray): void {
  const n = v.length;
  switch (out.dtype) {
    case "bool": {
      const ov = out.cpuView() as Uint8Array;
      for (let i = 0; i < n; i++) ov[i] = v[i] !== 0 ? 1 : 0;
      return;
    }
    case "int64": {
      const ov = out.cpuView() as BigInt64Array;
      for (let i = 0; i < n; i++) ov[i] = fromFloat ? saturatingInt64(v[i]) : BigInt(v[i]);
      return;
    }
    case "float16": {
      const ov = out.cpuView() as NumberArray;
      // Float16Array rounds what it is given: give it the float32 value, as the fallback encodes.
      if (NATIVE_FLOAT16) { for (let i = 0; i < n; i++) ov[i] = Math.fround(v[i]); }
      else for (let i = 0; i < n; i++) ov[i] = float32ToFloat16Bits(v[i]);
      return;
    }
    case "bfloat16": {
      const ov = out.cpuView() as Uint16Array;
      for (let i = 0; i < n; i++) ov[i] = float32ToBfloat16BitsRounded(v[i]);
      return;
    }
  }
  const ov = out.cpuView() as NumberArray;
  const range = INT_RANGE[out.dtype];
  if (v instanceof Float32Array && ov instanceof Int32Array) {
    float32ToInt32(v, ov);
  } else if (fromFloat && range !== undefined) {
    const [lo, hi] = range;
    for (let i = 0; i < n; i++) {
      const x = v[i];
      // NaN fails both comparisons and lands on Math.trunc(NaN) → stored as 0.
      ov[i] = x <= lo ? lo : x >= hi ? hi : Math.trunc(x);
    }
  } else {
    // Integer → integer wraps and anything → float rounds: exactly what a TypedArray store does.
    ov.set(v);
  }
}

/**
 * float32 → int32 by the rules above, in a loop of its own: the shared loop
 * above sees every pair of array types and V8 compiles it for none (4.6×
 * slower on 4M values, bench/cpu_rows_bench.ts). `x | 0` truncates what is
 * in range and makes NaN 0. A WebAssembly kernel would do no better: its
 * copies in and out alone take as long as this loop (the same bench).
 */
function float32ToInt32(v: Float32Array, o: Int32Array): void {
  const n = v.length;
  for (let i = 0; i < n; i++) {
    const x = v[i];
    o[i] = x <= -2147483648 ? -2147483648 : x >= 2147483647 ? 2147483647 : x | 0;
  }
}

/** A float truncated toward zero and saturated to int64; NaN is 0. */
function saturatingInt64(x: number): bigint {
  if (Number.isNaN(x)) return 0n;
  if (x >= 2 ** 63) return INT64_MAX;
  if (x <= -(2 ** 63)) return INT64_MIN;
  return BigInt(Math.trunc(x));
}

/** Stores int64 values into `out` by the rules above. */
function fromInt64(b: BigInt64Array, out: NDArray): void {
  const n = b.length;
  const bits = INT_BITS[out.dtype];
  if (bits !== undefined) {
    const [width, signed] = bits;
    const ov = out.cpuView() as NumberArray;
    for (let i = 0; i < n; i++) {
      ov[i] = Number(signed ? BigInt.asIntN(width, b[i]) : BigInt.asUintN(width, b[i]));
    }
    return;
  }
  if (out.dtype === "bool") {
    const ov = out.cpuView() as Uint8Array;
    for (let i = 0; i < n; i++) ov[i] = b[i] !== 0n ? 1 : 0;
    return;
  }
  if (out.dtype === "float64") {
    const ov = out.cpuView() as Float64Array;
    for (let i = 0; i < n; i++) ov[i] = Number(b[i]); // rounds to nearest even
    return;
  }
  // float32, float16, bfloat16: round once to float32, then as from float32.
  const rounded = new Float32Array(n);
  for (let i = 0; i < n; i++) rounded[i] = int64ToFloat32(b[i]);
  fromNumbers(rounded, true, out);
}

/** The float32 nearest to an int64 (ties to even), rounded once from the exact integer. */
export function int64ToFloat32(b: bigint): number {
  if (b >= -(2n ** 53n) && b <= 2n ** 53n) return Math.fround(Number(b)); // Number(b) is exact
  const negative = b < 0n;
  const m = negative ? -b : b;
  const shift = BigInt(m.toString(2).length - 24);
  let kept = m >> shift;
  const rest = m - (kept << shift), half = 1n << (shift - 1n);
  if (rest > half || (rest === half && (kept & 1n) === 1n)) kept += 1n;
  const v = Number(kept) * 2 ** Number(shift); // at most 25 significant bits: exact
  return negative ? -v : v;
}
