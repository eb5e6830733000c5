/**
 * Elementwise ONNX operators: arithmetic with NumPy broadcasting (`Add`,
 * `Sub`, `Mul`, `Div`, `Max`, `Min`, `Pow` by a known exponent), activations
 * (`Relu`, `Sigmoid`, `Tanh`, `Gelu`, `LeakyRelu`, …) and unary math, each
 * onto `vm.op.*`. Integer arithmetic on values known before run time (shape
 * sizes) is folded instead.
 *
 * @module
 */

import type { TensorDType } from "../ground/dtype.ts";
import { broadcastShapes, Unsupported, type Value } from "./graph_values.ts";
import { equalDims } from "./known_ints.ts";
import type { NodeContext } from "./node_context.ts";
import { ARITH, FLOAT, type OpSpec } from "./op_spec.ts";

/** `vm.op.<op>(a, b)` with broadcasting. */
export function binary(cx: NodeContext, op: string, a: Value, b: Value, dtypes = ARITH): Value {
  if (a.dtype !== b.dtype) throw new Unsupported(`dtypes ${a.dtype} and ${b.dtype} differ`);
  const shape = broadcastShapes(a.shape, b.shape);
  const wider = dtypes === ARITH ? WIDER[a.dtype] : undefined;
  if (wider !== undefined) {
    // 8- and 16-bit integers compute in int32, uint32 in int64, and wrap back: exact for these ops.
    const wide = cx.em.call(
      `vm.op.${op}`,
      [widen(cx, a, wider), widen(cx, b, wider)],
      wider,
      shape,
    );
    return cx.em.call("vm.op.cast", [wide.reg!, a.dtype], a.dtype, shape);
  }
  cx.dtype(a, dtypes);
  return cx.em.call(`vm.op.${op}`, [cx.em.reg(a), cx.em.reg(b)], a.dtype, shape);
}

/** Integer dtypes the operators lack, and the one each computes in exactly (`binary`). */
const WIDER: Readonly<Record<string, TensorDType>> = {
  int8: "int32",
  int16: "int32",
  uint8: "int32",
  uint16: "int32",
  uint32: "int64",
};

/** `v` cast to `dtype`, for arithmetic on narrower integers. */
function widen(cx: NodeContext, v: Value, dtype: TensorDType) {
  return cx.em.call("vm.op.cast", [cx.em.reg(v), dtype], dtype, v.shape).reg!;
}

/** `vm.op.<op>(x)`. */
export function unary(cx: NodeContext, op: string, x: Value, dtypes = FLOAT): Value {
  cx.dtype(x, dtypes);
  return cx.em.call(`vm.op.${op}`, [cx.em.reg(x)], x.dtype, x.shape);
}

/** Folds `f` over two known integer values with broadcasting (scalars and equal lengths). */
function foldInts(
  a: Value,
  b: Value,
  f: (x: number, y: number) => number,
): Value["ints"] | undefined {
  const x = a.ints, y = b.ints;
  if (x === undefined || y === undefined) return undefined;
  if (!x.every((d) => typeof d === "number") || !y.every((d) => typeof d === "number")) {
    return undefined;
  }
  const n = Math.max(x.length, y.length);
  if ((x.length !== n && x.length !== 1) || (y.length !== n && y.length !== 1)) return undefined;
  if (a.shape.length > 1 || b.shape.length > 1) return undefined;
  return Array.from(
    { length: n },
    (_, i) => f(x[x.length === 1 ? 0 : i] as number, y[y.length === 1 ? 0 : i] as number),
  );
}

function arithmetic(op: string, fold: (x: number, y: number) => number): OpSpec {
  return {
    attrs: [],
    convert(cx) {
      const a = cx.input(0), b = cx.input(1);
      const folded = foldInts(a, b, fold);
      if (folded !== undefined) {
        const rank = Math.max(a.shape.length, b.shape.length);
        return [cx.knownValue(folded, rank === 0 ? [] : [folded.length], a.dtype)];
      }
      return [binary(cx, op, a, b)];
    },
  };
}

/** `Max`/`Min`/`Sum`: variadic, folded pairwise. */
function variadic(op: string): OpSpec {
  return {
    attrs: [],
    convert(cx) {
      let acc = cx.input(0);
      for (let i = 1; i < cx.inputCount; i++) acc = binary(cx, op, acc, cx.input(i));
      if (cx.inputCount === 1) {
        acc = cx.em.call("vm.builtin.copy", [cx.em.reg(acc)], acc.dtype, acc.shape);
      }
      return [acc];
    },
  };
}

function activation(op: string, dtypes = FLOAT): OpSpec {
  return { attrs: [], convert: (cx) => [unary(cx, op, cx.input(0), dtypes)] };
}

/** The known value of a scalar (or one-element) float input, or undefined. */
function knownScalar(v: Value): number | undefined {
  if (v.tensor === undefined || v.tensor.size !== 1) return undefined;
  return Number(v.tensor.dataSync()[0]);
}

/** Dtypes the comparisons take. */
const COMPARED = [...ARITH, "bool"] as const;

/** Folds of the comparisons on known integers (shape arithmetic: attention's head counts). */
const COMPARE_FOLDS: Record<string, (x: number, y: number) => boolean> = {
  equal: (x, y) => x === y,
  less: (x, y) => x < y,
  less_equal: (x, y) => x <= y,
  greater: (x, y) => x > y,
  greater_equal: (x, y) => x >= y,
  logical_and: (x, y) => x !== 0 && y !== 0,
  logical_or: (x, y) => x !== 0 || y !== 0,
  logical_xor: (x, y) => (x !== 0) !== (y !== 0),
};

/** `vm.op.<op>(a, b)` → bool, with broadcasting. */
function comparison(op: string, dtypes: readonly string[] = COMPARED): OpSpec {
  return {
    attrs: [],
    convert(cx) {
      const a = cx.input(0), b = cx.input(1);
      const folded = foldInts(a, b, (x, y) => COMPARE_FOLDS[op](x, y) ? 1 : 0) ??
        (op === "equal" && a.ints && b.ints && a.shape.length <= 1 && b.shape.length <= 1
          ? equalDims(a.ints, b.ints) // symbols: PyTorch's expand, see equalDims
          : undefined);
      if (folded !== undefined) {
        const rank = Math.max(a.shape.length, b.shape.length);
        return [cx.knownValue(folded, rank === 0 ? [] : [folded.length], "bool")];
      }
      const wider = WIDER[a.dtype];
      if (wider !== undefined && a.dtype === b.dtype) {
        const shape = broadcastShapes(a.shape, b.shape);
        const args = [widen(cx, a, wider), widen(cx, b, wider)];
        return [cx.em.call(`vm.op.${op}`, args, "bool", shape)];
      }
      cx.dtype(a, dtypes as typeof ARITH);
      if (a.dtype !== b.dtype) throw new Unsupported(`dtypes ${a.dtype} and ${b.dtype} differ`);
      const shape = broadcastShapes(a.shape, b.shape);
      return [cx.em.call(`vm.op.${op}`, [cx.em.reg(a), cx.em.reg(b)], "bool", shape)];
    },
  };
}

/**
 * `a mod b`: with `fmod` C's remainder (the sign of `a`), else Python's (the
 * sign of `b`). Integers: `a − b·trunc(a / b)` (`vm.op.divide` truncates),
 * moved by `b` when the signs differ for Python's. Floats: `a − b·q` with
 * `q` the quotient truncated (`fmod`) or floored.
 */
function remainder(cx: NodeContext, a: Value, b: Value, fmod: boolean): Value {
  const shape = broadcastShapes(a.shape, b.shape);
  const wider = WIDER[a.dtype];
  if (wider !== undefined) {
    // Narrow integers: the whole remainder in the wider dtype, then back.
    const cast = (v: Value, dt: TensorDType) =>
      cx.em.call("vm.op.cast", [cx.em.reg(v), dt], dt, v.shape);
    return cast(remainder(cx, cast(a, wider), cast(b, wider), fmod), a.dtype);
  }
  cx.dtype(a, ARITH);
  const test = (op: string, x: Value, y: Value) =>
    cx.em.call(`vm.op.${op}`, [cx.em.reg(x), cx.em.reg(y)], "bool", shape);
  const zero = (v: Value) => v.dtype === "float32" ? cx.scalar(0) : cx.knownValue([0], [], v.dtype);
  if (a.dtype === "float32") {
    const ratio = binary(cx, "divide", a, b, FLOAT);
    const q = fmod
      ? cx.em.call(
        "vm.op.where",
        [
          cx.em.reg(test("less", ratio, zero(ratio))),
          cx.em.reg(unary(cx, "ceil", ratio)),
          cx.em.reg(unary(cx, "floor", ratio)),
        ],
        "float32",
        shape,
      )
      : unary(cx, "floor", ratio);
    return binary(cx, "subtract", a, binary(cx, "multiply", b, q, FLOAT), FLOAT);
  }
  const r = binary(cx, "subtract", a, binary(cx, "multiply", binary(cx, "divide", a, b), b));
  if (fmod) return r;
  // Python's sign: r + b where r ≠ 0 and r and b differ in sign.
  const differ = cx.em.call(
    "vm.op.logical_xor",
    [
      cx.em.reg(test("less", r, zero(r))),
      cx.em.reg(test("less", b, zero(b))),
    ],
    "bool",
    shape,
  );
  const move = cx.em.call(
    "vm.op.logical_and",
    [
      cx.em.reg(differ),
      cx.em.reg(test("not_equal", r, zero(r))),
    ],
    "bool",
    shape,
  );
  return cx.em.call(
    "vm.op.where",
    [cx.em.reg(move), cx.em.reg(binary(cx, "add", r, b)), cx.em.reg(r)],
    r.dtype,
    shape,
  );
}

/**
 * `x^y` elementwise, for exponents known only at run time (or unusual):
 * `exp(y·log|x|)`, negated for a negative `x` and an odd integer `y`, NaN
 * for a negative `x` and a fractional `y` (NumPy's), 1 for `y = 0`.
 */
function power(cx: NodeContext, x: Value, y: Value): Value {
  let e = y;
  if (e.dtype !== "float32") {
    e = cx.em.call("vm.op.cast", [cx.em.reg(e), "float32"], "float32", e.shape);
  }
  const shape = broadcastShapes(x.shape, e.shape);
  const test = (op: string, a: Value, b: Value) =>
    cx.em.call(`vm.op.${op}`, [cx.em.reg(a), cx.em.reg(b)], "bool", shape);
  const select = (c: Value, a: Value, b: Value) =>
    cx.em.call("vm.op.where", [cx.em.reg(c), cx.em.reg(a), cx.em.reg(b)], "float32", shape);
  const magnitude = unary(
    cx,
    "exp",
    binary(cx, "multiply", e, unary(cx, "log", unary(cx, "abs", x)), FLOAT),
  );
  const half = binary(cx, "multiply", e, cx.scalar(0.5), FLOAT);
  const odd = test("not_equal", unary(cx, "floor", half), half);
  const integer = test("equal", unary(cx, "floor", e), e);
  const negative = test("less", x, cx.scalar(0));
  const negated = select(odd, unary(cx, "negative", magnitude), magnitude);
  const signed = select(negative, select(integer, negated, cx.scalar(NaN)), magnitude);
  return select(test("equal", e, cx.scalar(0)), cx.scalar(1), signed);
}

/** Elementwise operators by ONNX name. */
export const ELEMENTWISE_OPS: Record<string, OpSpec> = {
  Add: arithmetic("add", (x, y) => x + y),
  Sub: arithmetic("subtract", (x, y) => x - y),
  Mul: arithmetic("multiply", (x, y) => x * y),
  Div: arithmetic("divide", (x, y) => Math.trunc(x / y)),
  Mod: {
    attrs: ["fmod"],
    convert(cx) {
      // Folded on shape arithmetic only (attention's head counts): no remainder operator yet.
      const fmod = cx.int("fmod", 0) === 1;
      const a = cx.input(0), b = cx.input(1);
      const folded = foldInts(a, b, (x, y) => fmod ? x % y : x - y * Math.floor(x / y));
      if (folded !== undefined) {
        const rank = Math.max(a.shape.length, b.shape.length);
        return [cx.knownValue(folded, rank === 0 ? [] : [folded.length], a.dtype)];
      }
      return [remainder(cx, a, b, fmod)];
    },
  },
  Max: variadic("maximum"),
  Min: variadic("minimum"),
  Sum: variadic("add"),
  Relu: activation("relu", ARITH),
  Neg: activation("negative", ARITH),
  Exp: activation("exp"),
  Log: activation("log"),
  Sqrt: activation("sqrt"),
  Tanh: activation("tanh"),
  Sigmoid: activation("sigmoid"),
  Gelu: {
    attrs: ["approximate"],
    convert(cx) {
      const x = cx.input(0), approximate = cx.string("approximate", "none");
      if (approximate === "none") return [unary(cx, "gelu", x)];
      if (approximate !== "tanh") throw new Unsupported(`approximate="${approximate}"`);
      // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
      const cube = binary(cx, "multiply", binary(cx, "multiply", x, x, FLOAT), x, FLOAT);
      const inner = binary(
        cx,
        "add",
        x,
        binary(cx, "multiply", cube, cx.scalar(0.044715), FLOAT),
        FLOAT,
      );
      const t = unary(
        cx,
        "tanh",
        binary(cx, "multiply", inner, cx.scalar(Math.sqrt(2 / Math.PI)), FLOAT),
      );
      const half = binary(cx, "multiply", x, cx.scalar(0.5), FLOAT);
      return [binary(cx, "multiply", half, binary(cx, "add", t, cx.scalar(1), FLOAT), FLOAT)];
    },
  },
  Reciprocal: {
    attrs: [],
    convert: (cx) => [binary(cx, "divide", cx.scalar(1), cx.input(0), FLOAT)],
  },
  Identity: { attrs: [], convert: (cx) => [cx.input(0)] },
  Equal: comparison("equal"),
  Less: comparison("less"),
  LessOrEqual: comparison("less_equal"),
  Greater: comparison("greater"),
  GreaterOrEqual: comparison("greater_equal"),
  And: comparison("logical_and", ["bool"]),
  Or: comparison("logical_or", ["bool"]),
  Xor: comparison("logical_xor", ["bool"]),
  Not: {
    attrs: [],
    convert(cx) {
      const x = cx.input(0);
      cx.dtype(x, ["bool"]);
      if (x.ints !== undefined && x.ints.every((d) => typeof d === "number")) {
        return [cx.knownValue(x.ints.map((d) => d === 0 ? 1 : 0), x.shape as number[], "bool")];
      }
      return [cx.em.call("vm.op.logical_not", [cx.em.reg(x)], "bool", x.shape)];
    },
  },
  Where: {
    attrs: [],
    convert(cx) {
      const c = cx.input(0), x = cx.input(1), y = cx.input(2);
      cx.dtype(c, ["bool"], "condition");
      cx.dtype(x, COMPARED as unknown as typeof ARITH);
      if (x.dtype !== y.dtype) throw new Unsupported(`dtypes ${x.dtype} and ${y.dtype} differ`);
      const shape = broadcastShapes(broadcastShapes(c.shape, x.shape), y.shape);
      // Known condition and branches (shape arithmetic): folded, element by element.
      const n = shape.length === 0 ? 1 : shape.length === 1 ? shape[0] : null;
      const known = [c, x, y].every((v) => v.ints !== undefined && v.shape.length <= 1);
      if (known && typeof n === "number") {
        const at = (v: Value, i: number) => v.ints![v.ints!.length === 1 ? 0 : i];
        const picked = Array.from({ length: n }, (_, i) => at(c, i) !== 0 ? at(x, i) : at(y, i));
        return [cx.knownValue(picked, shape as number[], x.dtype)];
      }
      return [
        cx.em.call("vm.op.where", [cx.em.reg(c), cx.em.reg(x), cx.em.reg(y)], x.dtype, shape),
      ];
    },
  },
  Abs: {
    attrs: [],
    convert(cx) {
      const x = cx.input(0);
      if (ARITH.includes(x.dtype)) return [unary(cx, "abs", x, ARITH)];
      // 8- and 16-bit integers: max(x, 0 − x), computed in int32 by `binary`.
      const zero = cx.knownValue([0], [], x.dtype);
      return [binary(cx, "maximum", x, binary(cx, "subtract", zero, x))];
    },
  },
  Sin: activation("sin"),
  Cos: activation("cos"),
  Tan: activation("tan"),
  Asin: activation("asin"),
  Acos: activation("acos"),
  Atan: activation("atan"),
  Sinh: activation("sinh"),
  Cosh: activation("cosh"),
  Asinh: activation("asinh"),
  Acosh: activation("acosh"),
  Atanh: activation("atanh"),
  Floor: activation("floor"),
  Ceil: activation("ceil"),
  Round: activation("round"),
  Erf: activation("erf"),
  Clip: {
    attrs: ["min", "max"],
    convert(cx) {
      // Opsets 1–10: min and max are attributes; from 11 they are optional inputs.
      let y = cx.input(0);
      if (WIDER[y.dtype] === undefined) cx.dtype(y, ARITH);
      const bound = (i: number, attr: string) => {
        if (cx.opset < 11) {
          return cx.has(attr) ? cx.scalar(cx.float(attr, 0), y.dtype) : undefined;
        }
        return cx.optional(i);
      };
      const lo = bound(1, "min"), hi = bound(2, "max");
      if (lo !== undefined) y = binary(cx, "maximum", y, lo);
      if (hi !== undefined) y = binary(cx, "minimum", y, hi);
      if (lo === undefined && hi === undefined) {
        y = cx.em.call("vm.op.cast", [cx.em.reg(y), y.dtype], y.dtype, y.shape);
      }
      return [y];
    },
  },
  Mean: {
    attrs: [],
    convert(cx) {
      let acc = cx.input(0);
      cx.dtype(acc, FLOAT);
      for (let i = 1; i < cx.inputCount; i++) acc = binary(cx, "add", acc, cx.input(i), FLOAT);
      return [binary(cx, "divide", acc, cx.scalar(cx.inputCount), FLOAT)];
    },
  },
  Pow: {
    attrs: [],
    convert(cx) {
      const x = cx.input(0), e = knownScalar(cx.input(1));
      cx.dtype(x, FLOAT);
      if (e === 0.5) return [unary(cx, "sqrt", x)];
      if (e === -1) return [binary(cx, "divide", cx.scalar(1), x)];
      if (e !== undefined && Number.isInteger(e) && e >= 1 && e <= 4) {
        let y = x;
        for (let i = 1; i < e; i++) y = binary(cx, "multiply", y, x);
        return [
          e === 1 ? cx.em.call("vm.op.cast", [cx.em.reg(x), "float32"], "float32", x.shape) : y,
        ];
      }
      return [power(cx, x, cx.input(1))];
    },
  },
  LeakyRelu: {
    attrs: ["alpha"],
    convert(cx) {
      // max(x, alpha·x) for 0 ≤ alpha ≤ 1.
      const x = cx.input(0), alpha = cx.float("alpha", 0.01);
      if (alpha < 0 || alpha > 1) throw new Unsupported(`alpha ${alpha}`);
      return [binary(cx, "maximum", x, binary(cx, "multiply", x, cx.scalar(alpha), FLOAT), FLOAT)];
    },
  },
  HardSigmoid: {
    attrs: ["alpha", "beta"],
    convert(cx) {
      // max(0, min(1, alpha·x + beta)).
      const x = cx.input(0);
      const lin = binary(
        cx,
        "add",
        binary(cx, "multiply", x, cx.scalar(cx.float("alpha", 0.2)), FLOAT),
        cx.scalar(cx.float("beta", 0.5)),
        FLOAT,
      );
      return [binary(cx, "maximum", binary(cx, "minimum", lin, cx.scalar(1), FLOAT), cx.scalar(0))];
    },
  },
  Softplus: {
    attrs: [],
    convert(cx) {
      // log(exp(x) + 1) = max(x, 0) + log1p(u), u = exp(−|x|) in (0, 1]: no overflow, and log1p
      // of a small u by its series, since log(1 + u) keeps only log's absolute error there
      // (past ONNX's tolerance on WebGPU for u near 1e-3; the series' error is below u⁵/5).
      const x = cx.input(0);
      cx.dtype(x, FLOAT);
      const op = (name: string, a: Value, b: Value) => binary(cx, name, a, b, FLOAT);
      const u = unary(cx, "exp", unary(cx, "negative", unary(cx, "abs", x)));
      let series = op("subtract", cx.scalar(1 / 3), op("multiply", u, cx.scalar(0.25)));
      series = op("subtract", cx.scalar(0.5), op("multiply", u, series));
      series = op("multiply", u, op("subtract", cx.scalar(1), op("multiply", u, series)));
      const logged = unary(cx, "log", op("add", u, cx.scalar(1)));
      const small = cx.em.call(
        "vm.op.less",
        [cx.em.reg(u), cx.em.reg(cx.scalar(0.01))],
        "bool",
        x.shape,
      );
      const log1p = cx.em.call(
        "vm.op.where",
        [cx.em.reg(small), cx.em.reg(series), cx.em.reg(logged)],
        "float32",
        x.shape,
      );
      return [op("add", op("maximum", x, cx.scalar(0)), log1p)];
    },
  },
  Elu: {
    attrs: ["alpha"],
    convert(cx) {
      // relu(x) + alpha·(exp(min(x, 0)) − 1).
      const x = cx.input(0);
      const neg = binary(
        cx,
        "subtract",
        unary(cx, "exp", binary(cx, "minimum", x, cx.scalar(0), FLOAT)),
        cx.scalar(1),
        FLOAT,
      );
      return [
        binary(
          cx,
          "add",
          unary(cx, "relu", x),
          binary(cx, "multiply", neg, cx.scalar(cx.float("alpha", 1)), FLOAT),
          FLOAT,
        ),
      ];
    },
  },
};
