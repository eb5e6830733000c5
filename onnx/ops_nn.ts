/**
 * ONNX's matrix, normalization and reduction operators: `MatMul`, `Gemm`
 * (`vm.op.linear` when it is one, else matmul, scaling and a bias),
 * `Softmax`/`LogSoftmax` (over any axis: the axis is moved last, or, before
 * opset 13, the input flattened to 2-D as those opsets define it),
 * `LayerNormalization` and the `Reduce*` family.
 *
 * @module
 */

import type { CallArg } from "../builder/builder_options.ts";
import { broadcastShapes, type Dim, normAxis, Unsupported, type Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import { ARITH, FLOAT, type OpSpec } from "./op_spec.ts";
import { binary, unary } from "./ops_elementwise.ts";
import { flatten2d, reshapeTo } from "./ops_shape.ts";
import { tensor } from "../devices/tensor.ts";

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
export function softmaxOver(cx: NodeContext, x: Value, axis: number, log: boolean): Value {
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

/**
 * Reduction axes: the `axes` attribute before `inputFrom`, input 1 from it
 * on; `"runtime"` when that input is known only at run time.
 */
function reduceAxes(cx: NodeContext, inputFrom: number): number[] | undefined | "runtime" {
  if (cx.opset < inputFrom) return cx.ints("axes");
  const axes = cx.optional(1);
  if (axes === undefined) return undefined;
  // A tensor of no elements is known to be empty, whatever its values.
  if (axes.shape.length === 1 && axes.shape[0] === 0) return [];
  if (axes.ints === undefined) return "runtime";
  return cx.knownInts(1, "axes");
}

/**
 * The axes tensor of a reduction, known only at run time, as a ShapeTuple
 * of axes in `[0, rank)`: `a' = (a + r) − r·⌊(a + r) / r⌋` in int32, then
 * `vm.builtin.tensor_to_shape` (which takes no negative value).
 */
function runtimeAxes(cx: NodeContext, rank: number): { reg: CallArg; count: number } {
  const axes = cx.input(1);
  cx.dtype(axes, ["int64"], "axes");
  const count = axes.shape[0];
  if (axes.shape.length !== 1 || typeof count !== "number") {
    throw new Unsupported("axes of a shape not known before run time");
  }
  // In int32, which WebGPU computes too (the input is moved there on a GPU VM).
  const small = cx.em.call("vm.op.cast", [cx.em.reg(axes), "int32"], "int32", axes.shape);
  const r = cx.scalar(rank, "int32");
  const shifted = binary(cx, "add", small, r);
  const wrapped = binary(cx, "multiply", binary(cx, "divide", shifted, r), r);
  const normalized = binary(cx, "subtract", shifted, wrapped);
  return { reg: cx.em.record("vm.builtin.tensor_to_shape", [cx.em.reg(normalized)])!, count };
}

/** A `Reduce*` operator as `post(vm.op.<op>(pre(x), axes, keepdims))`. */
function reduce(
  op: string,
  inputFrom: number,
  dtypes: readonly string[],
  pre?: (cx: NodeContext, x: Value) => Value,
  post?: (cx: NodeContext, y: Value) => Value,
  combine?: (cx: NodeContext, x: Value, apply: (op: string, v: Value) => Value) => Value,
): OpSpec {
  return {
    attrs: ["axes", "keepdims", "noop_with_empty_axes"],
    convert(cx) {
      let x = cx.input(0);
      cx.dtype(x, dtypes as typeof ARITH);
      const r = x.shape.length;
      const given = reduceAxes(cx, inputFrom);
      const keep = cx.int("keepdims", 1) === 1;
      let axesArg: CallArg, shape: Dim[];
      if (given === "runtime") {
        const { reg, count } = runtimeAxes(cx, r);
        axesArg = reg;
        shape = new Array<Dim>(keep ? r : r - count).fill(null);
      } else {
        if (
          (given === undefined || given.length === 0) && cx.int("noop_with_empty_axes", 0) === 1
        ) {
          return [pre === undefined ? x : pre(cx, x)];
        }
        const axes = given === undefined || given.length === 0
          ? x.shape.map((_, i) => i)
          : [...new Set(given.map((a) => normAxis(a, r)))].sort((a, b) => a - b);
        axesArg = axes;
        shape = x.shape.flatMap((d, i) => axes.includes(i) ? (keep ? [1] : []) : [d]);
      }
      const apply = (name: string, v: Value) =>
        cx.em.call(
          `vm.op.${name}`,
          [cx.em.reg(v), axesArg, cx.em.imm(keep ? 1 : 0)],
          v.dtype,
          shape,
        );
      if (combine !== undefined) return [combine(cx, x, apply)];
      if (pre !== undefined) x = pre(cx, x);
      let y = apply(op, x);
      if (post !== undefined) y = post(cx, y);
      return [y];
    },
  };
}

/**
 * The product over the axes from three reductions: `exp(Σ log|x|)`, its sign
 * from the parity of the negative count, and 0 where any element is 0 (the
 * product of nothing is 1).
 */
function product(cx: NodeContext, x: Value, apply: (op: string, v: Value) => Value): Value {
  const f = (v: Value) => cx.em.call("vm.op.cast", [cx.em.reg(v), "float32"], "float32", v.shape);
  const test = (op: string, v: Value) =>
    f(cx.em.call(`vm.op.${op}`, [cx.em.reg(v), cx.em.reg(cx.scalar(0))], "bool", v.shape));
  const magnitude = unary(cx, "exp", apply("sum", unary(cx, "log", unary(cx, "abs", x))));
  const negatives = apply("sum", test("less", x));
  const parity = binary(
    cx,
    "subtract",
    negatives,
    binary(
      cx,
      "multiply",
      unary(cx, "floor", binary(cx, "multiply", negatives, cx.scalar(0.5), FLOAT)),
      cx.scalar(2),
      FLOAT,
    ),
    FLOAT,
  );
  const sign = binary(
    cx,
    "subtract",
    cx.scalar(1),
    binary(cx, "multiply", parity, cx.scalar(2), FLOAT),
    FLOAT,
  );
  // A sum, not a max, of the zeros: over an empty set the product is 1.
  const nonzero = test("equal", apply("sum", test("equal", x)));
  return binary(cx, "multiply", binary(cx, "multiply", magnitude, sign, FLOAT), nonzero, FLOAT);
}

/** `ArgMax`/`ArgMin` (as the argmax of −x): `vm.op.argmax`'s int32 cast to ONNX's int64. */
function argSpec(min: boolean): OpSpec {
  return {
    attrs: ["axis", "keepdims", "select_last_index"],
    convert(cx) {
      let x = cx.input(0);
      cx.dtype(x, ["float32", "int32"]);
      const r = x.shape.length, axis = normAxis(cx.int("axis", 0), r);
      const keep = cx.int("keepdims", 1) === 1;
      const last = cx.int("select_last_index", 0) === 1;
      const n = x.shape[axis];
      if (min) x = unary(cx, "negative", x, ARITH);
      if (last) {
        // The first maximum of x reversed along the axis is the last one of x, at n − 1 − i.
        if (typeof n !== "number") throw new Unsupported("select_last_index over a symbolic axis");
        x = cx.em.call(
          "vm.op.strided_slice",
          [cx.em.reg(x), [axis], [-1], [-(2 ** 40)], [-1]],
          x.dtype,
          x.shape,
        );
      }
      const shape = x.shape.flatMap((d, i) => i === axis ? (keep ? [1] : []) : [d]);
      let idx = cx.em.call(
        "vm.op.argmax",
        [cx.em.reg(x), cx.em.imm(axis), cx.em.imm(keep ? 1 : 0)],
        "int32",
        shape,
      );
      if (last) idx = binary(cx, "subtract", cx.scalar(n as number - 1, "int32"), idx);
      return [cx.em.call("vm.op.cast", [cx.em.reg(idx), "int64"], "int64", shape)];
    },
  };
}

/** `vm.op.<op>(x, axes, keepdims=1)` over known axes. */
function reduceOver(cx: NodeContext, op: string, x: Value, axes: number[]): Value {
  const shape = x.shape.map((d, i) => axes.includes(i) ? 1 : d);
  return cx.em.call(`vm.op.${op}`, [cx.em.reg(x), axes, cx.em.imm(1)], x.dtype, shape);
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
      const r = x.shape.length, axis = normAxis(cx.int("axis", -1), r);
      if (cx.node.outputs.slice(1).some((o) => o !== "")) {
        // Mean and InvStdDev wanted too: spelled out with reductions.
        const axes = x.shape.map((_, i) => i).slice(axis);
        const mean = reduceOver(cx, "mean", x, axes);
        const d = binary(cx, "subtract", x, mean, FLOAT);
        const variance = reduceOver(cx, "mean", binary(cx, "multiply", d, d, FLOAT), axes);
        const eps = cx.scalar(cx.float("epsilon", 1e-5));
        const inv = binary(
          cx,
          "divide",
          cx.scalar(1),
          unary(cx, "sqrt", binary(cx, "add", variance, eps, FLOAT)),
          FLOAT,
        );
        let y = binary(cx, "multiply", binary(cx, "multiply", d, inv, FLOAT), scale, FLOAT);
        if (bias !== undefined) y = binary(cx, "add", y, bias, FLOAT);
        return [y, mean, inv];
      }
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
  RMSNormalization: {
    attrs: ["axis", "epsilon", "stash_type"],
    convert(cx) {
      // x / sqrt(mean(x², axes[axis:]) + eps) · scale.
      const x = cx.input(0), scale = cx.input(1);
      cx.dtype(x, FLOAT);
      const r = x.shape.length, axis = normAxis(cx.int("axis", -1), r);
      const axes = x.shape.map((_, i) => i).slice(axis);
      const ms = reduceOver(cx, "mean", binary(cx, "multiply", x, x, FLOAT), axes);
      const rms = unary(
        cx,
        "sqrt",
        binary(cx, "add", ms, cx.scalar(cx.float("epsilon", 1e-5)), FLOAT),
      );
      return [binary(cx, "multiply", binary(cx, "divide", x, rms, FLOAT), scale, FLOAT)];
    },
  },
  Trilu: {
    attrs: ["upper"],
    convert(cx) {
      // x times a 0/1 mask of the kept triangle (a constant: the last two dims must be known).
      const x = cx.input(0), r = x.shape.length;
      cx.dtype(x, ARITH);
      const kv = cx.optional(1);
      const [n, m] = [x.shape[r - 2], x.shape[r - 1]];
      if (typeof n !== "number" || typeof m !== "number") {
        throw new Unsupported("Trilu of matrices whose size is not known before run time");
      }
      const upper = cx.int("upper", 1) === 1;
      if (kv !== undefined && kv.ints === undefined) {
        // k known only at run time: compare each element's diagonal (column − row) with it.
        const diag = tensor(
          Int32Array.from({ length: n * m }, (_, i) => (i % m) - Math.floor(i / m)),
          {
            shape: [n, m],
          },
        );
        cx.made.push(diag);
        const k32 = cx.em.call("vm.op.cast", [cx.em.reg(kv), "int32"], "int32", kv.shape);
        const keep = cx.em.call(
          `vm.op.${upper ? "greater_equal" : "less_equal"}`,
          [cx.em.reg(cx.fromTensor(diag)), cx.em.reg(k32)],
          "bool",
          [n, m],
        );
        const zero = x.dtype === "float32" ? cx.scalar(0) : cx.knownValue([0], [], x.dtype);
        return [
          cx.em.call(
            "vm.op.where",
            [cx.em.reg(keep), cx.em.reg(x), cx.em.reg(zero)],
            x.dtype,
            x.shape,
          ),
        ];
      }
      const k = kv === undefined ? 0 : cx.knownInts(1, "k")[0];
      const mask = Array.from({ length: n * m }, (_, i) => {
        const d = (i % m) - Math.floor(i / m);
        return (upper ? d >= k : d <= k) ? 1 : 0;
      });
      const t = x.dtype === "int64"
        ? tensor(new BigInt64Array(mask.map(BigInt)), { shape: [n, m] })
        : tensor(mask, { dtype: x.dtype, shape: [n, m] });
      cx.made.push(t);
      return [binary(cx, "multiply", x, cx.fromTensor(t))];
    },
  },
  Hardmax: {
    attrs: ["axis"],
    convert(cx) {
      // 1 at the first maximum along the axis, 0 elsewhere: argmax compared with the positions.
      const x = cx.input(0), r = x.shape.length;
      cx.dtype(x, FLOAT);
      const axis = normAxis(cx.int("axis", cx.opset < 13 ? 1 : -1), r);
      if (cx.opset < 13 && axis !== r - 1) {
        throw new Unsupported("the 2-D Hardmax of opsets before 13");
      }
      const n = x.shape[axis];
      if (typeof n !== "number") throw new Unsupported("Hardmax over a symbolic axis");
      const keep = x.shape.map((d, i) => i === axis ? 1 : d);
      const idx = cx.em.call(
        "vm.op.argmax",
        [cx.em.reg(x), cx.em.imm(axis), cx.em.imm(1)],
        "int32",
        keep,
      );
      const positions = tensor(Int32Array.from({ length: n }, (_, i) => i), {
        shape: x.shape.map((_, i) => i === axis ? n : 1),
      });
      cx.made.push(positions);
      const hit = cx.em.call(
        "vm.op.equal",
        [cx.em.reg(idx), cx.em.reg(cx.fromTensor(positions))],
        "bool",
        x.shape,
      );
      return [cx.em.call("vm.op.cast", [cx.em.reg(hit), "float32"], "float32", x.shape)];
    },
  },
  ReduceProd: reduce("sum", 18, FLOAT, undefined, undefined, product),
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
