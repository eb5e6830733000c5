/**
 * The kernel registry: the contract between the operator front end
 * (builtins/operators/: argument checks, output shapes, output allocation)
 * and the per-device kernels (kernels/cpu/, kernels/webgpu/). A kernel
 * receives checked inputs and an allocated output and fills the output; it
 * may queue the work (a GPU) and return before it is done.
 *
 * As in TF.js's kernel registry, there is one kernel per (op, device kind),
 * and a backend registers the kernels it has (`registerKernels`, or
 * `registerKernel` for one), so adding a backend or a kernel to one is a
 * change in that backend's folder alone. `OpBackend` lists every op and its
 * signature; a backend is a `Partial<OpBackend>`.
 *
 * Fallback rule: there is no silent fallback. An op with no kernel for a
 * tensor's device kind throws, when called, an error naming the op and the
 * device kind (and the ops that kind does have); a kind with no kernel at
 * all throws at `backendFor`. A backend that wants another backend's kernel
 * for an op declares it by registering that kernel under its own kind (one
 * line in its backend.ts), which only works where the kernel can read the
 * backend's memory — a CPU kernel cannot read a GPU buffer synchronously, so
 * WebGPU registers every op.
 *
 * @module
 */

import type { DeviceKind } from "../devices/device.ts";
import type { NDArray } from "../devices/ndarray.ts";

/** Elementwise unary operators. */
export type UnaryOp =
  | "negative"
  | "exp"
  | "log"
  | "sqrt"
  | "tanh"
  | "sigmoid"
  | "relu"
  | "gelu"
  | "abs"
  | "sin"
  | "cos"
  | "tan"
  | "asin"
  | "acos"
  | "atan"
  | "sinh"
  | "cosh"
  | "asinh"
  | "acosh"
  | "atanh"
  | "floor"
  | "ceil"
  | "round"
  | "erf";
/** Elementwise binary operators (NumPy broadcasting). */
export type BinaryOp = "add" | "subtract" | "multiply" | "divide" | "maximum" | "minimum";
/** Reductions. */
export type ReduceOp = "sum" | "max" | "mean";
/** Elementwise tests with a bool result: comparisons, and the logical ops on bools. */
export type CompareOp =
  | "equal"
  | "not_equal"
  | "less"
  | "less_equal"
  | "greater"
  | "greater_equal"
  | "logical_and"
  | "logical_or"
  | "logical_xor"
  | "logical_not";
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

/**
 * One forward of paged attention, as the `pagedAttention` kernel reads it: the rows of
 * the fused QKV that belong to each sequence and where every token of each sequence
 * lives in the pages (`page * pageSize + offset`), its new tokens last. Built by the
 * paged KV cache (builtins/kv_state/) from its page table after `begin_forward`.
 */
export interface PagedAttentionBatch {
  /** Query heads. */
  readonly numQoHeads: number;
  /** Key/value heads (`numQoHeads` a multiple of it). */
  readonly numKvHeads: number;
  /** Features per head. */
  readonly headDim: number;
  /** Tokens per page. */
  readonly pageSize: number;
  /** `[0, l0, l0+l1, …]`: each sequence's rows of `qkv` and `out`. */
  readonly rowIndptr: Int32Array;
  /** `[0, n0, n0+n1, …]`: each sequence's entries of `slots` (its whole length). */
  readonly slotIndptr: Int32Array;
  /** Every token's slot, sequence by sequence, position by position. */
  readonly slots: Int32Array;
}

/**
 * Where a 2-D convolution's windows fall (`conv2d`), per spatial axis `[y, x]`:
 * output `o` reads, through kernel element `k`, position
 * `p = o·stride − padBegin + k·dilation` of the input spaced out by
 * `inputDilation` (element `i` of the input at `p = i·inputDilation`, zeros
 * between and outside). `inputDilation` 1 is an ordinary convolution; more
 * is a transposed one (ONNX's `ConvTranspose` with its weights flipped).
 */
export interface Conv2dGeometry {
  /** Output step per axis. */
  readonly strides: readonly number[];
  /** Padding before each axis (the padding after is what the output's size leaves). */
  readonly padBegin: readonly number[];
  /** Kernel element spacing per axis. */
  readonly dilations: readonly number[];
  /** Input element spacing per axis (1: an ordinary convolution). */
  readonly inputDilations: readonly number[];
  /** Channel groups: input and output channels are split into this many, each convolved alone. */
  readonly groups: number;
  /** Steps applied to each output after the bias, in order (none when absent or empty). */
  readonly epilogue?: readonly Conv2dEpilogueStep[];
}

/**
 * One elementwise step of a convolution's epilogue (`Conv2dGeometry.epilogue`),
 * applied to each output `v` in the kernel rather than as passes of their own:
 * the activations and scalings an exporter writes after a `Conv`.
 *
 * | op | result |
 * | --- | --- |
 * | `affine` | `a·v + b` |
 * | `relu` | `max(v, 0)` |
 * | `clip` | `min(max(v, a), b)` |
 * | `hardsigmoid` | `max(0, min(1, a·v + b))` |
 * | `hardswish` | `v · min(max(v + a, 0), b) / b` (ONNX's `HardSwish` is `a` 3, `b` 6) |
 * | `sigmoid` | `1 / (1 + e^−v)` |
 */
export interface Conv2dEpilogueStep {
  /** Which step. */
  readonly op: "affine" | "relu" | "clip" | "hardsigmoid" | "hardswish" | "sigmoid";
  /** First parameter (unused by `relu` and `sigmoid`). */
  readonly a: number;
  /** Second parameter (unused by `relu` and `sigmoid`). */
  readonly b: number;
}

/**
 * Every op's kernel signature: the table `backendFor` returns for one device
 * kind. Every method fills `out`, already allocated on the inputs' device.
 * A backend registers a `Partial<OpBackend>`; see the module's fallback rule.
 */
export interface OpBackend {
  /** `out[i] = op(x[i])`; `out` has x's shape and dtype. */
  unary(op: UnaryOp, x: NDArray, out: NDArray): void;
  /** `out = op(a, b)` with NumPy broadcasting; `out.shape` is the broadcast shape. */
  binary(op: BinaryOp, a: NDArray, b: NDArray, out: NDArray): void;
  /**
   * `out = op(a, b)` with NumPy broadcasting; `a` and `b` have one dtype,
   * `out` is bool (1 or 0) of the broadcast shape. NaN compares unequal to
   * everything. `logical_not` reads only `a` (pass it as `b` too).
   */
  compare(op: CompareOp, a: NDArray, b: NDArray, out: NDArray): void;
  /** `out = cond ? x : y` elementwise with NumPy broadcasting of all three; `cond` is bool. */
  where(cond: NDArray, x: NDArray, y: NDArray, out: NDArray): void;
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
  /**
   * 2-D convolution: `x [N, C, H, W]`, `w [M, C / groups, KH, KW]`, `bias [M]`
   * or null, `out [N, M, OH, OW]`, all float32; `out[n, m, oy, ox] = bias[m] +
   * Σ w[m, c, ky, kx] · x[n, g·C/groups + c, iy, ix]` over the kernel elements
   * whose input position (`Conv2dGeometry`) holds an element `(iy, ix)`, `g`
   * the group of `m`.
   */
  conv2d(
    x: NDArray,
    w: NDArray,
    bias: NDArray | null,
    geometry: Conv2dGeometry,
    out: NDArray,
  ): void;
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
  /**
   * Causal attention of a batch of sequences over a paged KV cache: `qkv [T, H + 2 KH,
   * D]` (queries, keys, values of the `T` new tokens, sequence after sequence), `pages
   * [numPages, 2, KH, pageSize, D]` (K at 0, V at 1), `out [T, H, D]`, all float32.
   * Writes each new token's K and V to its slot (the last `l_i` of its sequence's
   * slots), then `out[t, h] = Σ_j p_j V[j]` with `p = softmax_j(scale · q[t, h]·K[j])`
   * over the sequence's tokens up to and including `t` (query head `h` reads KV head
   * `h / (H / KH)`).
   */
  pagedAttention(
    qkv: NDArray,
    pages: NDArray,
    batch: PagedAttentionBatch,
    scale: number,
    out: NDArray,
  ): void;
}

/** An op's name: one entry of the kernel table. */
export type KernelName = keyof OpBackend;

/** Every op, in `OpBackend`'s order (the `satisfies` check keeps the list complete). */
export const KERNEL_NAMES = [
  "unary",
  "binary",
  "compare",
  "where",
  "matmul",
  "linear",
  "conv2d",
  "reduce",
  "softmax",
  "layerNorm",
  "transpose",
  "cast",
  "take",
  "stridedSlice",
  "concat",
  "argmax",
  "sampleTopP",
  "causalMask",
  "attention",
  "pagedAttention",
] as const satisfies readonly KernelName[];
// A compile error here means an op was added to `OpBackend` without being listed above.
const _everyOpListed: Exclude<KernelName, (typeof KERNEL_NAMES)[number]> extends never ? true
  : never = true;
void _everyOpListed;

/**
 * Kernels by (device kind, op). Each kind's table is complete: an op with no
 * registered kernel holds a stand-in that throws the missing-kernel error,
 * so the front end's lookup stays one property load per op and needs no check.
 */
export class KernelRegistry {
  readonly #tables: Partial<Record<DeviceKind, OpBackend>> = {};
  readonly #registered: Partial<Record<DeviceKind, Set<KernelName>>> = {};

  /** Registers `kernel` as `op`'s kernel for `kind` devices, replacing any earlier one. */
  register<K extends KernelName>(kind: DeviceKind, op: K, kernel: OpBackend[K]): void {
    if (!(KERNEL_NAMES as readonly string[]).includes(op)) {
      throw new TypeError(`No op named ${JSON.stringify(op)} has a kernel table entry`);
    }
    if (typeof kernel !== "function") {
      throw new TypeError(`The ${op} kernel for ${kind} devices must be a function`);
    }
    const table = this.#tables[kind] ??= this.#emptyTable(kind);
    (this.#registered[kind] ??= new Set()).add(op);
    table[op] = kernel;
  }

  /** Registers each kernel in `kernels` for `kind` devices. */
  registerAll(kind: DeviceKind, kernels: Partial<OpBackend>): void {
    for (const op of KERNEL_NAMES) {
      const kernel = kernels[op];
      if (kernel !== undefined) this.register(kind, op, kernel);
    }
  }

  /** Whether `kind` devices have a kernel for `op`. */
  has(kind: DeviceKind, op: KernelName): boolean {
    return this.#registered[kind]?.has(op) ?? false;
  }

  /** The kernel table for `kind`; throws when no kernel at all is registered for it. */
  tableFor(kind: DeviceKind): OpBackend {
    const table = this.#tables[kind];
    if (table === undefined) {
      throw new Error(`No operator kernels are installed for ${kind} devices`);
    }
    return table;
  }

  #emptyTable(kind: DeviceKind): OpBackend {
    const table = {} as Record<KernelName, unknown>;
    for (const op of KERNEL_NAMES) {
      table[op] = () => {
        const have = [...(this.#registered[kind] ?? [])].join(", ");
        throw new Error(
          `No ${op} kernel is installed for ${kind} devices (${kind} has: ${have || "none"})`,
        );
      };
    }
    return table as unknown as OpBackend;
  }
}

/** The registry the `vm.op.*` front end uses (filled by kernels/install.ts). */
const registry = new KernelRegistry();

/** Registers one kernel, `op` for `kind` devices, in the front end's registry. */
export function registerKernel<K extends KernelName>(
  kind: DeviceKind,
  op: K,
  kernel: OpBackend[K],
): void {
  registry.register(kind, op, kernel);
}

/** Registers the kernels a backend has for `kind` devices (done by kernels/install.ts). */
export function registerKernels(kind: DeviceKind, kernels: Partial<OpBackend>): void {
  registry.registerAll(kind, kernels);
}

/** Whether the front end has a kernel for `op` on `kind` devices. */
export function hasKernel(kind: DeviceKind, op: KernelName): boolean {
  return registry.has(kind, op);
}

/**
 * The kernel table for `kind`: one property load finds an op's kernel, and an
 * op `kind` lacks throws the missing-kernel error when called. Throws when no
 * kernel at all is installed for `kind`.
 */
export function backendFor(kind: DeviceKind): OpBackend {
  return registry.tableFor(kind);
}
