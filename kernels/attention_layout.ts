/**
 * Where `attention`'s rows live for each layout (`AttentionLayout`): the
 * geometry both backends index with, so that neither needs a transpose.
 *
 * @module
 */

import type { AttentionLayout } from "./kernel_backend.ts";

/**
 * Where one attention's rows live: `batches × heads × tokens` rows of a
 * head size each, at element strides per batch, head and token, for q, k,
 * v and the output. `attentionGeometry` derives it from the shapes.
 */
export interface AttentionGeometry {
  /** Product of the batch axes (1 for `"BHSD"`). */
  batches: number;
  /** Heads per batch. */
  heads: number;
  /** Queries and keys per head. */
  Tq: number;
  Tk: number;
  /** Head size of q and k, and of v and out. */
  D: number;
  Dv: number;
  /** [batch, head, token] strides of q, k, v and out, in elements. */
  q: readonly [number, number, number];
  k: readonly [number, number, number];
  v: readonly [number, number, number];
  out: readonly [number, number, number];
}

/**
 * The geometry of an attention call: `"BHSD"`, `[..., heads, tokens, head
 * size]` (the leading axes are all heads of one batch), or `"BSHD"`,
 * `[..., tokens, heads, head size]` (TVM's `relax.op.nn.attention` and a KV
 * cache's row layout; the leading axes are batches).
 */
export function attentionGeometry(
  q: readonly number[],
  k: readonly number[],
  v: readonly number[],
  layout: AttentionLayout,
): AttentionGeometry {
  const rank = q.length;
  const D = q[rank - 1], Dv = v[rank - 1];
  if (layout === "BHSD") {
    const Tq = q[rank - 2], Tk = k[rank - 2];
    let heads = 1;
    for (let i = 0; i < rank - 2; i++) heads *= q[i];
    return {
      batches: 1,
      heads,
      Tq,
      Tk,
      D,
      Dv,
      q: [0, Tq * D, D],
      k: [0, Tk * D, D],
      v: [0, Tk * Dv, Dv],
      out: [0, Tq * Dv, Dv],
    };
  }
  const Tq = q[rank - 3], Tk = k[rank - 3], H = q[rank - 2];
  let batches = 1;
  for (let i = 0; i < rank - 3; i++) batches *= q[i];
  return {
    batches,
    heads: H,
    Tq,
    Tk,
    D,
    Dv,
    q: [Tq * H * D, D, H * D],
    k: [Tk * H * D, D, H * D],
    v: [Tk * H * Dv, Dv, H * Dv],
    out: [Tq * H * Dv, Dv, H * Dv],
  };
}
