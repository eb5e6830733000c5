/**
 * CPU kernels for the elementwise operators: unary maps and binary ops with
 * NumPy broadcasting.
 *
 * Every loop is written out per operator so the operation is fixed before the
 * loop starts: no per-element `switch` and no per-element closure call, which
 * V8 would not always inline. A binary op has four loops. `flat` serves same
 * shapes with plain `o[i] = a[i] + b[i]` indexing (measured 1.3–1.8× faster
 * than the offset form, whose extra index additions V8 checks for overflow).
 * The three row loops — both operands advancing (`vv`), the right one fixed
 * (`vs`), the left one fixed (`sv`) — cover the rest: a scalar operand is one
 * `vs`/`sv` row over the whole output, and any other broadcast walks the
 * outer axes and runs one row per step.
 *
 * @module
 */

import type { NumberArray } from "../../ground/dtype.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import type { BinaryOp, UnaryOp } from "../kernel_backend.ts";
import { broadcastPlan } from "../broadcast.ts";
import { INT64_LOOPS, unaryInt64 } from "./int64.ts";
import type { RowLoops } from "./row_loops.ts";
import { wasmGelu } from "./wasm/unary.ts";
import { cpuKernelMode } from "./wasm/runtime.ts";
import { ROWS_BINARY_OPS } from "./wasm/rows_module.ts";
import {
  ROWS_WASM_MIN_VALUES,
  type RowsBinaryOp,
  rowsMayTake,
  wasmBinaryRows,
} from "./wasm/rows.ts";

// Float results are computed in double precision and rounded once on store,
// which for + - * / gives exactly the float32 result. For int32 operands the
// same loops are exact for + - max min (the double result is stored modulo
// 2^32, i.e. wrapping like WGSL's i32); * and / need their own loops below.
const FLOAT_LOOPS: Record<BinaryOp, RowLoops> = {
  add: {
    flat: (a, b, o, n) => {
      for (let i = 0; i < n; i++) o[i] = a[i] + b[i];
    },
    vv: (a, ao, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = a[ao + i] + b[bo + i];
    },
    vs: (a, ao, b, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = a[ao + i] + b;
    },
    sv: (a, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = a + b[bo + i];
    },
  },
  subtract: {
    flat: (a, b, o, n) => {
      for (let i = 0; i < n; i++) o[i] = a[i] - b[i];
    },
    vv: (a, ao, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = a[ao + i] - b[bo + i];
    },
    vs: (a, ao, b, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = a[ao + i] - b;
    },
    sv: (a, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = a - b[bo + i];
    },
  },
  multiply: {
    flat: (a, b, o, n) => {
      for (let i = 0; i < n; i++) o[i] = a[i] * b[i];
    },
    vv: (a, ao, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = a[ao + i] * b[bo + i];
    },
    vs: (a, ao, b, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = a[ao + i] * b;
    },
    sv: (a, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = a * b[bo + i];
    },
  },
  divide: {
    flat: (a, b, o, n) => {
      for (let i = 0; i < n; i++) o[i] = a[i] / b[i];
    },
    vv: (a, ao, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = a[ao + i] / b[bo + i];
    },
    vs: (a, ao, b, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = a[ao + i] / b;
    },
    sv: (a, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = a / b[bo + i];
    },
  },
  // Math.max/min propagate NaN, as NumPy's maximum/minimum do.
  maximum: {
    flat: (a, b, o, n) => {
      for (let i = 0; i < n; i++) o[i] = Math.max(a[i], b[i]);
    },
    vv: (a, ao, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = Math.max(a[ao + i], b[bo + i]);
    },
    vs: (a, ao, b, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = Math.max(a[ao + i], b);
    },
    sv: (a, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = Math.max(a, b[bo + i]);
    },
  },
  minimum: {
    flat: (a, b, o, n) => {
      for (let i = 0; i < n; i++) o[i] = Math.min(a[i], b[i]);
    },
    vv: (a, ao, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = Math.min(a[ao + i], b[bo + i]);
    },
    vs: (a, ao, b, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = Math.min(a[ao + i], b);
    },
    sv: (a, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = Math.min(a, b[bo + i]);
    },
  },
};

/**
 * int32 division as WGSL defines it, so CPU and GPU agree: truncate toward
 * zero, and a zero divisor yields the dividend. (`-2^31 / -1` overflows to
 * `2^31`, which `| 0` wraps back to the dividend — WGSL's rule for that case.)
 */
function intDivide(x: number, y: number): number {
  return y === 0 ? x : (x / y) | 0;
}

// Products of two int32 can exceed 2^53, where doubles drop low bits;
// Math.imul gives the exact low 32 bits (wrapping, as WGSL does).
const INT_LOOPS: Record<BinaryOp, RowLoops> = {
  ...FLOAT_LOOPS,
  multiply: {
    flat: (a, b, o, n) => {
      for (let i = 0; i < n; i++) o[i] = Math.imul(a[i], b[i]);
    },
    vv: (a, ao, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = Math.imul(a[ao + i], b[bo + i]);
    },
    vs: (a, ao, b, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = Math.imul(a[ao + i], b);
    },
    sv: (a, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = Math.imul(a, b[bo + i]);
    },
  },
  divide: {
    flat: (a, b, o, n) => {
      for (let i = 0; i < n; i++) o[i] = intDivide(a[i], b[i]);
    },
    vv: (a, ao, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = intDivide(a[ao + i], b[bo + i]);
    },
    vs: (a, ao, b, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = intDivide(a[ao + i], b);
    },
    sv: (a, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = intDivide(a, b[bo + i]);
    },
  },
};

/**
 * `out = op(a, b)` with NumPy broadcasting. `a` and `b` share a dtype
 * (float32, int32 or int64) and `out` is contiguous with the broadcast shape.
 */
export function binaryKernel(op: BinaryOp, a: NDArray, b: NDArray, out: NDArray): void {
  if (out.size === 0) return;
  if (
    a.dtype === "float32" && rowsMayTake(out.size, ROWS_WASM_MIN_VALUES.binary) &&
    op in ROWS_BINARY_OPS && wasmBinary(op as RowsBinaryOp, a, b, out)
  ) return;
  if (a.dtype === "float32") binaryLoops(FLOAT_LOOPS[op], a, b, out);
  else if (a.dtype === "int64") binaryLoops(INT64_LOOPS[op], a, b, out);
  else binaryLoops(INT_LOOPS[op], a, b, out);
}

/**
 * float32 `+ - * /` with one operand a row broadcast over the other's rows
 * (a bias add, an attention mask) on the WebAssembly path
 * (kernels/cpu/wasm/rows.ts), and of same shapes in `"wasm"` mode only;
 * false where TypeScript should run.
 */
function wasmBinary(op: RowsBinaryOp, a: NDArray, b: NDArray, out: NDArray): boolean {
  const av = a.readView() as Float32Array, bv = b.readView() as Float32Array;
  const ov = out.cpuView() as Float32Array;
  if (a.size === out.size && b.size === out.size) {
    // Same shapes are memory-bound: the copies in and out alone take about as long as the
    // TypeScript loop (bench/cpu_rows_bench.ts, 0.96–1.05× at 4M values), so only "wasm" mode.
    return cpuKernelMode() === "wasm" && wasmBinaryRows(op, av, false, bv, false, ov, 1, out.size);
  }
  if (a.size === 1 || b.size === 1) return false;
  const walk = broadcastPlan(a.shape, b.shape)?.walk;
  if (walk === undefined || walk.shape.length > 3 || walk.shape.length < 2) return false;
  // [outer,] rows, n: one operand has every row, the other one row per outer index (a bias add,
  // or MiniLM's attention mask [B, 1, 1, S] over scores [B, H, S, S]).
  const rank = walk.shape.length;
  const [outer, rows, n] = rank === 3 ? walk.shape : [1, ...walk.shape];
  const [sa, sb] = walk.strides;
  if (sa[rank - 1] !== 1 || sb[rank - 1] !== 1) return false;
  const [sa0, sa1] = rank === 3 ? sa : [0, sa[0]], [sb0, sb1] = rank === 3 ? sb : [0, sb[0]];
  const block = rows * n;
  let aRow: boolean;
  if (sa1 === n && sb1 === 0 && (rank === 2 || (sa0 === block && sb0 === n))) aRow = false;
  else if (sa1 === 0 && sb1 === n && (rank === 2 || (sa0 === n && sb0 === block))) aRow = true;
  else return false;
  for (let o = 0; o < outer; o++) {
    const x = o * block, r = o * n;
    const ok = aRow
      ? wasmBinaryRows(op, av.subarray(r), true, bv.subarray(x), false, ov.subarray(x), rows, n)
      : wasmBinaryRows(op, av.subarray(x), false, bv.subarray(r), true, ov.subarray(x), rows, n);
    if (!ok) return false; // the first call decides (all are the same size): nothing written
  }
  return true;
}

/** Runs `loops` over the operands: flat, one operand a scalar, or a general broadcast. */
function binaryLoops<A extends NumberArray | BigInt64Array, S>(
  loops: RowLoops<A, S>,
  a: NDArray,
  b: NDArray,
  out: NDArray,
): void {
  const av = a.readView() as A, bv = b.readView() as A, ov = out.cpuView() as A;
  if (a.size === out.size && b.size === out.size) {
    loops.flat(av, bv, ov, out.size);
    return;
  }
  if (b.size === 1) {
    loops.vs(av, 0, bv[0] as S, ov, 0, out.size);
    return;
  }
  if (a.size === 1) {
    loops.sv(av[0] as S, bv, 0, ov, 0, out.size);
    return;
  }
  const plan = broadcastPlan(a.shape, b.shape);
  if (plan === undefined) throw new RangeError("binaryKernel: the operands do not broadcast");
  const { shape, strides: [sa, sb] } = plan.walk;
  broadcastRows(loops, shape, sa, sb, av, bv, ov);
}

/**
 * The general broadcast loop: one row loop per step over the outer axes.
 * After `collapseDims`, each operand's innermost stride is 1 (it has that
 * axis) or 0 (it is broadcast along it); the outer axes are walked with an
 * odometer that keeps both read offsets current.
 */
function broadcastRows<A extends NumberArray | BigInt64Array, S>(
  loops: RowLoops<A, S>,
  shape: readonly number[],
  sa: readonly number[],
  sb: readonly number[],
  av: A,
  bv: A,
  ov: A,
): void {
  const rank = shape.length;
  const n = shape[rank - 1];
  const ia = sa[rank - 1], ib = sb[rank - 1];
  const rows = ov.length / n;
  const index = new Array<number>(rank - 1).fill(0);
  let ao = 0, bo = 0;
  for (let row = 0, oo = 0; row < rows; row++, oo += n) {
    if (ia !== 0 && ib !== 0) loops.vv(av, ao, bv, bo, ov, oo, n);
    else if (ib === 0 && ia !== 0) loops.vs(av, ao, bv[bo] as S, ov, oo, n);
    else if (ia === 0 && ib !== 0) loops.sv(av[ao] as S, bv, bo, ov, oo, n);
    else {
      // Both operands are fixed along this row: one value, repeated.
      loops.vv(av, ao, bv, bo, ov, oo, 1);
      (ov as NumberArray).fill(ov[oo] as number, oo + 1, oo + n); // any element type
    }
    // Advance the odometer over the outer axes, innermost first.
    for (let axis = rank - 2; axis >= 0; axis--) {
      ao += sa[axis];
      bo += sb[axis];
      if (++index[axis] < shape[axis]) break;
      ao -= sa[axis] * shape[axis];
      bo -= sb[axis] * shape[axis];
      index[axis] = 0;
    }
  }
}

/**
 * `erf` by Abramowitz & Stegun 7.1.26: absolute error below 1.5e-7, i.e. at
 * float32 resolution; only `exp` is needed, so WGSL can use the same formula.
 */
function erf(x: number): number {
  const t = 1 / (1 + 0.3275911 * Math.abs(x));
  const y = 1 - t *
      (0.254829592 +
        t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))) *
      Math.exp(-x * x);
  return x < 0 ? -y : y;
}

/** Rounds to the nearest integer, halves to even (ONNX's `Round`, WGSL's `round`). */
function roundHalfEven(v: number): number {
  const r = Math.round(v);
  return Math.abs(v % 1) === 0.5 ? 2 * Math.round(v / 2) : r;
}

/**
 * The unary loops, one per operator.
 *
 * - `sigmoid(x) = 1 / (1 + exp(-x))`.
 * - `relu(x) = max(x, 0)`; NaN stays NaN.
 * - `gelu` is the exact (erf) form TVM's `relax.nn.gelu` and PyTorch's
 *   default use, `0.5 * x * (1 + erf(x / sqrt(2)))`, with `erf` from
 *   Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7); the WebGPU kernel uses the
 *   same formula and constants. `erf` itself is that formula too.
 * - `round` rounds halves to even; the others are `Math`'s.
 */
const UNARY_LOOPS: Record<UnaryOp, (x: NumberArray, o: NumberArray, n: number) => void> = {
  negative: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = -x[i];
  },
  exp: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.exp(x[i]);
  },
  log: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.log(x[i]);
  },
  sqrt: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.sqrt(x[i]);
  },
  tanh: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.tanh(x[i]);
  },
  sigmoid: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = 1 / (1 + Math.exp(-x[i]));
  },
  relu: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.max(x[i], 0);
  },
  gelu: (x, o, n) => {
    for (let i = 0; i < n; i++) {
      const v = x[i];
      o[i] = 0.5 * v * (1 + erf(v * Math.SQRT1_2));
    }
  },
  abs: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.abs(x[i]);
  },
  sin: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.sin(x[i]);
  },
  cos: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.cos(x[i]);
  },
  tan: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.tan(x[i]);
  },
  asin: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.asin(x[i]);
  },
  acos: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.acos(x[i]);
  },
  atan: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.atan(x[i]);
  },
  sinh: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.sinh(x[i]);
  },
  cosh: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.cosh(x[i]);
  },
  asinh: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.asinh(x[i]);
  },
  acosh: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.acosh(x[i]);
  },
  atanh: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.atanh(x[i]);
  },
  floor: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.floor(x[i]);
  },
  ceil: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = Math.ceil(x[i]);
  },
  round: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = roundHalfEven(x[i]);
  },
  erf: (x, o, n) => {
    for (let i = 0; i < n; i++) o[i] = erf(x[i]);
  },
};

/** `out[i] = op(x[i])`; `out` has x's shape and dtype. */
export function unaryKernel(op: UnaryOp, x: NDArray, out: NDArray): void {
  if (x.dtype === "int64") {
    unaryInt64(op, x.readView() as BigInt64Array, out.cpuView() as BigInt64Array, x.size);
  } else {
    const xv = x.readView() as NumberArray, ov = out.cpuView() as NumberArray;
    // gelu over float32 goes to the WebAssembly SIMD kernel (kernels/cpu/wasm/unary.ts) when large enough.
    if (
      op === "gelu" && xv instanceof Float32Array && ov instanceof Float32Array &&
      wasmGelu(xv, ov, x.size)
    ) return;
    UNARY_LOOPS[op](xv, ov, x.size);
  }
}
