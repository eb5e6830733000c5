/**
 * ONNX's `Pad` (opsets 2 to 21: `pads` as an attribute, then as an input;
 * `constant_value`; `axes`), with pads known at import, as slices and
 * concatenations along each padded axis: `reflect` takes the mirrored rows
 * with a negative-stride `vm.op.strided_slice` (negative bounds, so the
 * axis's own size may be symbolic), `edge` repeats the first or last row,
 * `wrap` takes the other end's rows, `constant` concatenates a filled block.
 * Negative pads crop. Silero VAD pads its audio so (`reflect`, 64 samples)
 * before the convolution that is its STFT.
 *
 * @module
 */

import { tensor } from "../devices/tensor.ts";
import { type Dim, knownSize, normAxis, Unsupported, type Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import type { OpSpec } from "./op_spec.ts";
import { concatOrSelf } from "./ops_shape.ts";

/** Largest block of the constant the importer fills itself (16 M elements). */
const MAX_FILL = 1 << 24;

function slice(
  cx: NodeContext,
  x: Value,
  axis: number,
  b: number,
  e: number,
  step: number,
  n: Dim,
) {
  const shape = [...x.shape];
  shape[axis] = n;
  return cx.em.call(
    "vm.op.strided_slice",
    [cx.em.reg(x), [axis], [b], [e], [step]],
    x.dtype,
    shape,
  );
}

/** `p` rows of `value` shaped as `x` but for `axis`. */
function filled(cx: NodeContext, x: Value, axis: number, p: number, value: number): Value {
  const shape = [...x.shape];
  shape[axis] = p;
  const size = knownSize(shape);
  if (size !== null && size <= MAX_FILL) {
    const t = tensor(new Float32Array(size).fill(value), { shape: shape as number[] });
    cx.made.push(t);
    const f = cx.fromTensor(t);
    return x.dtype === "float32"
      ? f
      : cx.em.call("vm.op.cast", [cx.em.reg(f), x.dtype], x.dtype, shape);
  }
  // A shape known only at run time: `p` copies of an edge row, each element `value` (a false
  // condition picks it, NaNs and all).
  const edge = edgeRows(cx, x, axis, p, true);
  const never = cx.scalar(0, "bool"), v = cx.scalar(value, x.dtype);
  return cx.em.call(
    "vm.op.where",
    [cx.em.reg(never), cx.em.reg(edge), cx.em.reg(v)],
    x.dtype,
    edge.shape,
  );
}

/** `p` copies of the first (or last) row along `axis`. */
function edgeRows(cx: NodeContext, x: Value, axis: number, p: number, first: boolean): Value {
  const row = first ? slice(cx, x, axis, 0, 1, 1, 1) : slice(cx, x, axis, -1, 2 ** 31 - 1, 1, 1);
  return concatOrSelf(cx, new Array(p).fill(row), axis);
}

/** `x` padded by `before` and `after` rows along `axis`, in `mode`. */
function padAxis(
  cx: NodeContext,
  x: Value,
  axis: number,
  before: number,
  after: number,
  mode: string,
  value: number,
): Value {
  // Negative pads crop first.
  if (before < 0 || after < 0) {
    const n = x.shape[axis];
    const b = Math.max(0, -before), e = Math.max(0, -after);
    const size = typeof n === "number" ? n - b - e : null;
    x = slice(cx, x, axis, b, e === 0 ? 2 ** 31 - 1 : -e, 1, size);
    before = Math.max(0, before);
    after = Math.max(0, after);
  }
  const n = x.shape[axis];
  const parts: Value[] = [];
  const side = (p: number, first: boolean): Value => {
    switch (mode) {
      case "constant":
        return filled(cx, x, axis, p, value);
      case "edge":
        return edgeRows(cx, x, axis, p, first);
      case "reflect":
        if (typeof n === "number" && p >= n) {
          throw new Unsupported(`reflect pad of ${p} on an axis of ${n}`);
        }
        // x[p], …, x[1] before; x[n−2], …, x[n−1−p] after.
        return first ? slice(cx, x, axis, p, 0, -1, p) : slice(cx, x, axis, -2, -2 - p, -1, p);
      case "wrap":
        if (typeof n === "number" && p > n) {
          throw new Unsupported(`wrap pad of ${p} on an axis of ${n}`);
        }
        return first ? slice(cx, x, axis, -p, 2 ** 31 - 1, 1, p) : slice(cx, x, axis, 0, p, 1, p);
      default:
        throw new Unsupported(`mode ${mode}`);
    }
  };
  if (before > 0) parts.push(side(before, true));
  parts.push(x);
  if (after > 0) parts.push(side(after, false));
  return concatOrSelf(cx, parts, axis);
}

/** The `Pad` operator. */
export const PAD_OPS: Record<string, OpSpec> = {
  Pad: {
    attrs: ["mode", "pads", "value"],
    convert(cx) {
      const x = cx.input(0);
      const rank = x.shape.length;
      const mode = cx.string("mode", "constant");
      let pads: number[];
      let value = cx.float("value", 0);
      let axes = [...Array(rank).keys()];
      if (cx.opset < 11) {
        pads = cx.ints("pads") ?? [];
      } else {
        pads = cx.knownInts(1, "pads");
        const c = cx.optional(2);
        if (c !== undefined) {
          if (c.tensor === undefined) {
            throw new Unsupported("constant_value known only at run time");
          }
          value = Number((c.tensor.dataSync() as ArrayLike<number | bigint>)[0] ?? 0);
        }
        if (cx.optional(3) !== undefined) {
          axes = cx.knownInts(3, "axes").map((a) => normAxis(a, rank));
        }
      }
      if (pads.length !== 2 * axes.length) {
        throw new Unsupported(`${pads.length} pads for ${axes.length} axes`);
      }
      let y = x;
      axes.forEach((axis, i) => {
        const before = pads[i], after = pads[i + axes.length];
        if (before !== 0 || after !== 0) {
          y = padAxis(cx, y, axis, before, after, mode, value);
        }
      });
      return [y === x ? cx.em.call("vm.op.cast", [cx.em.reg(x), x.dtype], x.dtype, x.shape) : y];
    },
  },
};
