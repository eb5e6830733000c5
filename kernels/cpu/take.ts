/**
 * CPU `take`: gather whole rows along an axis, for any dtype.
 *
 * `x` is seen as `[outer, n, inner]` around the axis and the output as
 * `[outer, m, inner]` with `m` the number of indices; each output row of
 * `inner` elements is one `TypedArray.set` from the row the index names (an
 * embedding lookup is `outer = 1`: one block copy per token).
 *
 * Index values are read through `Number()`, so an int64 index tensor
 * (`BigInt64Array`) needs no change here.
 *
 * This file is browser-safe: no `Deno.*`.
 *
 * @module
 */

import type { NDArray } from "../../devices/ndarray.ts";
import type { TakeMode } from "../kernel_backend.ts";

/**
 * Maps index `i` of an axis of length `n > 0` by `mode` into `[0, n)`. In
 * `"fast"` mode an index outside `[-n, n)` — which the front end rejects
 * before a CPU kernel runs — is clamped, so no read leaves the axis.
 */
export function mapIndex(i: number, n: number, mode: TakeMode): number {
  if (mode === "wrap") return ((i % n) + n) % n;
  if (mode === "fast" && i < 0) i += n;
  return i < 0 ? 0 : i >= n ? n - 1 : i;
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
  const xv = x.cpuView(), ov = out.cpuView();
  const iv = indices.cpuView() as ArrayLike<number | bigint>;
  const rows = new Int32Array(m);
  for (let t = 0; t < m; t++) rows[t] = mapIndex(Number(iv[t]), n, mode);
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
