/**
 * The contract between the operator front end (builtins/operators/tensor_operators.ts:
 * argument checks, output shapes, output allocation) and the per-device
 * kernel backends (kernels/cpu/, kernels/webgpu/). A backend receives
 * checked inputs and an allocated output and fills the output; it may queue
 * the work (a GPU) and return before it is done.
 *
 * @module
 */

import type { DeviceKind } from "../devices/device.ts";
import type { NDArray } from "../devices/ndarray.ts";

/** Elementwise unary operators. */
export type UnaryOp = "negative" | "exp" | "log" | "sqrt" | "tanh" | "sigmoid" | "relu" | "gelu";
/** Elementwise binary operators (NumPy broadcasting). */
export type BinaryOp = "add" | "subtract" | "multiply" | "divide" | "maximum" | "minimum";
/** Reductions. */
export type ReduceOp = "sum" | "max" | "mean";
/**
 * How `take` maps an index `i` of an axis of length `n` (TVM's `mode`):
 * `"fast"` reads `i + n` for `-n <= i < 0` and `i` for `0 <= i < n` (NumPy's
 * rule; the front end rejects anything else when it can see the indices,
 * and a kernel clamps what it cannot check); `"clip"` clamps to `[0, n)`;
 * `"wrap"` takes `i` modulo `n`.
 */
export type TakeMode = "fast" | "clip" | "wrap";

/**
 * Axis order of `attention`'s operands: `"BHSD"`, `[..., heads, tokens, head
 * size]`, or `"BSHD"`, `[..., tokens, heads, head size]` (TVM's
 * `relax.op.nn.attention`, and the rows of a KV cache).
 */
export type AttentionLayout = "BHSD" | "BSHD";

/** Kernels of one device kind. Every method fills `out`, already allocated on the inputs' device. */
export interface OpBackend {
  /** `out[i] = op(x[i])`; `out` has x's shape and dtype. */
  unary(op: UnaryOp, x: NDArray, out: NDArray): void;
  /** `out = op(a, b)` with NumPy broadcasting; `out.shape` is the broadcast shape. */
  binary(op: BinaryOp, a: NDArray, b: NDArray, out: NDArray): void;
  /**
   * Matrix product of the last two axes, `a: [..., M, K]`, `b: [..., K, N]`,
   * `out: [..., M, N]`; leading (batch) axes broadcast. Inputs are at least 2-D.
   */
  matmul(a: NDArray, b: NDArray, out: NDArray): void;
  /**
   * `out[..., N] = x[..., K] @ wᵀ + bias` with `w` stored `[N, K]` (a
   * `linear` layer's weight); `bias` is `[N]` or null; all float32, `out`
   * has x's leading axes and N.
   */
  linear(x: NDArray, w: NDArray, bias: NDArray | null, out: NDArray): void;
  /** Reduces over `axes` (sorted, unique, non-negative); `out` holds the reduced shape (keepdims or not). */
  reduce(op: ReduceOp, x: NDArray, axes: readonly number[], out: NDArray): void;
  /** Softmax over the last axis. */
  softmax(x: NDArray, out: NDArray): void;
  /** Layer normalization over the trailing `gamma.shape.length` axes: `(x - mean) / sqrt(var + eps) * gamma + beta`. */
  layerNorm(x: NDArray, gamma: NDArray, beta: NDArray, eps: number, out: NDArray): void;
  /** `out = transpose(x, perm)`; `out.shape[i] = x.shape[perm[i]]`. */
  transpose(x: NDArray, perm: readonly number[], out: NDArray): void;
  /** Converts element types; `out` has x's shape and the target dtype. */
  cast(x: NDArray, out: NDArray): void;
  /**
   * Gather along `axis` (NumPy's `take`): `out[..., t..., ...] =
   * x[..., map(indices[t...]), ...]`, so `out.shape` is `x.shape` with axis
   * `axis` replaced by `indices.shape`. `indices` is int32 on `x`'s device,
   * `x.shape[axis] > 0` unless `out` is empty; `mode` maps each index
   * (`TakeMode`). Any dtype.
   */
  take(x: NDArray, indices: NDArray, axis: number, mode: TakeMode, out: NDArray): void;
  /**
   * Strided copy into a contiguous `out`: `out[i0, i1, …] = x[start[0] +
   * i0·step[0], start[1] + i1·step[1], …]`, one entry per axis of `x` (steps
   * may be negative, never 0); the front end has clamped every read into
   * bounds. Any dtype.
   */
  stridedSlice(x: NDArray, start: readonly number[], step: readonly number[], out: NDArray): void;
  /**
   * Concatenation along `axis`: the inputs (same dtype, device and rank, equal
   * except on `axis`, at least one) are laid one after another along it.
   * Any dtype.
   */
  concat(inputs: readonly NDArray[], axis: number, out: NDArray): void;
  /**
   * `out[o, i] = argmax_j x[o, j, i]` for `x` viewed as `[outer, n, inner]`
   * (`n > 0`): the first maximal element, NaN beating every number; `out`
   * int32 with `outer · inner` elements.
   */
  argmax(x: NDArray, outer: number, n: number, inner: number, out: NDArray): void;
  /**
   * Top-p sampling of each row of float32 `logits` (`[..., V]`, `V > 0`)
   * with one float32 uniform sample per row from `uniform` (`out.size` of
   * them) into int32 `out`: see kernels/cpu/sampling.ts.
   */
  sampleTopP(
    logits: NDArray,
    uniform: NDArray,
    temperature: number,
    topP: number,
    out: NDArray,
  ): void;
  /**
   * `out = x` with `x[..., i, j] = -Infinity` where `j > i + offset`, over the
   * last two axes (`x` float32, rank ≥ 2).
   */
  causalMask(x: NDArray, offset: number, out: NDArray): void;
  /**
   * Fused scaled dot-product attention over the last two axes:
   * `q [..., Tq, D]`, `k [..., Tk, D]`, `v [..., Tk, Dv]` with equal leading
   * axes, `out [..., Tq, Dv]`, all float32; `out[i] = Σ_j p_ij v[j]` with
   * `p_i = softmax_j(scale · q[i]·k[j])` over the keys `j` query `i` sees:
   * every key when `causalOffset` is null, else `j <= i + causalOffset`
   * (`causalOffset >= 0`, `Tk >= 1`, so every query sees at least one key).
   * With `layout` `"BSHD"` the token axis comes before the head axis in
   * every operand (`q [..., Tq, H, D]`, `out [..., Tq, H, Dv]`).
   */
  attention(
    q: NDArray,
    k: NDArray,
    v: NDArray,
    scale: number,
    causalOffset: number | null,
    out: NDArray,
    layout: AttentionLayout,
  ): void;
}

/** Installed backends by device kind; a plain record, so the lookup on every op is one property load. */
const backends: Partial<Record<DeviceKind, OpBackend>> = {};

/** Installs the kernels for one device kind (done by each backend module on import). */
export function registerBackend(kind: DeviceKind, backend: OpBackend): void {
  backends[kind] = backend;
}

/** The kernels for `kind`; throws when none are installed. */
export function backendFor(kind: DeviceKind): OpBackend {
  const b = backends[kind];
  if (b === undefined) throw new Error(`No operator kernels are installed for ${kind} devices`);
  return b;
}
