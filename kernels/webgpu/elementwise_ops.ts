/**
 * Per-op WGSL for the elementwise template: function bodies of
 * `fn op(x0: T0[, x1: T1]) -> TO`, written so they compile for scalars and
 * for `vec4`s alike (`TO(0.0)` rather than `0.0`; `|` on booleans, which
 * WGSL defines componentwise for vectors, rather than `||`).
 *
 * Each formula follows the CPU reference kernel (kernels/cpu/elementwise.ts)
 * so the two agree beyond rounding:
 *
 * - NaN propagates through `maximum`, `minimum` and `relu` as it does through
 *   `Math.max`/`Math.min`; WGSL's `max`/`min` may drop it, hence the selects
 *   on `is_nan`, a test of the bits that compilers cannot fold away as they
 *   fold `x != x` (see workgroup_reduce.ts).
 * - `tanh` is evaluated as `(1 - e) / (1 + e)` with `e = exp(-2|x|)`: the
 *   textbook `(exp(2x) - 1) / (exp(2x) + 1)` turns into inf/inf = NaN for
 *   |x| above about 44, and implementations of the builtin differ on it.
 * - `gelu` is the erf form with erf from Abramowitz & Stegun 7.1.26, the
 *   same constants as the CPU kernel.
 * - A NaN operand is the result of every float unary op, and `log` and
 *   `sqrt` of a negative number are NaN, as with `Math.*`: WGSL leaves
 *   both indeterminate, and SwiftShader (Chromium's software adapter)
 *   returns `exp(NaN) = inf`, `sigmoid(NaN) = 0` and `log(x) = log(|x|)`.
 * - int32 `divide` follows WGSL's rule: truncating, and a zero divisor yields
 *   the dividend (so does `-2^31 / -1`); the CPU kernel implements the same.
 *
 * @module
 */

import type { BinaryOp, CompareOp, UnaryOp } from "../kernel_backend.ts";
import type { ElementwiseFn, ScalarType } from "./elementwise_program.ts";
import { NAN_F32 } from "./workgroup_reduce.ts";

// asin and acos through atan2: Mesa llvmpipe's own are off by 3e-4.
const FLOAT_UNARY: Record<UnaryOp, string> = {
  negative: "return -x0;",
  exp: "return select(exp(x0), x0, is_nan(x0));",
  log: `return select(select(log(x0), TO(${NAN_F32}), x0 < TO(0.0)), x0, is_nan(x0));`,
  sqrt: `return select(select(sqrt(x0), TO(${NAN_F32}), x0 < TO(0.0)), x0, is_nan(x0));`,
  tanh: `let e = exp(-2.0 * abs(x0));
  let t = (TO(1.0) - e) / (TO(1.0) + e);
  return select(select(t, -t, x0 < TO(0.0)), x0, is_nan(x0));`,
  sigmoid: "return select(TO(1.0) / (TO(1.0) + exp(-x0)), x0, is_nan(x0));",
  relu: "return select(TO(0.0), x0, (x0 > TO(0.0)) | is_nan(x0));",
  gelu: `let z = x0 * 0.7071067811865476;
  let t = TO(1.0) / (TO(1.0) + 0.3275911 * abs(z));
  let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  let y = TO(1.0) - poly * exp(-z * z);
  return select(0.5 * x0 * (TO(1.0) + select(y, -y, z < TO(0.0))), x0, is_nan(x0));`,
  abs: `return abs(x0);`,
  sin: `return select(sin(x0), x0, is_nan(x0));`,
  cos: `return select(cos(x0), x0, is_nan(x0));`,
  tan: `return select(tan(x0), x0, is_nan(x0));`,
  asin:
    `return select(select(atan2(x0, sqrt((TO(1.0) - x0) * (TO(1.0) + x0))), TO(${NAN_F32}), abs(x0) > TO(1.0)), x0, is_nan(x0));`,
  acos:
    `return select(select(atan2(sqrt((TO(1.0) - x0) * (TO(1.0) + x0)), x0), TO(${NAN_F32}), abs(x0) > TO(1.0)), x0, is_nan(x0));`,
  atan: `return select(atan(x0), x0, is_nan(x0));`,
  sinh: `return select(sinh(x0), x0, is_nan(x0));`,
  cosh: `return select(cosh(x0), x0, is_nan(x0));`,
  asinh: `return select(asinh(x0), x0, is_nan(x0));`,
  acosh: `return select(select(acosh(x0), TO(${NAN_F32}), x0 < TO(1.0)), x0, is_nan(x0));`,
  atanh: `return select(select(atanh(x0), TO(${NAN_F32}), abs(x0) > TO(1.0)), x0, is_nan(x0));`,
  floor: `return floor(x0);`,
  ceil: `return ceil(x0);`,
  round: `return round(x0);`,
  erf: `let t = TO(1.0) / (TO(1.0) + 0.3275911 * abs(x0));
  let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  let y = TO(1.0) - poly * exp(-x0 * x0);
  return select(select(y, -y, x0 < TO(0.0)), x0, is_nan(x0));`,
};

/** Integer unary ops; the float-only ones (exp, log, …) are absent. */
const INT_UNARY: Partial<Record<UnaryOp, string>> = {
  negative: "return -x0;",
  abs: "return abs(x0);",
  relu: "return max(x0, TO(0));",
};

const FLOAT_BINARY: Record<BinaryOp, string> = {
  add: "return x0 + x1;",
  subtract: "return x0 - x1;",
  multiply: "return x0 * x1;",
  divide: "return x0 / x1;",
  maximum: "return select(select(max(x0, x1), x1, is_nan(x1)), x0, is_nan(x0));",
  minimum: "return select(select(min(x0, x1), x1, is_nan(x1)), x0, is_nan(x0));",
};

/**
 * `divide` for hardware adapters, correctly rounded. WGSL allows `/` 2.5 ULP,
 * and hardware drivers use the room: on an H200 (NVIDIA's Vulkan driver) one
 * quotient in six was a ULP off, and DynamicQuantizeLinear rounded 25.5 the
 * wrong way. Corrections in float arithmetic (a step on the residual
 * `fma(-q, x1, x0)`) did not survive that driver's compiler, so the
 * significands are divided as integers, 25 quotient bits and a sticky bit,
 * rounded to nearest even. Zeros, subnormals, infinities and NaN, and
 * quotients that would be subnormal or overflow, keep plain `/`. Software
 * adapters keep plain `/` throughout: they divide exactly.
 */
const DIVIDE_RN = `fn divide_rn(a: f32, b: f32) -> f32 {
  let ua = bitcast<u32>(a);
  let ub = bitcast<u32>(b);
  let ea = i32((ua >> 23u) & 0xffu);
  let eb = i32((ub >> 23u) & 0xffu);
  if (ea == 0 || eb == 0 || ea == 255 || eb == 255) { return a / b; }
  var r = (ua & 0x7fffffu) | 0x800000u;
  let m = (ub & 0x7fffffu) | 0x800000u;
  var e = ea - eb + 127;
  if (r < m) { r = r << 1u; e = e - 1; }
  var q = 0u;
  for (var i = 0; i < 25; i++) {
    q = q << 1u;
    if (r >= m) { r = r - m; q = q | 1u; }
    r = r << 1u;
  }
  let half = q & 1u;
  q = q >> 1u;
  if (half == 1u && (r != 0u || (q & 1u) == 1u)) { q = q + 1u; }
  if (q == 0x1000000u) { q = q >> 1u; e = e + 1; }
  if (e <= 0 || e >= 255) { return a / b; }
  return bitcast<f32>(((ua ^ ub) & 0x80000000u) | (u32(e) << 23u) | (q & 0x7fffffu));
}
`;

const EXACT_DIVIDE: ElementwiseFn = {
  name: "divide_rn",
  helpers: DIVIDE_RN,
  body: "return divide_rn(x0, x1);",
  vectorBody: "return TO(divide_rn(x0.x, x1.x), divide_rn(x0.y, x1.y), " +
    "divide_rn(x0.z, x1.z), divide_rn(x0.w, x1.w));",
};

const INT_BINARY: Record<BinaryOp, string> = {
  add: "return x0 + x1;",
  subtract: "return x0 - x1;",
  multiply: "return x0 * x1;",
  // WGSL defines x / 0 and -2^31 / -1 as x, but implementations disagree (llvmpipe
  // through naga returns 0 for x / 0), so the rule is spelled out.
  divide: `let bad = (x1 == TO(0)) | ((x0 == TO(-2147483647 - 1)) & (x1 == TO(-1)));
  return select(x0 / select(x1, TO(1), bad), x0, bad);`,
  maximum: "return max(x0, x1);",
  minimum: "return min(x0, x1);",
};

/** The elementwise function of unary `op` on elements of `type`. */
export function unaryFn(op: UnaryOp, type: ScalarType): ElementwiseFn {
  const body = type === "f32" ? FLOAT_UNARY[op] : type === "i32" ? INT_UNARY[op] : undefined;
  if (body === undefined) {
    throw new TypeError(
      `WebGPU ${op} does not support ${type === "i32" ? "int32" : "uint32"} input`,
    );
  }
  return { name: op, body };
}

/**
 * The elementwise function of binary `op` on elements of `type`; `hardware`:
 * the adapter is not a software one (see `DIVIDE_RN`).
 */
export function binaryFn(op: BinaryOp, type: ScalarType, hardware = false): ElementwiseFn {
  if (type === "u32") throw new TypeError(`WebGPU ${op} does not support uint32 operands`);
  if (type === "f32" && op === "divide" && hardware) {
    return EXACT_DIVIDE;
  }
  return { name: op, body: type === "f32" ? FLOAT_BINARY[op] : INT_BINARY[op] };
}

/** WGSL tests of the comparisons and logical ops (on i32 words for bools), true as 1. */
const COMPARE_TESTS: Readonly<Record<CompareOp, string>> = {
  equal: "x0 == x1",
  not_equal: "x0 != x1",
  less: "x0 < x1",
  less_equal: "x0 <= x1",
  greater: "x0 > x1",
  greater_equal: "x0 >= x1",
  logical_and: "(x0 != T0(0)) & (x1 != T1(0))",
  logical_or: "(x0 != T0(0)) | (x1 != T1(0))",
  logical_xor: "(x0 != T0(0)) != (x1 != T1(0))",
  logical_not: "x0 == T0(0)",
};

/**
 * The elementwise function of comparison `op` on elements of `type`, an i32
 * 1 or 0. On floats NaN is spelled out (unequal to everything), since
 * shader compilers may assume there is none.
 */
export function compareFn(op: CompareOp, type: ScalarType): ElementwiseFn {
  if (type === "u32") throw new TypeError(`WebGPU ${op} does not support uint32 operands`);
  const test = COMPARE_TESTS[op];
  const nan = type === "f32" && !op.startsWith("logical_");
  const cond = !nan
    ? test
    : op === "not_equal"
    ? `(${test}) | is_nan(x0) | is_nan(x1)`
    : `(${test}) & !is_nan(x0) & !is_nan(x1)`;
  return { name: `compare_${op}_${type}`, body: `return select(TO(0), TO(1), ${cond});` };
}

/** `where`: `x0` the condition (i32 words), `x1` where it holds, `x2` where not. */
export const WHERE_FN: ElementwiseFn = {
  name: "where",
  body: "return select(x2, x1, x0 != T0(0));",
};

/** Converts between element types (WGSL's conversions: float → int truncates toward zero). */
export const CAST_FN: ElementwiseFn = { name: "cast", body: "return TO(x0);" };

/** Returns its input: with permuted strides, a transpose. */
export const IDENTITY_FN: ElementwiseFn = { name: "copy", body: "return x0;" };
