/**
 * ONNX's matrix, normalization and reduction operators: `MatMul`, `Gemm`
 * (`vm.op.linear` when it is one, else matmul, scaling and a bias),
 * `Softmax`/`LogSoftmax` (over any axis: the axis is moved last, or, before
 * opset 13, the input flattened to 2-D as those opsets define it),
 * `LayerNormalization` and the `Reduce*` family.
 *
 * @module
 */

import { broadcastShapes, type Dim, normAxis, Unsupported, type Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import { ARITH, FLOAT, type OpSpec } from "./op_spec.ts";
import { binary, unary } from "./ops_elementwise.ts";
import { flatten2d, reshapeTo } from "./ops_shape.ts";

/** NumPy matmul's result shape. */
function matmulShape(a: readonly Dim[], b: readonly Dim[]): Dim[] {
  if (a.length === 0 || b.length === 0) throw new Unsupported("MatMul of a scalar");
  const a2 = a.length === 1 ? [1, a[0]] : a, b2 = b.length === 1 ? [b[0], 1] : b;
  const batch = broadcastShapes(a2.slice(0, -2), b2.slice(0, -2));
  const out: Dim[] = [...batch];
  if (a.length > 1) out.push(a2[a2.length - 2]);
  if (b.length > 1) out.push(b2[b2.length - 1]);
  return out;
}

/** `vm.op.matmul(a, b)`. */
export function matmul(cx: NodeContext, a: Value, b: Value): Value {
  cx.dtype(a, FLOAT);
  cx.dtype(b, FLOAT);
  return cx.em.call(
    "vm.op.matmul",
    [cx.em.reg(a), cx.em.reg(b)],
    "float32",
    matmulShape(a.shape, b.shape),
  );
}

/** `x` with axes `i` and `j` swapped. */
function swap(cx: NodeContext, x: Value, i: number, j: number): Value {
  const perm = x.shape.map((_, k) => k);
  [perm[i], perm[j]] = [perm[j], perm[i]];
  return cx.em.call("vm.op.transpose", [cx.em.reg(x), perm], x.dtype, perm.map((p) => x.shape[p]));
}

/** Softmax (or log-softmax) of `x` over `axis`, with the axis moved last when it is not. */
function softmaxOver(cx: NodeContext, x: Value, axis: number, log: boolean): Value {
  const last = x.shape.length - 1;
  const moved = axis === last ? x : swap(cx, x, axis, last);
  let y = unary(cx, "softmax", moved);
  if (log) y = unary(cx, "log", y);
  return axis === last ? y : swap(cx, y, axis, last);
}

function softmaxSpec(log: boolean): OpSpec {
  return {
    attrs: ["axis"],
    convert(cx) {
      const x = cx.input(0), r = x.shape.length;
      if (r === 0) return [softmaxOver(cx, x, 0, log)];
      if (cx.opset >= 13) return [softmaxOver(cx, x, normAxis(cx.int("axis", -1), r), log)];
      // Opsets 1–12: softmax of the input flattened to [prod(shape[:axis]), prod(shape[axis:])].
      const axis = normAxis(cx.int("axis", 1), r);
      if (axis === r - 1) return [softmaxOver(cx, x, axis, log)];
      const flat = flatten2d(cx, x, axis);
      return [reshapeTo(cx, softmaxOver(cx, flat, 1, log), x.shape)];
    },
  };
}

/** Reduction axes: the `axes` attribute before `inputFrom`, input 1 from it on. */
function reduceAxes(cx: NodeContext, inputFrom: number): number[] | undefined {
  if (cx.opset < inputFrom) return cx.ints("axes");
  return cx.optional(1) === undefined ? undefined : cx.knownInts(1, "axes");
}

/** A `Reduce*` operator as `post(vm.op.<op>(pre(x), axes, keepdims))`. */
function reduce(
  op: string,
  inputFrom: number,
  dtypes: readonly string[],
  pre?: (cx: NodeContext, x: Value) => Value,
  post?: (cx: NodeContext, y: Value) => Value,
): OpSpec {
  return {
    attrs: ["axes", "keepdims", "noop_with_empty_axes"],
    convert(cx) {
      let x = cx.input(0);
      cx.dtype(x, dtypes as typeof ARITH);
      const r = x.shape.length;
      const given = reduceAxes(cx, inputFrom);
      const keep = cx.int("keepdims", 1) === 1;
      if ((given === undefined || given.length === 0) && cx.int("noop_with_empty_axes", 0) === 1) {
        return [pre === undefined ? x : pre(cx, x)];
      }
      const axes = given === undefined || given.length === 0
        ? x.shape.map((_, i) => i)
        : [...new Set(given.map((a) => normAxis(a, r)))].sort((a, b) => a - b);
      if (pre !== undefined) x = pre(cx, x);
      const shape = x.shape.flatMap((d, i) => axes.includes(i) ? (keep ? [1] : []) : [d]);
      let y = cx.em.call(
        `vm.op.${op}`,
        [cx.em.reg(x), axes, cx.em.ib.imm(keep ? 1 : 0)],
        x.dtype,
        shape,
      );
      if (post !== undefined) y = post(cx, y);
      return [y];
    },
  };
}

/** `ArgMax`/`ArgMin` (as the argmax of −x): `vm.op.argmax`'s int32 cast to ONNX's int64. */
function argSpec(min: boolean): OpSpec {
  return {
    attrs: ["axis", "keepdims", "select_last_index"],
    convert(cx) {
      let x = cx.input(0);
      cx.dtype(x, ["float32", "int32"]);
      if (cx.int("select_last_index", 0) !== 0) throw new Unsupported("select_last_index=1");
      const r = x.shape.length, axis = normAxis(cx.int("axis", 0), r);
      const keep = cx.int("keepdims", 1) === 1;
      if (min) x = unary(cx, "negative", x, ARITH);
      const shape = x.shape.flatMap((d, i) => i === axis ? (keep ? [1] : []) : [d]);
      const idx = cx.em.call(
        "vm.op.argmax",
        [cx.em.reg(x), cx.em.ib.imm(axis), cx.em.ib.imm(keep ? 1 : 0)],
        "int32",
        shape,
      );
      return [cx.em.call("vm.op.cast", [cx.em.reg(idx), "int64"], "int64", shape)];
    },
  };
}

const square = (cx: NodeContext, x: Value) => binary(cx, "multiply", x, x);
const negate = (cx: NodeContext, x: Value) => unary(cx, "negative", x, ARITH);

/** Matrix, normalization and reduction operators by ONNX name. */
export const NN_OPS: Record<string, OpSpec> = {
  MatMul: { attrs: [], convert: (cx) => [matmul(cx, cx.input(0), cx.input(1))] },
  Gemm: {
    attrs: ["alpha", "beta", "transA", "transB"],
    convert(cx) {
      let a = cx.input(0);
      const b = cx.input(1), c = cx.optional(2);
      const alpha = cx.float("alpha", 1), beta = cx.float("beta", 1);
      const transA = cx.int("transA", 0) === 1, transB = cx.int("transB", 0) === 1;
      if (a.shape.length !== 2 || b.shape.length !== 2) {
        throw new Unsupported("Gemm of non-matrices");
      }
      if (transA) a = swap(cx, a, 0, 1);
      cx.dtype(a, FLOAT);
      const n = transB ? b.shape[0] : b.shape[1];
      // x·Wᵀ + bias is vm.op.linear, the fast path; anything else is spelled out.
      if (
        transB && alpha === 1 &&
        (c === undefined || (beta === 1 && c.shape.length === 1 && c.shape[0] === n))
      ) {
        const args = [cx.em.reg(a), cx.em.reg(b), ...(c === undefined ? [] : [cx.em.reg(c)])];
        return [cx.em.call("vm.op.linear", args, "float32", [a.shape[0], n])];
      }
      let y = matmul(cx, a, transB ? swap(cx, b, 0, 1) : b);
      if (alpha !== 1) y = binary(cx, "multiply", y, cx.scalar(alpha));
      if (c !== undefined && beta !== 0) {
        y = binary(cx, "add", y, beta === 1 ? c : binary(cx, "multiply", c, cx.scalar(beta)));
      }
      return [y];
    },
  },
  Softmax: softmaxSpec(false),
  LogSoftmax: softmaxSpec(true),
  LayerNormalization: {
    attrs: ["axis", "epsilon", "stash_type"],
    convert(cx) {
      const x = cx.input(0), scale = cx.input(1), bias = cx.optional(2);
      cx.dtype(x, FLOAT);
      if (cx.node.outputs.slice(1).some((o) => o !== "")) {
        throw new Unsupported("the Mean and InvStdDev outputs");
      }
      const r = x.shape.length, axis = normAxis(cx.int("axis", -1), r);
      const trailing = x.shape.slice(axis);
      const same = (v: Value) =>
        v.shape.length === trailing.length && v.shape.every((d, i) => d === trailing[i]);
      if (!same(scale) || (bias !== undefined && !same(bias))) {
        throw new Unsupported("a scale or bias that is not of the normalized axes' shape");
      }
      let b = bias;
      if (b === undefined) {
        b = binary(cx, "multiply", scale, cx.scalar(0));
      }
      const eps = cx.em.ib.convert_constant(cx.float("epsilon", 1e-5));
      return [
        cx.em.call(
          "vm.op.layer_norm",
          [cx.em.reg(x), cx.em.reg(scale), cx.em.reg(b), eps],
          "float32",
          x.shape,
        ),
      ];
    },
  },
  ArgMax: argSpec(false),
  ArgMin: argSpec(true),
  ReduceMean: reduce("mean", 18, FLOAT),
  ReduceL1: reduce("sum", 18, ARITH, (cx, x) => binary(cx, "maximum", x, negate(cx, x))),
  ReduceSum: reduce("sum", 13, ARITH),
  ReduceMax: reduce("max", 18, ARITH),
  ReduceMin: reduce("max", 18, ARITH, negate, negate),
  ReduceSumSquare: reduce("sum", 18, FLOAT, square),
  ReduceL2: reduce("sum", 18, FLOAT, square, (cx, y) => unary(cx, "sqrt", y)),
  ReduceLogSum: reduce("sum", 18, FLOAT, undefined, (cx, y) => unary(cx, "log", y)),
  ReduceLogSumExp: reduce(
    "sum",
    18,
    FLOAT,
    (cx, x) => unary(cx, "exp", x),
    (cx, y) => unary(cx, "log", y),
  ),
};
