/**
 * Arithmetic no device kernel has, computed on the host (host_tensors.ts):
 * `power` on integer bases (ONNX's `Pow` for int32 and int64), `det`
 * (ONNX's `Det`, by LU decomposition with partial pivoting) and
 * `matmul_integer` (ONNX's `MatMulInteger`: 8-bit operands less their zero
 * points, multiplied and summed in int32).
 *
 * @example Integer powers and a determinant
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const power = getGlobalFunc("vm.op.power")!;
 * const det = getGlobalFunc("vm.op.det")!;
 * using x = tensor([2, 3, -2], { dtype: "int32" });
 * using e = tensor([3], { dtype: "int32" });
 * using p = power(x, e) as NDArray;
 * assertEquals([...p.dataSync()], [8, 27, -8]);
 * using m = tensor([[1, 2], [3, 4]]);
 * using d = det(m) as NDArray;
 * assertEquals([...d.dataSync()], [-2]);
 * ```
 *
 * @module
 */

import { broadcastShapes, formatShape } from "../../kernels/broadcast.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { tensorArg } from "../validate.ts";
import {
  broadcastIndex,
  choiceArg,
  numbersOf,
  onHost,
  optionalTensor,
  put,
  rint,
  sizeOf,
  stridesOf,
} from "./host_tensors.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const hostMathBuiltins = new BuiltinTable("Host arithmetic operators", import.meta.url);

hostMathBuiltins.add("vm.op.power", (x: unknown, e: unknown) => {
  const who = "power";
  const t = tensorArg(x, "x", who), et = tensorArg(e, "exponent", who);
  choiceArg(who, t.dtype, "x's dtype", ["int32", "int64"]);
  const shape = broadcastShapes(t.shape, et.shape, who);
  return onHost(who, [t, et], ([xv, ev]) => {
    const xs = numbersOf(xv!), es = numbersOf(ev!);
    const xi = broadcastIndex(t.shape, shape), ei = broadcastIndex(et.shape, shape);
    return {
      shape,
      dtype: t.dtype,
      fill(out) {
        for (let i = 0; i < sizeOf(shape); i++) put(out, i, Math.trunc(xs[xi(i)] ** es[ei(i)]));
      },
    };
  });
}, {
  signature: "(x, exponent) → tensor",
  summary:
    "`x` to the power `exponent`, elementwise with NumPy broadcasting, for an int32 or int64 `x` (the exponent any number dtype): computed in float64 and truncated to `x`'s dtype, as ONNX's `Pow` casts NumPy's result. Computed on the host.",
  dtypes: ["int32", "int64"],
  devices: ["cpu", "webgpu"],
  errors:
    "`TypeError` (not tensors, `x` not int32 or int64), `RangeError` (shapes that do not broadcast).",
  tvm: "relax.op.power, for floats",
});

hostMathBuiltins.add("vm.op.det", (x: unknown) => {
  const who = "det";
  const t = tensorArg(x, "x", who, "float32");
  const r = t.shape.length, n = t.shape[r - 1];
  if (r < 2 || t.shape[r - 2] !== n) {
    throw new RangeError(`${who}: x ${formatShape(t.shape)} is not square matrices`);
  }
  const batch = t.shape.slice(0, -2);
  return onHost(who, [t], ([xv]) => ({
    shape: batch,
    dtype: "float32",
    fill(out) {
      const xs = numbersOf(xv!);
      for (let b = 0; b < sizeOf(batch); b++) {
        const m = xs.slice(b * n * n, (b + 1) * n * n);
        let d = 1;
        for (let c = 0; c < n; c++) {
          let p = c;
          for (let i = c + 1; i < n; i++) {
            if (Math.abs(m[i * n + c]) > Math.abs(m[p * n + c])) p = i;
          }
          if (m[p * n + c] === 0) {
            d = 0;
            break;
          }
          if (p !== c) {
            for (let k = 0; k < n; k++) [m[c * n + k], m[p * n + k]] = [m[p * n + k], m[c * n + k]];
            d = -d;
          }
          d *= m[c * n + c];
          for (let i = c + 1; i < n; i++) {
            const f = m[i * n + c] / m[c * n + c];
            for (let k = c; k < n; k++) m[i * n + k] -= f * m[c * n + k];
          }
        }
        (out as Float32Array)[b] = d;
      }
    },
  }));
}, {
  signature: "(x) → float32 tensor",
  summary:
    "The determinant of each float32 square matrix of `x [..., n, n]`, by LU decomposition with partial pivoting in float64 (ONNX's `Det`). Computed on the host.",
  dtypes: ["float32"],
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not float32), `RangeError` (not square matrices).",
  tvm: null,
});

hostMathBuiltins.add(
  "vm.op.matmul_integer",
  (a: unknown, b: unknown, aZero?: unknown, bZero?: unknown) => {
    const who = "matmul_integer";
    const at = tensorArg(a, "a", who), bt = tensorArg(b, "b", who);
    const az = optionalTensor(aZero, "a_zero_point", who);
    const bz = optionalTensor(bZero, "b_zero_point", who);
    if (at.shape.length !== 2 || bt.shape.length !== 2 || at.shape[1] !== bt.shape[0]) {
      throw new RangeError(
        `${who}: a ${formatShape(at.shape)} and b ${
          formatShape(bt.shape)
        } are not matrices that multiply`,
      );
    }
    const [m, k] = at.shape, n = bt.shape[1];
    return onHost(who, [at, bt, az, bz], ([av, bv, azv, bzv]) => ({
      shape: [m, n],
      dtype: "int32",
      fill(out) {
        const as = numbersOf(av!), bs = numbersOf(bv!);
        const za = azv === undefined ? [0] : numbersOf(azv),
          zb = bzv === undefined ? [0] : numbersOf(bzv);
        for (let i = 0; i < m; i++) {
          for (let j = 0; j < n; j++) {
            let s = 0;
            // A zero point per row of a, per column of b, or one for all.
            const zi = za[za.length === 1 ? 0 : i], zj = zb[zb.length === 1 ? 0 : j];
            for (let p = 0; p < k; p++) s += (as[i * k + p] - zi) * (bs[p * n + j] - zj);
            (out as Int32Array)[i * n + j] = s;
          }
        }
      },
    }));
  },
  {
    signature: "(a, b, a_zero_point?, b_zero_point?) → int32 tensor",
    summary:
      "ONNX's `MatMulInteger` for 2-D operands: `(a − a_zero_point) · (b − b_zero_point)` of 8-bit integers, in int32 (a zero point is one value, or one per row of `a` / column of `b`). Computed on the host.",
    dtypes: ["int8", "uint8"],
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not tensors), `RangeError` (not 2-D matrices that multiply).",
    tvm: null,
  },
);

/** `x` rounded to the precision of a float dtype's scalars: float16's, else float32's. */
function roundTo(dtype: string, x: number): number {
  return dtype === "float16" ? Math.f16round(x) : Math.fround(x);
}

hostMathBuiltins.add(
  "vm.op.qlinear_matmul",
  (
    a: unknown,
    aScale: unknown,
    aZero: unknown,
    b: unknown,
    bScale: unknown,
    bZero: unknown,
    yScale: unknown,
    yZero: unknown,
  ) => {
    const who = "qlinear_matmul";
    const [at, as, az, bt, bs, bz, ys, yz] = [
      [a, "a"],
      [aScale, "a_scale"],
      [aZero, "a_zero_point"],
      [b, "b"],
      [bScale, "b_scale"],
      [bZero, "b_zero_point"],
      [yScale, "y_scale"],
      [yZero, "y_zero_point"],
    ].map(([v, what]) => tensorArg(v, what as string, who));
    for (const s of [as, az, bs, bz, ys, yz]) {
      if (s.size !== 1) throw new RangeError(`${who}: scales and zero points must be scalars`);
    }
    for (const s of [as, bs, ys]) {
      choiceArg(who, s.dtype, "a scale's dtype", ["float32", "float16"]);
    }
    const ra = at.shape.length, rb = bt.shape.length;
    const [m, k] = at.shape.slice(-2), [k2, n] = bt.shape.slice(-2);
    if (ra < 2 || rb < 2 || k !== k2) {
      throw new RangeError(`${who}: a ${formatShape(at.shape)} and b ${formatShape(bt.shape)}`);
    }
    const batch = broadcastShapes(at.shape.slice(0, -2), bt.shape.slice(0, -2), who);
    return onHost(who, [at, as, az, bt, bs, bz, ys, yz], (views) => {
      const [av, asv, azv, bv, bsv, bzv, ysv, yzv] = views.map((v) => numbersOf(v!));
      const ai = broadcastIndex(at.shape.slice(0, -2), batch);
      const bi = broadcastIndex(bt.shape.slice(0, -2), batch);
      // The combined scale in the scales' own precision, as NumPy computes a_scale * b_scale / y_scale.
      const dt = as.dtype;
      const scale = roundTo(dt, roundTo(dt, asv[0] * bsv[0]) / ysv[0]);
      const lo = yz.dtype === "int8" ? -128 : 0;
      return {
        shape: [...batch, m, n],
        dtype: yz.dtype,
        fill(out) {
          for (let p = 0; p < sizeOf(batch); p++) {
            const ao = ai(p) * m * k, bo = bi(p) * k * n;
            for (let i = 0; i < m; i++) {
              for (let j = 0; j < n; j++) {
                let c = 0;
                for (let q = 0; q < k; q++) {
                  c += (av[ao + i * k + q] - azv[0]) * (bv[bo + q * n + j] - bzv[0]);
                }
                // NumPy: int32 times a float scale is float64; rint, then the cast wraps.
                const y = rint(c * scale + yzv[0]);
                (out as Int32Array)[(p * m + i) * n + j] = ((y - lo) & 0xff) + lo;
              }
            }
          }
        },
      };
    });
  },
  {
    signature:
      "(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point) → 8-bit tensor",
    summary:
      "ONNX's `QLinearMatMul` with scalar scales and zero points: `(a − a_zero_point) · (b − b_zero_point)` in integers (batched, NumPy broadcasting of the leading axes), times `a_scale · b_scale / y_scale` (computed in the scales' float32 or float16), plus `y_zero_point`, rounded half to even, in `y_zero_point`'s int8 or uint8. Computed on the host.",
    dtypes: ["int8", "uint8", "float32", "float16"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not tensors, scales not float32 or float16), `RangeError` (scales or zero points not scalars, shapes that do not multiply).",
    tvm: null,
  },
);

/** What `uint64_binary` computes, by name: arithmetic (uint64 bits) or comparisons (bool). */
const UINT64_OPS: Readonly<Record<string, (a: bigint, b: bigint) => bigint | boolean>> = {
  add: (a, b) => a + b,
  subtract: (a, b) => a - b,
  multiply: (a, b) => a * b,
  divide: (a, b) => (b === 0n ? 0n : a / b),
  mod: (a, b) => (b === 0n ? 0n : a % b),
  maximum: (a, b) => (a > b ? a : b),
  minimum: (a, b) => (a < b ? a : b),
  bitwise_and: (a, b) => a & b,
  bitwise_or: (a, b) => a | b,
  bitwise_xor: (a, b) => a ^ b,
  left_shift: (a, b) => (b >= 64n ? 0n : a << b),
  right_shift: (a, b) => (b >= 64n ? 0n : a >> b),
  equal: (a, b) => a === b,
  less: (a, b) => a < b,
  less_equal: (a, b) => a <= b,
  greater: (a, b) => a > b,
  greater_equal: (a, b) => a >= b,
};

hostMathBuiltins.add("vm.op.uint64_binary", (a: unknown, b: unknown, op: unknown) => {
  const who = "uint64_binary";
  const x = tensorArg(a, "a", who, "int64"), y = tensorArg(b, "b", who, "int64");
  const name = choiceArg(who, op, "op", Object.keys(UINT64_OPS));
  const f = UINT64_OPS[name];
  const compares = ["equal", "less", "less_equal", "greater", "greater_equal"].includes(name);
  const shape = broadcastShapes(x.shape, y.shape, who);
  return onHost(who, [x, y], ([xv, yv]) => {
    const xi = broadcastIndex(x.shape, shape), yi = broadcastIndex(y.shape, shape);
    const xs = xv as BigInt64Array, ys = yv as BigInt64Array;
    return {
      shape,
      dtype: compares ? "bool" : "int64",
      fill(out) {
        for (let i = 0; i < sizeOf(shape); i++) {
          // The bits read as unsigned, the result's low 64 bits written back.
          const r = f(BigInt.asUintN(64, xs[xi(i)]), BigInt.asUintN(64, ys[yi(i)]));
          if (typeof r === "boolean") (out as Uint8Array)[i] = r ? 1 : 0;
          else (out as BigInt64Array)[i] = BigInt.asIntN(64, r);
        }
      },
    };
  });
}, {
  signature: "(a, b, op) → int64 or bool tensor",
  summary:
    'Unsigned 64-bit arithmetic on the bit patterns of two int64 tensors (how the ONNX importer holds UINT64), NumPy broadcasting: `op` `"add"`, `"subtract"`, `"multiply"` (wrapping), `"divide"`, `"mod"` (0 for a zero divisor, as NumPy gives), `"maximum"`, `"minimum"`, `"bitwise_and"`, `"bitwise_or"`, `"bitwise_xor"`, `"left_shift"`, `"right_shift"` give uint64 bits in int64; `"equal"`, `"less"`, `"less_equal"`, `"greater"`, `"greater_equal"` give bools. Computed on the host.',
  dtypes: ["int64"],
  devices: ["cpu", "webgpu"],
  errors:
    "`TypeError` (not int64 tensors, an unknown op), `RangeError` (shapes that do not broadcast).",
  tvm: null,
});

hostMathBuiltins.add("vm.op.dropout", (x: unknown, ratio: unknown, training: unknown) => {
  const who = "dropout";
  const t = tensorArg(x, "x", who);
  const rt = optionalTensor(ratio, "ratio", who);
  const tt = optionalTensor(training, "training_mode", who);
  return onHost(who, [t, rt, tt], ([xv, rv, tv]) => {
    const r = rv === undefined ? 0.5 : numbersOf(rv)[0];
    const on = tv !== undefined && numbersOf(tv)[0] !== 0;
    // A mask drawn at random could not match anything; only dropping nothing is computed.
    if (on && r !== 0) {
      throw new RangeError(
        `${who}: training mode with ratio ${r} needs a random mask, which relaxvm does not draw`,
      );
    }
    return {
      shape: t.shape,
      dtype: t.dtype,
      fill: (out) => (out as Float32Array).set(xv as Float32Array),
    };
  });
}, {
  signature: "(x, ratio?, training_mode?) → tensor",
  summary:
    "ONNX's `Dropout` where it drops nothing: a copy of `x` when `training_mode` (a bool scalar tensor, read when it runs; default false) is false or `ratio` (default 0.5) is 0. Training with another ratio is an error: it needs a random mask, which relaxvm does not draw.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not tensors), `RangeError` (training mode with a ratio other than 0).",
  tvm: "relax.op.nn.dropout, which is the identity at inference",
});

hostMathBuiltins.add(
  "vm.op.reduce_extreme",
  (x: unknown, axes: unknown, keepdims: unknown, largest: unknown) => {
    const who = "reduce_extreme";
    const t = tensorArg(x, "x", who);
    choiceArg(who, t.dtype, "x's dtype", ["float32"]);
    const at = optionalTensor(axes, "axes", who);
    const big = Boolean(largest), keep = Boolean(keepdims);
    return onHost(who, [t, at], ([xv, av]) => {
      const r = t.shape.length;
      const list = av === undefined || av.length === 0
        ? t.shape.map((_, i) => i)
        : numbersOf(av).map((a) => (a < 0 ? a + r : a));
      if (list.some((a) => !(a >= 0 && a < r))) {
        throw new RangeError(`${who}: axes [${list}] for rank ${r}`);
      }
      const shape = t.shape.flatMap((d, i) => (list.includes(i) ? (keep ? [1] : []) : [d]));
      const kept = t.shape.map((d, i) => (list.includes(i) ? 1 : d)), keptStrides = stridesOf(kept);
      const inStrides = stridesOf(t.shape);
      return {
        shape,
        dtype: t.dtype,
        fill(out) {
          const xs = numbersOf(xv!), o = out as Float32Array;
          // The reduction's identity for an empty set: -∞ for the max, +∞ for the min (ONNX's).
          o.fill(big ? -Infinity : Infinity);
          for (let i = 0; i < xs.length; i++) {
            let j = 0;
            for (let a = 0; a < r; a++) {
              if (kept[a] !== 1 || t.shape[a] === 1) {
                j += (Math.floor(i / inStrides[a]) % t.shape[a]) * keptStrides[a];
              }
            }
            if (big ? !(xs[i] <= o[j]) : !(xs[i] >= o[j])) o[j] = xs[i];
          }
        },
      };
    });
  },
  {
    signature: "(x, axes?, keepdims, largest) → tensor",
    summary:
      "The largest (`largest` 1) or smallest elements of float32 `x` over `axes` (a 1-D integer tensor read when it runs; absent or empty: all), `keepdims` keeping them as 1s: ONNX's `ReduceMax`/`ReduceMin`, whose value over an empty set is -∞ or +∞ (NaN propagates). Computed on the host.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not a float32 tensor), `RangeError` (an axis out of range).",
    tvm: "relax.op.max and relax.op.min, which refuse an empty set",
  },
);
