/**
 * `GatherElements` and the losses built on it (`NegativeLogLikelihoodLoss`,
 * `SoftmaxCrossEntropyLoss`). `GatherElements` is `vm.op.take` on the
 * flattened data at `base + index · stride(axis)`, `base` a constant of
 * each output position's offset without the axis (so the shapes must be
 * known at import); indices compute in int32, which WebGPU computes too.
 *
 * @module
 */

import { tensor } from "../devices/tensor.ts";
import { knownSize, normAxis, Unsupported, type Value } from "./graph_values.ts";
import { dtypeOf } from "./onnx_tensor.ts";
import type { NodeContext } from "./node_context.ts";
import { FLOAT, type OpSpec } from "./op_spec.ts";
import { binary, unary } from "./ops_elementwise.ts";
import { softmaxOver } from "./ops_nn.ts";
import { reshapeTo } from "./ops_shape.ts";

/** `v` as int32 (indices). */
function int32(cx: NodeContext, v: Value): Value {
  if (v.dtype === "int32") return v;
  cx.dtype(v, ["int64"], "indices");
  return cx.em.call("vm.op.cast", [cx.em.reg(v), "int32"], "int32", v.shape);
}

function where(cx: NodeContext, c: Value, x: Value, y: Value, shape = c.shape): Value {
  return cx.em.call("vm.op.where", [cx.em.reg(c), cx.em.reg(x), cx.em.reg(y)], x.dtype, shape);
}

function compare(cx: NodeContext, op: string, a: Value, b: Value): Value {
  return cx.em.call(`vm.op.${op}`, [cx.em.reg(a), cx.em.reg(b)], "bool", a.shape);
}

/** `data[..., index[...], ...]` along `axis`, the result of `index`'s shape. */
export function gatherElements(cx: NodeContext, data: Value, index: Value, axis: number): Value {
  const ds = data.shape, is = index.shape;
  if (knownSize(ds) === null || knownSize(is) === null) {
    throw new Unsupported("GatherElements of shapes not known at import");
  }
  const dims = ds as number[], idims = is as number[];
  const strides = dims.map((_, i) => dims.slice(i + 1).reduce((a, b) => a * b, 1));
  const n = knownSize(idims)!;
  const base = new Int32Array(n);
  for (let p = 0; p < n; p++) {
    let rest = p, off = 0;
    for (let d = idims.length - 1; d >= 0; d--) {
      const c = rest % idims[d];
      rest = Math.floor(rest / idims[d]);
      if (d !== axis) off += c * strides[d];
    }
    base[p] = off;
  }
  const baseT = tensor(base, { shape: idims });
  cx.made.push(baseT);
  // Negative indices count from the end of the axis.
  let i = int32(cx, index);
  const len = cx.scalar(dims[axis], "int32");
  i = where(cx, compare(cx, "less", i, cx.scalar(0, "int32")), binary(cx, "add", i, len), i);
  const flat = binary(
    cx,
    "add",
    cx.fromTensor(baseT),
    binary(cx, "multiply", i, cx.scalar(strides[axis], "int32")),
  );
  const data1d = reshapeTo(cx, data, [knownSize(dims)!]);
  return cx.em.call(
    "vm.op.take",
    [cx.em.reg(data1d), cx.em.reg(flat), cx.em.imm(0)],
    data.dtype,
    idims,
  );
}

/**
 * ONNX's negative log-likelihood loss of log-probabilities `x [N, C, …]`
 * at `target [N, …]` (onnx/reference/ops/op_negative_log_likelihood_loss.py).
 */
function nllLoss(cx: NodeContext, x: Value, target: Value, weight: Value | undefined): Value {
  cx.dtype(x, FLOAT);
  const c = x.shape[1];
  if (typeof c !== "number") throw new Unsupported("a class count not known at import");
  const reduction = cx.string("reduction", "mean");
  const ignore = cx.has("ignore_index") ? cx.int("ignore_index", 0) : undefined;
  const t = int32(cx, target);
  // Indices outside [0, C) (an ignore_index) gather from a clamped index, then weigh 0.
  const clamped = binary(
    cx,
    "minimum",
    binary(cx, "maximum", t, cx.scalar(0, "int32")),
    cx.scalar(c - 1, "int32"),
  );
  const withAxis = reshapeTo(cx, clamped, [t.shape[0], 1, ...t.shape.slice(1)]);
  const picked = reshapeTo(cx, gatherElements(cx, x, withAxis, 1), t.shape);
  let loss = unary(cx, "negative", picked);
  const valid = ignore === undefined
    ? undefined
    : compare(cx, "not_equal", t, cx.scalar(ignore, "int32"));
  let w: Value | undefined;
  if (weight !== undefined) {
    w = cx.em.call(
      "vm.op.take",
      [cx.em.reg(weight), cx.em.reg(clamped), cx.em.imm(0)],
      "float32",
      t.shape,
    );
  }
  if (valid !== undefined) {
    w = w === undefined
      ? cx.em.call("vm.op.cast", [cx.em.reg(valid), "float32"], "float32", t.shape)
      : where(cx, valid, w, cx.scalar(0));
  }
  if (w !== undefined) loss = binary(cx, "multiply", loss, w, FLOAT);
  const all = (v: Value, op: string) =>
    cx.em.call(`vm.op.${op}`, [cx.em.reg(v), [], cx.em.imm(0)], "float32", []);
  if (reduction === "none") return loss;
  if (reduction === "sum") return all(loss, "sum");
  if (reduction !== "mean") throw new Unsupported(`reduction="${reduction}"`);
  return w === undefined
    ? all(loss, "mean")
    : binary(cx, "divide", all(loss, "sum"), all(w, "sum"), FLOAT);
}

/**
 * `GatherND`: each index tuple (the last axis of `indices`) picks a slice of
 * `data`; the tuples are flattened to row numbers of `data` viewed as
 * `[batch · rows, rest]` (`Σ index_j · stride_j`, negatives counted from the
 * end, plus each batch's first row, a constant) and taken with `vm.op.take`.
 */
function gatherND(cx: NodeContext, data: Value, indices: Value, batchDims: number): Value {
  if (knownSize(data.shape) === null || knownSize(indices.shape) === null) {
    throw new Unsupported("GatherND of shapes not known at import");
  }
  const ds = data.shape as number[], is = indices.shape as number[];
  const m = is[is.length - 1], b = batchDims;
  const indexed = ds.slice(b, b + m), rest = ds.slice(b + m);
  const rows = indexed.reduce((x, y) => x * y, 1);
  const batch = ds.slice(0, b).reduce((x, y) => x * y, 1);
  const strides = indexed.map((_, j) => indexed.slice(j + 1).reduce((x, y) => x * y, 1));
  const lead = is.slice(0, -1), positions = lead.reduce((x, y) => x * y, 1);
  const constant = (data: ArrayLike<number>, shape: number[]) => {
    const t = tensor(Int32Array.from(data), { shape });
    cx.made.push(t);
    return cx.fromTensor(t);
  };
  let i = int32(cx, indices);
  const negative = compare(cx, "less", i, cx.scalar(0, "int32"));
  i = where(cx, negative, binary(cx, "add", i, constant(indexed, [m])), i);
  const scaled = binary(cx, "multiply", i, constant(strides, [m]));
  let flat = cx.em.call(
    "vm.op.sum",
    [cx.em.reg(scaled), [is.length - 1], cx.em.imm(0)],
    "int32",
    lead,
  );
  if (b > 0) {
    // The first row of each position's batch: positions run batch-major over the lead axes.
    const perBatch = positions / batch;
    const first = Array.from({ length: positions }, (_, p) => Math.floor(p / perBatch) * rows);
    flat = binary(cx, "add", flat, constant(first, lead));
  }
  const table = reshapeTo(cx, data, [batch * rows, ...rest]);
  return cx.em.call("vm.op.take", [cx.em.reg(table), cx.em.reg(flat), cx.em.imm(0)], data.dtype, [
    ...lead,
    ...rest,
  ]);
}

/** GatherElements and the losses by ONNX name. */
export const GATHER_OPS: Record<string, OpSpec> = {
  GatherND: {
    attrs: ["batch_dims"],
    convert: (cx) => [gatherND(cx, cx.input(0), cx.input(1), cx.int("batch_dims", 0))],
  },
  EyeLike: {
    attrs: ["dtype", "k"],
    convert(cx) {
      // A constant of x's shape: ones on diagonal k.
      const x = cx.input(0), k = cx.int("k", 0);
      const [r, c] = x.shape;
      if (x.shape.length !== 2 || typeof r !== "number" || typeof c !== "number") {
        throw new Unsupported("EyeLike of a shape not known at import");
      }
      const code = cx.int("dtype", 0);
      const dt = code === 0 ? x.dtype : dtypeOf(code);
      if (dt === null) throw new Unsupported(`dtype ${code}`);
      const ones = Array.from(
        { length: r * c },
        (_, i) => (i % c) - Math.floor(i / c) === k ? 1 : 0,
      );
      const t = dt === "int64"
        ? tensor(BigInt64Array.from(ones, BigInt), { shape: [r, c] })
        : tensor(ones, { dtype: dt, shape: [r, c] });
      cx.made.push(t);
      return [cx.fromTensor(t)];
    },
  },
  GatherElements: {
    attrs: ["axis"],
    convert(cx) {
      const data = cx.input(0), index = cx.input(1);
      return [gatherElements(cx, data, index, normAxis(cx.int("axis", 0), data.shape.length))];
    },
  },
  NegativeLogLikelihoodLoss: {
    attrs: ["ignore_index", "reduction"],
    convert: (cx) => [nllLoss(cx, cx.input(0), cx.input(1), cx.optional(2))],
  },
  SoftmaxCrossEntropyLoss: {
    attrs: ["ignore_index", "reduction"],
    convert(cx) {
      const scores = cx.input(0);
      cx.dtype(scores, FLOAT);
      const logProb = softmaxOver(cx, scores, 1, true);
      return [nllLoss(cx, logProb, cx.input(1), cx.optional(2)), logProb];
    },
  },
};
