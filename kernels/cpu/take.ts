/**
 * CPU `take`: gather whole rows along an axis, for any dtype.
 *
 * `x` is seen as `[outer, n, inner]` around the axis and the output as
 * `[outer, m, inner]` with `m` the number of indices; each output row of
 * `inner` elements is one `TypedArray.set` from the row the index names (an
 * embedding lookup is `outer = 1`: one block copy per token).
 *
 * Indices are int32 or int64 (`BigInt64Array`), mapped by `mapIndex`.
 *
 * @module
 */

import type { NumberArray } from "../../ground/dtype.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import type { TakeMode } from "../kernel_backend.ts";

/**
 * Maps index `v` (an int32 number or an int64 bigint) of an axis of length
 * `n > 0` by `mode` into `[0, n)`. In `"fast"` mode an index outside
 * `[-n, n)` — which the front end rejects before a CPU kernel runs — is
 * clamped, so no read leaves the axis. A bigint wraps exactly; for the other
 * modes its value as a number is close enough (beyond ±2^53 it clamps the
 * same way).
 */
export function mapIndex(v: number | bigint, n: number, mode: TakeMode): number {
  if (typeof v === "bigint") {
    if (mode === "wrap") return Number(((v % BigInt(n)) + BigInt(n)) % BigInt(n));
    v = Number(v);
  }
  if (mode === "wrap") return ((v % n) + n) % n;
  if (mode === "fast" && v < 0) v += n;
  return v < 0 ? 0 : v >= n ? n - 1 : v;
}

/** `out = take(x, indices, axis)` with `indices` mapped by `mode`. */
export function takeKernel(
  x: NDArray,
  indices: NDArray,
  axis: number,
  mode: TakeMode,
  out: NDArray,
): void {
  if (out.size === 0) return;
  const shape = x.shape;
  const n = shape[axis];
  let inner = 1;
  for (let d = axis + 1; d < shape.length; d++) inner *= shape[d];
  const m = indices.size;
  const outer = out.size / (m * inner);
  // Any element type, int64 included: elements are copied as they are.
  // readView: an embedding table read here stays sealed (kernels/cpu/wasm/resident.ts).
  const xv = x.readView() as NumberArray, ov = out.cpuView() as NumberArray;
  const iv = indices.readView() as ArrayLike<number | bigint>;
  const rows = new Int32Array(m);
  if (iv instanceof Int32Array && mode !== "wrap") {
    // mapIndex on int32 without its per-index type test (a convolution's window indices).
    const fast = mode === "fast";
    for (let t = 0; t < m; t++) {
      let v = iv[t];
      if (fast && v < 0) v += n;
      rows[t] = v < 0 ? 0 : v >= n ? n - 1 : v;
    }
  } else {
    for (let t = 0; t < m; t++) rows[t] = mapIndex(iv[t], n, mode);
  }
  if (inner === 1 && xv instanceof Float32Array) {
    gatherFloats(xv, ov as Float32Array, rows, outer, n);
    return;
  }
  let o = 0;
  for (let p = 0; p < outer; p++) {
    const base = p * n * inner;
    for (let t = 0; t < m; t++, o += inner) {
      const src = base + rows[t] * inner;
      if (inner === 1) ov[o] = xv[src];
      else ov.set(xv.subarray(src, src + inner), o);
    }
  }
}

/**
 * `take` of single float32 elements (a convolution's windows, gathered
 * along the last axis): its own loop, so the element accesses see one
 * array type, not every dtype the general loop copies.
 */
function gatherFloats(
  xv: Float32Array,
  ov: Float32Array,
  rows: Int32Array,
  outer: number,
  n: number,
): void {
  const m = rows.length;
  for (let p = 0, o = 0; p < outer; p++) {
    const base = p * n;
    for (let t = 0; t < m; t++) ov[o++] = xv[base + rows[t]];
  }
}
