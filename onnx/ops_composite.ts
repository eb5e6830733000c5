/**
 * ONNX operators spelled out with other operators: activations with a
 * branch (`ThresholdedRelu`, `Selu`, `Celu`, `Shrink`, `PRelu`, `Sign`,
 * …, through `vm.op.where` and the comparisons), the normalizations of
 * CNNs (`BatchNormalization` for inference, `InstanceNormalization`,
 * `LpNormalization`, `MeanVarianceNormalization`), global pooling, and the
 * data movers that are a reshape and a transpose (`DepthToSpace`,
 * `SpaceToDepth`) or copies (`Tile`). Each matches ONNX's definition, not
 * an approximation of it.
 *
 * @module
 */

import {
  broadcastShapes,
  type Dim,
  normAxis,
  shapeText,
  Unsupported,
  type Value,
} from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import { ARITH, FLOAT, type OpSpec } from "./op_spec.ts";
import { binary, unary } from "./ops_elementwise.ts";
import { reshapeTo } from "./ops_shape.ts";

/** `vm.op.<op>(a, b)` → bool. */
function test(cx: NodeContext, op: string, a: Value, b: Value): Value {
  const shape = broadcastShapes(a.shape, b.shape);
  return cx.em.call(`vm.op.${op}`, [cx.em.reg(a), cx.em.reg(b)], "bool", shape);
}

/** `cond ? x : y`. */
function where(cx: NodeContext, cond: Value, x: Value, y: Value): Value {
  const shape = broadcastShapes(broadcastShapes(cond.shape, x.shape), y.shape);
  return cx.em.call("vm.op.where", [cx.em.reg(cond), cx.em.reg(x), cx.em.reg(y)], x.dtype, shape);
}

const mul = (cx: NodeContext, a: Value, b: Value) => binary(cx, "multiply", a, b, FLOAT);
const add = (cx: NodeContext, a: Value, b: Value) => binary(cx, "add", a, b, FLOAT);
const sub = (cx: NodeContext, a: Value, b: Value) => binary(cx, "subtract", a, b, FLOAT);
const div = (cx: NodeContext, a: Value, b: Value) => binary(cx, "divide", a, b, FLOAT);

/** `vm.op.<op>(x, axes, keepdims=1)`. */
function reduceKeep(cx: NodeContext, op: string, x: Value, axes: number[]): Value {
  const shape = x.shape.map((d, i) => axes.includes(i) ? 1 : d);
  return cx.em.call(`vm.op.${op}`, [cx.em.reg(x), axes, cx.em.imm(1)], x.dtype, shape);
}

/** `x` normalized over `axes`: `(x − mean) / sqrt(var + eps)`. */
function normalize(cx: NodeContext, x: Value, axes: number[], eps: number): Value {
  const d = sub(cx, x, reduceKeep(cx, "mean", x, axes));
  const variance = reduceKeep(cx, "mean", mul(cx, d, d), axes);
  return div(cx, d, unary(cx, "sqrt", add(cx, variance, cx.scalar(eps))));
}

/** A per-channel `[C]` tensor shaped `[C, 1, …]` to broadcast over `x [N, C, …]`. */
function perChannel(cx: NodeContext, v: Value, x: Value): Value {
  return reshapeTo(cx, v, [v.shape[0], ...x.shape.slice(2).map(() => 1)]);
}

function activation(convert: (cx: NodeContext, x: Value) => Value, attrs: string[] = []): OpSpec {
  return {
    attrs,
    convert(cx) {
      const x = cx.input(0);
      cx.dtype(x, FLOAT);
      return [convert(cx, x)];
    },
  };
}

/** Composite operators by ONNX name. */
export const COMPOSITE_OPS: Record<string, OpSpec> = {
  ThresholdedRelu: activation(
    (cx, x) => where(cx, test(cx, "greater", x, cx.scalar(cx.float("alpha", 1))), x, cx.scalar(0)),
    ["alpha"],
  ),
  Selu: activation((cx, x) => {
    const alpha = cx.float("alpha", 1.67326319217681884765625);
    const gamma = cx.float("gamma", 1.05070102214813232421875);
    const neg = sub(cx, mul(cx, unary(cx, "exp", x), cx.scalar(alpha)), cx.scalar(alpha));
    const y = where(cx, test(cx, "greater", x, cx.scalar(0)), x, neg);
    return mul(cx, y, cx.scalar(gamma));
  }, ["alpha", "gamma"]),
  Celu: activation((cx, x) => {
    // max(0, x) + min(0, alpha·(exp(x / alpha) − 1)).
    const alpha = cx.scalar(cx.float("alpha", 1));
    const e = sub(cx, unary(cx, "exp", div(cx, x, alpha)), cx.scalar(1));
    return add(cx, unary(cx, "relu", x), binary(cx, "minimum", mul(cx, alpha, e), cx.scalar(0)));
  }, ["alpha"]),
  Shrink: {
    attrs: ["bias", "lambd"],
    convert(cx) {
      const x = cx.input(0);
      cx.dtype(x, FLOAT);
      const bias = cx.scalar(cx.float("bias", 0)), lambd = cx.float("lambd", 0.5);
      const low = where(cx, test(cx, "less", x, cx.scalar(-lambd)), add(cx, x, bias), cx.scalar(0));
      return [where(cx, test(cx, "greater", x, cx.scalar(lambd)), sub(cx, x, bias), low)];
    },
  },
  PRelu: {
    attrs: [],
    convert(cx) {
      const x = cx.input(0), slope = cx.input(1);
      cx.dtype(x, FLOAT);
      return [where(cx, test(cx, "less", x, cx.scalar(0)), mul(cx, x, slope), x)];
    },
  },
  Sign: activation((cx, x) =>
    where(
      cx,
      test(cx, "greater", x, cx.scalar(0)),
      cx.scalar(1),
      where(cx, test(cx, "less", x, cx.scalar(0)), cx.scalar(-1), mul(cx, x, cx.scalar(0))),
    )
  ),
  Softsign: activation((cx, x) => {
    const abs = binary(cx, "maximum", x, unary(cx, "negative", x, ARITH), FLOAT);
    return div(cx, x, add(cx, abs, cx.scalar(1)));
  }),
  HardSwish: activation((cx, x) => {
    const h = add(cx, mul(cx, x, cx.scalar(1 / 6)), cx.scalar(0.5));
    const clipped = binary(
      cx,
      "maximum",
      binary(cx, "minimum", h, cx.scalar(1), FLOAT),
      cx.scalar(0),
    );
    return mul(cx, x, clipped);
  }),
  Mish: activation((cx, x) => {
    // x·tanh(log(1 + eˣ)) = x·n / (n + 2) with n = eˣ(eˣ + 2): no log of 1 + eˣ, whose rounding
    // loses eˣ's digits for negative x (past ONNX's tolerance on WebGPU). eˣ stops at e²⁰, where
    // n / (n + 2) is 1 in float32, so it never overflows.
    const e = unary(cx, "exp", binary(cx, "minimum", x, cx.scalar(20), FLOAT));
    const n = mul(cx, e, add(cx, e, cx.scalar(2)));
    return mul(cx, x, div(cx, n, add(cx, n, cx.scalar(2))));
  }),
  Swish: activation(
    (cx, x) => mul(cx, x, unary(cx, "sigmoid", mul(cx, x, cx.scalar(cx.float("alpha", 1))))),
    ["alpha"],
  ),
  IsNaN: activation((cx, x) => test(cx, "not_equal", x, x)),
  IsInf: {
    attrs: ["detect_negative", "detect_positive"],
    convert(cx) {
      const x = cx.input(0);
      cx.dtype(x, FLOAT);
      const pos = cx.int("detect_positive", 1) === 1, neg = cx.int("detect_negative", 1) === 1;
      const isPos = test(cx, "equal", x, cx.scalar(Infinity));
      const isNeg = test(cx, "equal", x, cx.scalar(-Infinity));
      if (pos && neg) {
        return [cx.em.call("vm.op.logical_or", [isPos.reg!, isNeg.reg!], "bool", x.shape)];
      }
      if (pos) return [isPos];
      if (neg) return [isNeg];
      return [test(cx, "less", x, x)]; // nothing detected: all false
    },
  },
  BatchNormalization: {
    attrs: ["epsilon", "momentum", "training_mode", "spatial"],
    convert(cx) {
      // Inference: (x − mean) / sqrt(var + eps) · scale + B, per channel (axis 1).
      if (cx.int("training_mode", 0) !== 0) throw new Unsupported("training_mode=1");
      if (cx.node.outputs.slice(1).some((o) => o !== "")) {
        throw new Unsupported("the running mean and variance outputs (training)");
      }
      const x = cx.input(0);
      cx.dtype(x, FLOAT);
      const [scale, b, mean, variance] = [1, 2, 3, 4].map((i) => perChannel(cx, cx.input(i), x));
      const inv = div(
        cx,
        scale,
        unary(cx, "sqrt", add(cx, variance, cx.scalar(cx.float("epsilon", 1e-5)))),
      );
      return [add(cx, mul(cx, sub(cx, x, mean), inv), b)];
    },
  },
  InstanceNormalization: {
    attrs: ["epsilon"],
    convert(cx) {
      const x = cx.input(0);
      cx.dtype(x, FLOAT);
      const axes = x.shape.map((_, i) => i).slice(2);
      const y = normalize(cx, x, axes, cx.float("epsilon", 1e-5));
      return [add(cx, mul(cx, y, perChannel(cx, cx.input(1), x)), perChannel(cx, cx.input(2), x))];
    },
  },
  MeanVarianceNormalization: {
    attrs: ["axes"],
    convert(cx) {
      const x = cx.input(0);
      cx.dtype(x, FLOAT);
      const axes = (cx.ints("axes") ?? [0, 2, 3]).map((a) => normAxis(a, x.shape.length));
      return [normalize(cx, x, axes, 1e-9)];
    },
  },
  LpNormalization: {
    attrs: ["axis", "p"],
    convert(cx) {
      const x = cx.input(0);
      cx.dtype(x, FLOAT);
      const axis = normAxis(cx.int("axis", -1), x.shape.length), p = cx.int("p", 2);
      if (p !== 1 && p !== 2) throw new Unsupported(`p=${p}`);
      const norm = p === 2
        ? unary(cx, "sqrt", reduceKeep(cx, "sum", mul(cx, x, x), [axis]))
        : reduceKeep(cx, "sum", binary(cx, "maximum", x, unary(cx, "negative", x, ARITH), FLOAT), [
          axis,
        ]);
      return [div(cx, x, norm)];
    },
  },
  GlobalAveragePool: {
    attrs: [],
    convert(cx) {
      const x = cx.input(0);
      cx.dtype(x, FLOAT);
      return [reduceKeep(cx, "mean", x, x.shape.map((_, i) => i).slice(2))];
    },
  },
  GlobalMaxPool: {
    attrs: [],
    convert(cx) {
      const x = cx.input(0);
      cx.dtype(x, FLOAT);
      return [reduceKeep(cx, "max", x, x.shape.map((_, i) => i).slice(2))];
    },
  },
  DepthToSpace: {
    attrs: ["blocksize", "mode"],
    convert(cx) {
      const x = cx.input(0), b = cx.int("blocksize", 0), mode = cx.string("mode", "DCR");
      const [n, c, h, w] = x.shape;
      if (x.shape.length !== 4 || typeof c !== "number") {
        throw new Unsupported(`input ${shapeText(x.shape)}`);
      }
      const dcr = mode === "DCR";
      const split = dcr ? [n, b, b, c / (b * b), h, w] : [n, c / (b * b), b, b, h, w];
      const perm = dcr ? [0, 3, 4, 1, 5, 2] : [0, 1, 4, 2, 5, 3];
      const t = transpose(cx, reshapeTo(cx, x, split), perm);
      return [reshapeTo(cx, t, [n, c / (b * b), times(h, b), times(w, b)])];
    },
  },
  SpaceToDepth: {
    attrs: ["blocksize"],
    convert(cx) {
      const x = cx.input(0), b = cx.int("blocksize", 0);
      const [n, c, h, w] = x.shape;
      if (
        x.shape.length !== 4 || typeof h !== "number" || typeof w !== "number" ||
        typeof c !== "number"
      ) {
        throw new Unsupported(`input ${shapeText(x.shape)}`);
      }
      const t = transpose(cx, reshapeTo(cx, x, [n, c, h / b, b, w / b, b]), [0, 3, 5, 1, 2, 4]);
      return [reshapeTo(cx, t, [n, c * b * b, h / b, w / b])];
    },
  },
  Tile: {
    attrs: [],
    convert(cx) {
      const x = cx.input(0), repeats = cx.knownInts(1, "repeats");
      let y = x;
      repeats.forEach((r, axis) => {
        if (r === 1) return;
        const shape = [...y.shape];
        shape[axis] = times(shape[axis], r);
        const tuple = cx.em.record("vm.builtin.make_tuple", new Array(r).fill(cx.em.reg(y)))!;
        y = cx.em.call("vm.op.concat", [tuple, cx.em.imm(axis)], y.dtype, shape);
      });
      return [y === x ? cx.em.call("vm.op.cast", [cx.em.reg(x), x.dtype], x.dtype, x.shape) : y];
    },
  },
};

function times(d: Dim, k: number): Dim {
  return typeof d === "number" ? d * k : null;
}

function transpose(cx: NodeContext, x: Value, perm: number[]): Value {
  return cx.em.call("vm.op.transpose", [cx.em.reg(x), perm], x.dtype, perm.map((p) => x.shape[p]));
}
