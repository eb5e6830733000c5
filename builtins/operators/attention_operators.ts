/**
 * The attention operators: `vm.op.attention`, fused scaled dot-product
 * attention, and `vm.op.causal_mask`, the mask an unfused path
 * (`matmul` → `causal_mask` → `softmax` → `matmul`) applies to its scores.
 * Tensors first, then immediates and constants:
 *
 * | call | result |
 * | --- | --- |
 * | `attention(q, k, v, causal?, scale?, layout?)` | `softmax(scale · q kᵀ, masked) v` over the tokens of each head: with `layout` `"BHSD"` (default) `q [..., Tq, D]`, `k [..., Tk, D]`, `v [..., Tk, Dv]` with equal leading axes (e.g. `[B, H]` or `[H]`) → `[..., Tq, Dv]`; with `"BSHD"` `q [..., Tq, H, D]`, `k [..., Tk, H, D]`, `v [..., Tk, H, Dv]` → `[..., Tq, H, Dv]`; float32. `causal`: absent, null, 0 or false: every query sees every key; 1, true or `"BottomRight"`: query `i` sees keys `j <= i + (Tk - Tq)` (the KV-cache alignment: the last query is the newest token; needs `Tk >= Tq`); `"TopLeft"`: keys `j <= i`. `scale`: a numeric constant (null: the default), default `1 / sqrt(D)`. |
 * | `causal_mask(scores, offset?)` | `scores` with `scores[..., i, j] = -Infinity` where `j > i + offset`, over the last two axes `[..., m, n]` (float32, rank ≥ 2). `offset` is an `imm`, default `n - m` (the alignment `attention` uses with `causal` 1). |
 *
 * The default layout, `"BHSD"`, is `[..., heads, tokens, head size]`;
 * `"BSHD"` is TVM's `relax.op.nn.attention` layout `[batch, tokens, heads,
 * head size]`, which is also how a projection's output `[tokens, d_model]`
 * reshapes to heads and how `attention_kv_cache_view` returns cached rows
 * `[tokens, heads, head size]`: a decoder passes them as they are, with no
 * transpose. Both kernels index either layout directly. `causal` accepts
 * TVM's `causal_mask` strings.
 *
 * The softmax is numerically stable (the row maximum is subtracted before
 * `exp`); keys a causal query cannot see are skipped, not multiplied by zero.
 * On WebGPU a call is one dispatch, for any `Tk` and `D`: an online softmax
 * per query row, run by one thread per row (prefills; every call on a
 * software adapter) or by a workgroup per row (a decode step on a hardware
 * GPU; head sizes above 128), see kernels/webgpu/attention.ts.
 *
 * Errors: `TypeError` (wrong kind of value or dtype), `RangeError` (shapes),
 * messages starting with the operator name.
 *
 * @example One decode step: one new query against four cached keys
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertAlmostEquals } from "@std/assert";
 *
 * const attention = getGlobalFunc("vm.op.attention")!;
 * using q = tensor([[[1, 0]]]); // [H = 1, Tq = 1, D = 2]
 * using k = tensor([[[1, 0], [0, 1], [1, 1], [0, 0]]]); // [1, Tk = 4, 2]
 * using v = tensor([[[1], [2], [3], [4]]]); // [1, 4, Dv = 1]
 * using out = attention(q, k, v, 1, 1) as NDArray; // causal, scale 1
 * // weights ∝ exp([1, 0, 1, 0]): (e·1 + 2 + e·3 + 4) / (2e + 2)
 * const e = Math.E;
 * assertAlmostEquals(out.dataSync()[0], (4 * e + 6) / (2 * e + 2), 1e-6);
 * ```
 *
 * @module
 */

import type { TensorDType } from "../../ground/dtype.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import { BuiltinTable } from "../builtin_table.ts";
import type { AttentionLayout, OpBackend } from "../../kernels/kernel_backend.ts";
import { formatShape } from "../../kernels/broadcast.ts";
import {
  checkArgCount,
  checkDType,
  checkSameDevice,
  launch,
  viewOf,
} from "./operator_arguments.ts";
import { attentionWork, launchSplit } from "./kernel_cost.ts";
import { describe } from "../describe.ts";
import { tensorArg } from "../validate.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const attentionBuiltins = new BuiltinTable("Attention operators", import.meta.url);

/** Every packed function name this module registers. */
export const ATTENTION_OPERATOR_NAMES: readonly string[] = [
  "vm.op.attention",
  "vm.op.causal_mask",
];

const FLOAT: readonly TensorDType[] = ["float32"];

/** `vm.op.causal_mask(scores, offset?)`. */
function causalMask(args: readonly unknown[]): NDArray {
  const name = "vm.op.causal_mask";
  checkArgCount(name, args, 1, 2);
  const x = tensorArg(args[0], "argument 0 (scores)", name);
  checkDType(name, x, "scores", FLOAT);
  const rank = x.shape.length;
  if (rank < 2) {
    throw new RangeError(
      `${name}: scores must have at least 2 dimensions, got shape ${formatShape(x.shape)}`,
    );
  }
  const m = x.shape[rank - 2], n = x.shape[rank - 1];
  const offset = args[1] ?? n - m;
  if (typeof offset !== "number" || !Number.isSafeInteger(offset)) {
    throw new TypeError(`${name}: offset must be an integer, got ${describe(offset)}`);
  }
  return launch(x, x.shape, "float32", (backend, out) => backend.causalMask(x, offset, out));
}

/**
 * The causal offset `attention` applies (`null`: no mask) for a `causal`
 * argument and the query and key counts.
 */
function causalOffset(name: string, causal: unknown, Tq: number, Tk: number): number | null {
  if (causal === undefined || causal === null || causal === 0 || causal === false) return null;
  if (causal === "TopLeft") return 0;
  if (causal === 1 || causal === true || causal === "BottomRight") {
    if (Tk < Tq) {
      throw new RangeError(
        `${name}: a bottom-right causal mask needs at least as many keys as queries, ` +
          `got Tq ${Tq} and Tk ${Tk}`,
      );
    }
    return Tk - Tq;
  }
  throw new TypeError(
    `${name}: causal must be 0, 1, a boolean, "TopLeft" or "BottomRight", got ${describe(causal)}`,
  );
}

const LAYOUTS: readonly AttentionLayout[] = ["BHSD", "BSHD"];

/** `vm.op.attention(q, k, v, causal?, scale?, layout?)`: a Promise when split asynchronously. */
function attention(args: readonly unknown[]): NDArray | Promise<NDArray> {
  const name = "vm.op.attention";
  checkArgCount(name, args, 3, 6);
  const q = tensorArg(args[0], "argument 0 (q)", name);
  const k = tensorArg(args[1], "argument 1 (k)", name);
  const v = tensorArg(args[2], "argument 2 (v)", name);
  for (const [t, role] of [[q, "q"], [k, "k"], [v, "v"]] as const) checkDType(name, t, role, FLOAT);
  checkSameDevice(name, [q, k, v]);
  const shapes = `q ${formatShape(q.shape)}, k ${formatShape(k.shape)} and v ${
    formatShape(v.shape)
  }`;
  const layout = args[5] ?? "BHSD";
  if (!LAYOUTS.includes(layout as AttentionLayout)) {
    throw new TypeError(`${name}: layout must be "BHSD" or "BSHD", got ${describe(layout)}`);
  }
  // BSHD: the token axis sits before the head axis; the axes before both are batches.
  const tokensFirst = layout === "BSHD";
  const minRank = tokensFirst ? 3 : 2;
  const rank = q.shape.length;
  if (rank < minRank || k.shape.length !== rank || v.shape.length !== rank) {
    throw new RangeError(`${name}: ${shapes} must have one rank, at least ${minRank}`);
  }
  const t = tokensFirst ? rank - 3 : rank - 2; // the token axis
  const lead = q.shape.slice(0, t);
  const sameLead = (s: readonly number[]) => lead.every((d, i) => s[i] === d);
  if (!sameLead(k.shape) || !sameLead(v.shape)) {
    throw new RangeError(`${name}: the leading axes of ${shapes} differ`);
  }
  if (
    tokensFirst &&
    (k.shape[rank - 2] !== q.shape[rank - 2] || v.shape[rank - 2] !== q.shape[rank - 2])
  ) {
    throw new RangeError(`${name}: the head axes of ${shapes} differ`);
  }
  const Tq = q.shape[t], D = q.shape[rank - 1];
  const Tk = k.shape[t], Dv = v.shape[rank - 1];
  if (k.shape[rank - 1] !== D) {
    throw new RangeError(`${name}: q and k must have one head size, got ${shapes}`);
  }
  if (v.shape[t] !== Tk) {
    throw new RangeError(`${name}: k and v must have one number of keys, got ${shapes}`);
  }
  if (Tk === 0) throw new RangeError(`${name}: needs at least one key, got ${shapes}`);
  const offset = causalOffset(name, args[3], Tq, Tk);
  const scale = args[4] ?? (D === 0 ? 1 : 1 / Math.sqrt(D));
  if (typeof scale !== "number" || !Number.isFinite(scale)) {
    throw new TypeError(`${name}: scale must be a finite number, got ${describe(scale)}`);
  }
  const lay = layout as AttentionLayout;
  return launchSplit(name, q, [...q.shape.slice(0, -1), Dv], "float32", {
    rows: sizeOf(lead) * Tq,
    rowWork: attentionWork(tokensFirst ? q.shape[rank - 2] : 1, 1, Tk, D, Dv),
    whole: (backend, out) => backend.attention(q, k, v, scale, offset, out, lay),
    part: (backend, out, from, to) =>
      attentionRows(backend, q, k, v, scale, offset, out, lay, from, to),
  });
}

/** Product of `shape`'s extents. */
function sizeOf(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/**
 * Query rows `[from, to)` of attention, counted over every head (`"BHSD"`) or
 * batch (`"BSHD"`, where a row is one token of every head): for each head or
 * batch they cover, the kernel runs on views of its query and output rows and
 * all its keys and values, the causal offset moved by the first row's index.
 */
function attentionRows(
  backend: OpBackend,
  q: NDArray,
  k: NDArray,
  v: NDArray,
  scale: number,
  offset: number | null,
  out: NDArray,
  layout: AttentionLayout,
  from: number,
  to: number,
): void {
  const rank = q.shape.length, tokensFirst = layout === "BSHD";
  const t = tokensFirst ? rank - 3 : rank - 2;
  const Tq = q.shape[t], Tk = k.shape[t];
  const D = q.shape[rank - 1], Dv = v.shape[rank - 1];
  const H = tokensFirst ? q.shape[rank - 2] : 1;
  const unitShape = (rows: number, d: number) => tokensFirst ? [rows, H, d] : [1, rows, d];
  for (let row = from; row < to;) {
    const unit = Math.floor(row / Tq), i0 = row - unit * Tq;
    const rows = Math.min(to - row, Tq - i0);
    const qv = viewOf(q, (unit * Tq + i0) * H * D, unitShape(rows, D));
    const kv = viewOf(k, unit * Tk * H * D, unitShape(Tk, D));
    const vv = viewOf(v, unit * Tk * H * Dv, unitShape(Tk, Dv));
    const ov = viewOf(out, (unit * Tq + i0) * H * Dv, unitShape(rows, Dv));
    try {
      backend.attention(qv, kv, vv, scale, offset === null ? null : offset + i0, ov, layout);
    } finally {
      for (const view of [qv, kv, vv, ov]) view.releaseIfUnowned();
    }
    row += rows;
  }
}

const ERRORS =
  "`TypeError` (an argument of the wrong kind or dtype, tensors on different devices), `RangeError` (shapes); messages start with the operator's name.";

attentionBuiltins.add("vm.op.attention", (...args: unknown[]) => attention(args), {
  signature: "(q, k, v, causal?, scale?, layout?) → tensor",
  summary:
    '`softmax(scale · q kᵀ) v`, fused: `q [..., Tq, D]`, `k [..., Tk, D]`, `v [..., Tk, Dv]` with equal leading axes (`[B, H]`, `[H]`, none) → `[..., Tq, Dv]`; with `layout` `"BSHD"` the token axis comes before the heads, `q [..., Tq, H, D]`, `k`, `v` `[..., Tk, H, D]` (a KV cache view as it is) → `[..., Tq, H, Dv]`. `causal` 0/false/absent: none; 1/true/`"BottomRight"`: query `i` sees keys `j <= i + Tk - Tq` (KV-cache decode); `"TopLeft"`: `j <= i`. `scale` a numeric constant (absent or null: `1/sqrt(D)`). One dispatch on WebGPU.',
  dtypes: ["float32"],
  devices: ["cpu", "webgpu"],
  errors: ERRORS,
  tvm: 'relax.op.nn.attention, whose layout is [batch, tokens, heads, head size]: `layout` "BSHD"',
});
attentionBuiltins.add("vm.op.causal_mask", (...args: unknown[]) => causalMask(args), {
  signature: "(scores, offset?) → tensor",
  summary:
    "`scores` with `[..., i, j] = -Infinity` where `j > i + offset` over the last two axes `[m, n]`; `offset` an `imm`, default `n - m`.",
  dtypes: ["float32"],
  devices: ["cpu", "webgpu"],
  errors: ERRORS,
  tvm: null,
});
