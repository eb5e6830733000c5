/**
 * Data movement on integer tensors known at import (`Value.ints`), of any
 * rank: exporters build pads and shapes so (PyTorch's `F.pad` writes its
 * pads as `Reshape` to `[-1, 2]`, a `Slice` by step -1, `Transpose`,
 * `Reshape` to `[-1]`), and folding them keeps `Pad`'s pads known.
 *
 * @module
 */

import type { Dim } from "./graph_values.ts";

/** Row-major strides of `shape`. */
function strides(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length).fill(1);
  for (let i = shape.length - 2; i >= 0; i--) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

/** Every index of `shape` in row-major order, as `f(coordinates)` collected. */
function gatherBy(
  shape: readonly number[],
  at: (c: number[]) => number,
  ints: readonly Dim[],
): Dim[] {
  const total = shape.reduce((a, b) => a * b, 1);
  const out: Dim[] = [];
  const c = new Array<number>(shape.length).fill(0);
  for (let i = 0; i < total; i++) {
    out.push(ints[at(c)]);
    for (let k = shape.length - 1; k >= 0; k--) {
      if (++c[k] < shape[k]) break;
      c[k] = 0;
    }
  }
  return out;
}

/** `ints` of `shape` transposed by `perm`. */
export function transposeInts(
  ints: readonly Dim[],
  shape: readonly number[],
  perm: number[],
): Dim[] {
  const s = strides(shape);
  const out = perm.map((p) => shape[p]);
  return gatherBy(out, (c) => c.reduce((a, ci, k) => a + ci * s[perm[k]], 0), ints);
}

/**
 * `ints` of `shape` sliced: on each axis of `axes`, `count` elements from
 * `start` by `step` (`sliceRange`'s start and length); the others whole.
 */
export function sliceInts(
  ints: readonly Dim[],
  shape: readonly number[],
  axes: readonly number[],
  ranges: readonly [number, number, number][],
  steps: readonly number[],
): Dim[] {
  const s = strides(shape);
  const out = [...shape];
  const start = shape.map(() => 0), step = shape.map(() => 1);
  axes.forEach((a, k) => {
    out[a] = ranges[k][2];
    start[a] = ranges[k][0];
    step[a] = steps[k];
  });
  return gatherBy(
    out,
    (c) => c.reduce((a, ci, k) => a + (start[k] + ci * step[k]) * s[k], 0),
    ints,
  );
}

/** `ints` of `shape` broadcast to `target` (NumPy's rules; `target` already the broadcast shape). */
export function broadcastInts(
  ints: readonly Dim[],
  shape: readonly number[],
  target: readonly number[],
): Dim[] {
  const lead = target.length - shape.length;
  const s = strides(shape);
  return gatherBy(
    target,
    (c) => c.reduce((a, ci, k) => k < lead || shape[k - lead] === 1 ? a : a + ci * s[k - lead], 0),
    ints,
  );
}

/**
 * `Equal` of two known integer lists (scalars and equal lengths) where
 * symbols may appear, when the answer does not depend on their sizes: a
 * symbol equals itself, and never a negative number (a dimension is at
 * least 0). PyTorch's `expand` writes `Where(Equal(shape, -1), 1, shape)`
 * over a shape of symbols; any other pair is undefined (not foldable).
 */
export function equalDims(x: readonly Dim[], y: readonly Dim[]): number[] | undefined {
  const n = Math.max(x.length, y.length);
  if ((x.length !== n && x.length !== 1) || (y.length !== n && y.length !== 1)) return undefined;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const a = x[x.length === 1 ? 0 : i], b = y[y.length === 1 ? 0 : i];
    if (a === null || b === null) return undefined;
    if (a === b) out.push(1);
    else if (typeof a === "number" && typeof b === "number") out.push(0);
    else if ((typeof a === "number" && a < 0) || (typeof b === "number" && b < 0)) out.push(0);
    else return undefined;
  }
  return out;
}
