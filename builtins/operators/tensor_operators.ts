/**
 * The operator front end: the core `vm.op.*` packed functions (installed
 * with the rest by `installBuiltins()`, builtins/install.ts; indexing and
 * attention are beside this file, device sampling in builtins/lm_support/).
 * Each one checks its arguments (count, types, dtypes, devices,
 * shapes, axes), computes the output shape, allocates the output with
 * `NDArray.empty` on the inputs' device — so the running VM's allocator
 * counts it — and hands the work to that device's kernels (`backendFor`).
 *
 * The functions are synchronous: a GPU backend queues its work and returns,
 * and the result is read later with `await data()`. Argument errors are
 * `TypeError`s (wrong kind of value, unsupported dtype) or `RangeError`s
 * (shapes, axes), and their messages start with the operator name; the VM
 * wraps them into a `VMError` naming the instruction.
 *
 * Operator arguments after the tensors (docs/architecture.md's operator table):
 * reductions `(x, axes?, keepdims?)`, `transpose(x, axes?)`,
 * `layer_norm(x, gamma, beta, eps?)`, `cast(x, dtype)`.
 *
 * @module
 */

import { DataType, type TensorDType, tensorDType } from "../../ground/dtype.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { describe } from "../describe.ts";
import { tensorArg } from "../validate.ts";
import {
  axisList,
  checkArgCount,
  checkDType,
  checkSameDevice,
  checkSameDType,
  flagArg,
  launch,
  normalizeAxis,
  reductionAxes,
  reshapedView,
  viewOf,
} from "./operator_arguments.ts";
import { chargeWork, launchSplit, MIN_CHARGED_WORK, productWork } from "./kernel_cost.ts";
import { cpuKernelMode } from "../../kernels/cpu/wasm/runtime.ts";
import {
  backendFor,
  type BinaryOp,
  type ReduceOp,
  type UnaryOp,
} from "../../kernels/kernel_backend.ts";
import {
  broadcastPlan,
  broadcastStrides,
  formatShape,
  sameShape,
  tryBroadcastShapes,
} from "../../kernels/broadcast.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const operatorBuiltins = new BuiltinTable("Operators", import.meta.url);

const FLOAT: readonly TensorDType[] = ["float32"];
/** int64 computes on the CPU only (WGSL has no 64-bit integers; see `checkDevice`). */
const NUMERIC: readonly TensorDType[] = ["float32", "int32", "int64"];

const BINARY_OPS: readonly BinaryOp[] = [
  "add",
  "subtract",
  "multiply",
  "divide",
  "maximum",
  "minimum",
];
/** Unary operators and the dtypes each accepts: sign and clamp make sense on integers, the rest do not. */
const UNARY_OPS: Readonly<Record<UnaryOp, readonly TensorDType[]>> = {
  negative: NUMERIC,
  relu: NUMERIC,
  exp: FLOAT,
  log: FLOAT,
  sqrt: FLOAT,
  tanh: FLOAT,
  sigmoid: FLOAT,
  gelu: FLOAT,
  abs: NUMERIC,
  sin: FLOAT,
  cos: FLOAT,
  tan: FLOAT,
  asin: FLOAT,
  acos: FLOAT,
  atan: FLOAT,
  sinh: FLOAT,
  cosh: FLOAT,
  asinh: FLOAT,
  acosh: FLOAT,
  atanh: FLOAT,
  floor: FLOAT,
  ceil: FLOAT,
  round: FLOAT,
  erf: FLOAT,
};
const REDUCE_OPS: Readonly<Record<ReduceOp, readonly TensorDType[]>> = {
  sum: NUMERIC,
  max: NUMERIC,
  mean: FLOAT,
};

/** Every packed function name this module registers. */
export const OPERATOR_NAMES: readonly string[] = [
  ...BINARY_OPS,
  ...Object.keys(UNARY_OPS),
  "matmul",
  "linear",
  ...Object.keys(REDUCE_OPS),
  "softmax",
  "layer_norm",
  "transpose",
  "cast",
].map((op) => `vm.op.${op}`);

// ---------------------------------------------------------------------------
// The operators.

/**
 * `vm.op.<op>(a, b)`: elementwise with NumPy broadcasting; float32, int32 or
 * int64 (int64 on the CPU only).
 *
 * This is the hot path of programs of many small ops, so it is written for
 * the common case: the checks compare fields and allocate nothing (the
 * helpers in operator_arguments.ts build messages only when a check fails), same-shaped
 * operands give the output `a`'s frozen shape array, and any other pair
 * takes its output shape from the cached broadcast plan
 * (`broadcastPlan`), which the CPU kernel then reuses for its walk.
 * Messages and their order are those of the general checks.
 */
function makeBinary(op: BinaryOp): (a: unknown, b: unknown) => NDArray {
  const name = `vm.op.${op}`;
  return function binary(a: unknown, b: unknown): NDArray {
    if (arguments.length !== 2) checkArgCount(name, Array.from(arguments), 2, 2);
    const x = tensorArg(a, "argument 0 (a)", name), y = tensorArg(b, "argument 1 (b)", name);
    const dtype = x.dtype;
    if (y.dtype !== dtype) checkSameDType(name, [x, y]);
    if (dtype !== "float32" && dtype !== "int32") checkDType(name, x, "a", NUMERIC);
    const device = x.device;
    if (y.device !== device) checkSameDevice(name, [x, y]);
    let shape: readonly number[], size: number;
    if (sameShape(x.shape, y.shape)) {
      shape = x.shape;
      size = x.size;
    } else {
      const plan = broadcastPlan(x.shape, y.shape);
      if (plan === undefined) {
        throw new RangeError(
          `${name}: shapes ${formatShape(x.shape)} and ${formatShape(y.shape)} do not broadcast`,
        );
      }
      shape = plan.shape;
      size = plan.size;
    }
    if (size >= MIN_CHARGED_WORK) chargeWork(name, size, device);
    const backend = backendFor(device.kind);
    const out = NDArray.emptyChecked(shape, size, dtype, device);
    try {
      backend.binary(op, x, y, out);
    } catch (e) {
      out.releaseIfUnowned();
      throw e;
    }
    return out;
  };
}

/** `vm.op.<op>(x)`: elementwise map, same shape and dtype; the output shares `x`'s shape array. */
function makeUnary(op: UnaryOp): (x: unknown) => NDArray {
  const name = `vm.op.${op}`;
  const dtypes = UNARY_OPS[op];
  return function unary(value: unknown): NDArray {
    if (arguments.length !== 1) checkArgCount(name, Array.from(arguments), 1, 1);
    const x = tensorArg(value, "argument 0 (x)", name);
    if (x.dtype !== "float32") checkDType(name, x, "x", dtypes);
    const device = x.device;
    if (x.size >= MIN_CHARGED_WORK) chargeWork(name, x.size, device);
    const backend = backendFor(device.kind);
    const out = NDArray.emptyChecked(x.shape, x.size, x.dtype, device);
    try {
      backend.unary(op, x, out);
    } catch (e) {
      out.releaseIfUnowned();
      throw e;
    }
    return out;
  };
}

/**
 * `vm.op.matmul(a, b)`: NumPy's `matmul`. Operands of rank ≥ 2 multiply
 * over their last two axes with the leading (batch) axes broadcast; a 1-D
 * operand is a row (left) or column (right) vector whose axis is dropped
 * from the result.
 */
function matmul(args: readonly unknown[]): NDArray | Promise<NDArray> {
  const name = "vm.op.matmul";
  checkArgCount(name, args, 2, 2);
  const a = tensorArg(args[0], "argument 0 (a)", name),
    b = tensorArg(args[1], "argument 1 (b)", name);
  checkSameDType(name, [a, b]);
  checkDType(name, a, "a", FLOAT);
  checkSameDevice(name, [a, b]);
  // Built only for an error: formatting both shapes on every call cost small products.
  const shapes = () => `shapes ${formatShape(a.shape)} and ${formatShape(b.shape)}`;
  if (a.shape.length === 0 || b.shape.length === 0) {
    throw new RangeError(`${name}: operands must have at least 1 dimension, got ${shapes()}`);
  }
  const a2 = a.shape.length === 1 ? [1, a.shape[0]] : a.shape;
  const b2 = b.shape.length === 1 ? [b.shape[0], 1] : b.shape;
  const [M, K] = a2.slice(-2), [Kb, N] = b2.slice(-2);
  if (K !== Kb) {
    throw new RangeError(`${name}: inner dimensions differ (${K} and ${Kb}) for ${shapes()}`);
  }
  const batch = tryBroadcastShapes(a2.slice(0, -2), b2.slice(0, -2));
  if (batch === undefined) {
    throw new RangeError(`${name}: batch dimensions of ${shapes()} do not broadcast`);
  }
  const outShape = [...batch];
  if (a.shape.length > 1) outShape.push(M);
  if (b.shape.length > 1) outShape.push(N);
  const batches = sizeOf(batch);
  return launchSplit(name, a, outShape, a.dtype, {
    rows: batches * M,
    rowWork: productWork(1, 1, K, N),
    minRows: productMinRows(),
    chunkMs: PRODUCT_CHUNK_MS,
    whole: (backend, out) => {
      const av = a2 === a.shape ? a : reshapedView(a, a2);
      const bv = b2 === b.shape ? b : reshapedView(b, b2);
      const full = [...batch, M, N];
      const ov = out.shape.length === full.length ? out : reshapedView(out, full);
      try {
        backend.matmul(av, bv, ov);
      } finally {
        // The views hold references to the operands' storage; drop them.
        for (const v of [av, bv, ov]) if (v !== a && v !== b && v !== out) v.releaseIfUnowned();
      }
    },
    part: (backend, out, from, to) => {
      // Each product's operands over the broadcast batch axes, as matrix indices.
      const aMats = batchIndices(a2.slice(0, -2), batch);
      const bMats = batchIndices(b2.slice(0, -2), batch);
      for (let row = from; row < to;) {
        const product = Math.floor(row / M), i0 = row - product * M;
        const rows = Math.min(to - row, M - i0);
        const av = viewOf(a, (aMats[product] * M + i0) * K, [rows, K]);
        const bv = viewOf(b, bMats[product] * K * N, [K, N]);
        const ov = viewOf(out, (product * M + i0) * N, [rows, N]);
        try {
          backend.matmul(av, bv, ov);
        } finally {
          for (const v of [av, bv, ov]) v.releaseIfUnowned();
        }
        row += rows;
      }
    },
  });
}

/**
 * The fewest rows of a product's chunk. Each chunk packs all of B again
 * (about as long as 50–100 rows of WebAssembly work), so chunks of the
 * WebAssembly kernels take at least 128 rows; the TypeScript ones, 25 to
 * 50 times slower a row, 4.
 */
function productMinRows(): number {
  return cpuKernelMode() === "typescript" ? 4 : 128;
}

/** What a product's chunk should take: 12 ms, so B's packing stays a small part of it. */
const PRODUCT_CHUNK_MS = 12;

/** Product of `shape`'s extents. */
function sizeOf(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/**
 * For each index of the broadcast batch shape `batch`, in order, the index
 * of the matrix an operand with batch axes `own` supplies to it.
 */
function batchIndices(own: readonly number[], batch: readonly number[]): number[] {
  const strides = broadcastStrides(own, batch);
  const count = sizeOf(batch);
  const result = new Array<number>(count);
  const index = new Array<number>(batch.length).fill(0);
  let at = 0;
  for (let i = 0; i < count; i++) {
    result[i] = at;
    for (let axis = batch.length - 1; axis >= 0; axis--) {
      at += strides[axis];
      if (++index[axis] < batch[axis]) break;
      at -= strides[axis] * batch[axis];
      index[axis] = 0;
    }
  }
  return result;
}

/**
 * `vm.op.linear(x, weight, bias?)`: `x @ weightᵀ + bias`, TVM's
 * `relax.op.linear` (PyTorch's `nn.Linear`): `weight` is `[N, K]` (out
 * features × in features), `x` is `[..., K]`, `bias` (absent or null: none)
 * is `[N]`; the result is `[..., N]`. float32. One kernel on each device:
 * the transposed weight is never materialized, and the bias is added as the
 * outputs are stored.
 */
function linear(args: readonly unknown[]): NDArray | Promise<NDArray> {
  const name = "vm.op.linear";
  checkArgCount(name, args, 2, 3);
  const x = tensorArg(args[0], "argument 0 (x)", name),
    w = tensorArg(args[1], "argument 1 (weight)", name);
  const bias = args[2] === undefined || args[2] === null
    ? null
    : tensorArg(args[2], "argument 2 (bias)", name);
  const all = bias === null ? [x, w] : [x, w, bias];
  for (const [t, role] of [[x, "x"], [w, "weight"], [bias, "bias"]] as const) {
    if (t !== null) checkDType(name, t, role, FLOAT);
  }
  checkSameDevice(name, all);
  if (x.shape.length === 0 || w.shape.length !== 2) {
    throw new RangeError(
      `${name}: expected x [..., K] and weight [N, K], got shapes ${formatShape(x.shape)} and ${
        formatShape(w.shape)
      }`,
    );
  }
  const [N, K] = w.shape;
  if (x.shape[x.shape.length - 1] !== K) {
    throw new RangeError(
      `${name}: x ${formatShape(x.shape)} must end in the weight's in-features (${K}), ` +
        `weight ${formatShape(w.shape)}`,
    );
  }
  if (bias !== null && (bias.shape.length !== 1 || bias.shape[0] !== N)) {
    throw new RangeError(
      `${name}: bias ${formatShape(bias.shape)} must be [${N}], the weight's out-features`,
    );
  }
  return launchSplit(name, x, [...x.shape.slice(0, -1), N], "float32", {
    rows: x.size / Math.max(K, 1) || sizeOf(x.shape.slice(0, -1)),
    rowWork: productWork(1, 1, K, N),
    minRows: productMinRows(),
    chunkMs: PRODUCT_CHUNK_MS,
    whole: (backend, out) => backend.linear(x, w, bias, out),
    part: (backend, out, from, to) => {
      const xv = viewOf(x, from * K, [to - from, K]), ov = viewOf(out, from * N, [to - from, N]);
      try {
        backend.linear(xv, w, bias, ov);
      } finally {
        xv.releaseIfUnowned();
        ov.releaseIfUnowned();
      }
    },
  });
}

/** `vm.op.<op>(x, axes?, keepdims?)`. */
function reduce(op: ReduceOp, args: readonly unknown[]): NDArray {
  const name = `vm.op.${op}`;
  checkArgCount(name, args, 1, 3);
  const x = tensorArg(args[0], "argument 0 (x)", name);
  checkDType(name, x, "x", REDUCE_OPS[op]);
  const axes = reductionAxes(name, args[1], x.shape);
  const keepdims = flagArg(name, args[2], "keepdims");
  const outShape: number[] = [];
  let reducedSize = 1;
  x.shape.forEach((d, i) => {
    if (!axes.includes(i)) outShape.push(d);
    else {
      reducedSize *= d;
      if (keepdims) outShape.push(1);
    }
  });
  if (op === "max" && reducedSize === 0 && outShape.every((d) => d !== 0)) {
    throw new RangeError(
      `${name}: cannot take the max over zero elements (axes [${axes.join(", ")}] of shape ${
        formatShape(x.shape)
      })`,
    );
  }
  return launch(x, outShape, x.dtype, (backend, out) => backend.reduce(op, x, axes, out));
}

/** `vm.op.softmax(x)`: over the last axis; a 0-d tensor counts as one row of one. */
function softmax(args: readonly unknown[]): NDArray {
  const name = "vm.op.softmax";
  checkArgCount(name, args, 1, 1);
  const x = tensorArg(args[0], "argument 0 (x)", name);
  checkDType(name, x, "x", FLOAT);
  return launch(x, x.shape, x.dtype, (backend, out) => backend.softmax(x, out));
}

/** `vm.op.layer_norm(x, gamma, beta, eps = 1e-5)`: over the trailing `gamma.ndim` axes. */
function layerNorm(args: readonly unknown[]): NDArray {
  const name = "vm.op.layer_norm";
  checkArgCount(name, args, 3, 4);
  const x = tensorArg(args[0], "argument 0 (x)", name);
  const gamma = tensorArg(args[1], "argument 1 (gamma)", name);
  const beta = tensorArg(args[2], "argument 2 (beta)", name);
  const eps = args[3] ?? 1e-5;
  for (const [t, role] of [[x, "x"], [gamma, "gamma"], [beta, "beta"]] as const) {
    checkDType(name, t, role, FLOAT);
  }
  checkSameDevice(name, [x, gamma, beta]);
  if (typeof eps !== "number" || !(eps >= 0) || eps === Infinity) {
    throw new TypeError(`${name}: eps must be a finite non-negative number, got ${describe(eps)}`);
  }
  const g = gamma.shape, rank = x.shape.length;
  const trailing = x.shape.slice(rank - g.length);
  const fits = g.length >= 1 && g.length <= rank && g.every((d, i) => d === trailing[i]) &&
    beta.shape.length === g.length && beta.shape.every((d, i) => d === g[i]);
  if (!fits) {
    throw new RangeError(
      `${name}: gamma ${formatShape(g)} and beta ${formatShape(beta.shape)} must both equal ` +
        `the trailing axes of x ${formatShape(x.shape)}`,
    );
  }
  return launch(x, x.shape, x.dtype, (backend, out) => backend.layerNorm(x, gamma, beta, eps, out));
}

/** `vm.op.transpose(x, axes?)`: permutes axes; absent axes reverse them. Any dtype. */
function transpose(args: readonly unknown[]): NDArray {
  const name = "vm.op.transpose";
  checkArgCount(name, args, 1, 2);
  const x = tensorArg(args[0], "argument 0 (x)", name);
  const rank = x.shape.length;
  const given = axisList(name, args[1], "axes");
  const perm = given === undefined
    ? x.shape.map((_, i) => rank - 1 - i)
    : given.map((a) => normalizeAxis(name, a, x.shape));
  if (perm.length !== rank || new Set(perm).size !== rank) {
    throw new RangeError(
      `${name}: axes [${given?.join(", ")}] are not a permutation of the axes of shape ${
        formatShape(x.shape)
      }`,
    );
  }
  const outShape = perm.map((p) => x.shape[p]);
  return launch(x, outShape, x.dtype, (backend, out) => backend.transpose(x, perm, out));
}

/** `vm.op.cast(x, dtype)`: converts to any tensor dtype (a DataType or its name). */
function cast(args: readonly unknown[]): NDArray {
  const name = "vm.op.cast";
  checkArgCount(name, args, 2, 2);
  const x = tensorArg(args[0], "argument 0 (x)", name);
  const target = args[1];
  if (typeof target !== "string" && !(target instanceof DataType)) {
    throw new TypeError(`${name}: dtype must be a DataType or a string, got ${describe(target)}`);
  }
  let dt: TensorDType;
  try {
    dt = tensorDType(target);
  } catch (e) {
    throw new TypeError(`${name}: cannot cast ${x.dtype} to ${target}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  return launch(x, x.shape, dt, (backend, out) => backend.cast(x, out));
}

// ---------------------------------------------------------------------------
// Registration, with each operator's metadata (docs/builtins.md is generated from it).

const BOTH_DEVICES = ["cpu", "webgpu"] as const;
const OPERATOR_ERRORS =
  "`TypeError` (an argument of the wrong kind or dtype, tensors on different devices, int64 arithmetic on a GPU), `RangeError` (shapes, axes); messages start with the operator's name.";

const BINARY_MEANING: Readonly<Record<BinaryOp, string>> = {
  add: "`a + b`",
  subtract: "`a - b`",
  multiply: "`a * b` (int32 and int64 wrap on overflow)",
  divide:
    "`a / b` (int32 and int64: truncated toward zero; a zero divisor gives the dividend, as WGSL does)",
  maximum: "the larger of `a` and `b`",
  minimum: "the smaller of `a` and `b`",
};
for (const op of BINARY_OPS) {
  operatorBuiltins.add(`vm.op.${op}`, makeBinary(op), {
    signature: "(a, b) → tensor",
    summary: `Elementwise ${
      BINARY_MEANING[op]
    }, with NumPy broadcasting; \`a\` and \`b\` have the same dtype and device, and so does the result. int64 computes on the CPU only.`,
    dtypes: NUMERIC,
    devices: BOTH_DEVICES,
    errors: OPERATOR_ERRORS,
    tvm: `relax.op.${op}`,
  });
}

const UNARY_MEANING: Readonly<Record<UnaryOp, string>> = {
  negative: "`-x`",
  relu: "`max(x, 0)` (NaN stays NaN)",
  exp: "`exp(x)`",
  log: "`log(x)`",
  sqrt: "`sqrt(x)`",
  tanh: "`tanh(x)`",
  sigmoid: "`1 / (1 + exp(-x))`",
  gelu:
    "`0.5 * x * (1 + erf(x / sqrt(2)))`, the exact (erf) form of TVM's `relax.nn.gelu` and PyTorch's default",
  abs: "`|x|` (int32 and int64 wrap at the smallest value, as WGSL's `abs`)",
  sin: "`sin(x)`",
  cos: "`cos(x)`",
  tan: "`tan(x)`",
  asin: "`asin(x)` (NaN outside [-1, 1])",
  acos: "`acos(x)` (NaN outside [-1, 1])",
  atan: "`atan(x)`",
  sinh: "`sinh(x)`",
  cosh: "`cosh(x)`",
  asinh: "`asinh(x)`",
  acosh: "`acosh(x)` (NaN below 1)",
  atanh: "`atanh(x)` (NaN outside [-1, 1])",
  floor: "`floor(x)`",
  ceil: "`ceil(x)`",
  round: "`x` rounded to the nearest integer, halves to even",
  erf: "`erf(x)` (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7, as `gelu` uses)",
};
for (const op of Object.keys(UNARY_OPS) as UnaryOp[]) {
  operatorBuiltins.add(`vm.op.${op}`, makeUnary(op), {
    signature: "(x) → tensor",
    summary: `Elementwise ${UNARY_MEANING[op]}; the result has \`x\`'s shape, dtype and device.${
      UNARY_OPS[op].includes("int64") ? " int64 computes on the CPU only." : ""
    }`,
    dtypes: UNARY_OPS[op],
    devices: BOTH_DEVICES,
    errors: OPERATOR_ERRORS,
    tvm: op === "relu" || op === "gelu" ? `relax.op.nn.${op}` : `relax.op.${op}`,
  });
}

const REDUCE_MEANING: Readonly<Record<ReduceOp, string>> = {
  sum: "The sum",
  max: "The maximum (of at least one element)",
  mean: "The mean",
};
for (const op of Object.keys(REDUCE_OPS) as ReduceOp[]) {
  operatorBuiltins.add(`vm.op.${op}`, (...args: unknown[]) => reduce(op, args), {
    signature: "(x, axes?, keepdims?) → tensor",
    summary: `${
      REDUCE_MEANING[op]
    } over \`axes\` (a shape constant; absent or empty: all axes), which are dropped from the result, or kept with length 1 when \`keepdims\` (an \`imm\` 0/1) is 1.${
      REDUCE_OPS[op].includes("int64") ? " int64 computes on the CPU only." : ""
    }`,
    dtypes: REDUCE_OPS[op],
    devices: BOTH_DEVICES,
    errors: OPERATOR_ERRORS,
    tvm: `relax.op.${op}`,
  });
}
operatorBuiltins.add("vm.op.matmul", (...args: unknown[]) => matmul(args), {
  signature: "(a, b) → tensor",
  summary:
    "NumPy's `matmul`: operands of rank ≥ 2 multiply over their last two axes with the leading (batch) axes broadcast (`[B, H, T, D] @ [B, H, D, S]`, `[H, T, D] @ [D, S]`); a 1-D operand is a row (left) or column (right) vector whose axis is dropped from the result.",
  dtypes: FLOAT,
  devices: BOTH_DEVICES,
  errors: OPERATOR_ERRORS,
  tvm: "relax.op.matmul",
});
operatorBuiltins.add("vm.op.linear", (...args: unknown[]) => linear(args), {
  signature: "(x, weight, bias?) → tensor",
  summary:
    "`x @ weightᵀ + bias` with `weight` stored `[N, K]` (out features × in features, as `nn.Linear` keeps it), `x` `[..., K]`, `bias` `[N]` or absent → `[..., N]`. One kernel: the transposed weight is never materialized and the bias is added as the outputs are stored (a decode step's one-row products read each weight once).",
  dtypes: FLOAT,
  devices: BOTH_DEVICES,
  errors: OPERATOR_ERRORS,
  tvm: "relax.op.linear",
});
operatorBuiltins.add("vm.op.softmax", (...args: unknown[]) => softmax(args), {
  signature: "(x) → tensor",
  summary:
    "Softmax over the last axis, numerically stable (the row maximum is subtracted first); a 0-d tensor counts as one row of one.",
  dtypes: FLOAT,
  devices: BOTH_DEVICES,
  errors: OPERATOR_ERRORS,
  tvm: "relax.op.nn.softmax (over the last axis only)",
});
operatorBuiltins.add("vm.op.layer_norm", (...args: unknown[]) => layerNorm(args), {
  signature: "(x, gamma, beta, eps?) → tensor",
  summary:
    "Layer normalization over the trailing `gamma.ndim` axes of `x`: `(x - mean) / sqrt(var + eps) * gamma + beta`, `eps` a numeric constant (default 1e-5).",
  dtypes: FLOAT,
  devices: BOTH_DEVICES,
  errors: OPERATOR_ERRORS,
  tvm: "relax.op.nn.layer_norm",
});
operatorBuiltins.add("vm.op.transpose", (...args: unknown[]) => transpose(args), {
  signature: "(x, axes?) → tensor",
  summary: "A copy of `x` with its axes permuted by `axes` (a shape constant; absent: reversed).",
  dtypes: "any",
  devices: BOTH_DEVICES,
  errors: OPERATOR_ERRORS,
  tvm: "relax.op.permute_dims",
});
operatorBuiltins.add("vm.op.cast", (...args: unknown[]) => cast(args), {
  signature: "(x, dtype) → tensor",
  summary:
    "`x` converted to `dtype` (a DataType or its name), between any two tensor dtypes, identically on the CPU and on WebGPU: floats round to nearest even, float to integer truncates toward zero and saturates (NaN gives 0), integers wrap, anything to bool is `x != 0`.",
  dtypes: "any",
  devices: BOTH_DEVICES,
  errors: OPERATOR_ERRORS,
  tvm: "relax.op.astype",
});
