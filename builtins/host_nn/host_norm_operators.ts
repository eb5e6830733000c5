/**
 * Normalizations no `vm.op.*` composes simply, computed on the host
 * (host_tensors.ts) in float64 and rounded once to float32: `lrn` (ONNX's
 * `LRN`, across channels), `group_norm` (ONNX's `GroupNormalization`,
 * opset 21: a scale and bias per channel) and `batch_norm_training`
 * (`BatchNormalization` with `training_mode`: the batch's statistics, and
 * the running ones updated by `momentum`).
 *
 * @example Group normalization of 2 groups of 2 channels
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const groupNorm = getGlobalFunc("vm.op.group_norm")!;
 * using x = tensor([[1, 3, 10, 20]], { shape: [1, 4, 1] });
 * using scale = tensor([1, 1, 1, 1]), bias = tensor([0, 0, 0, 0]);
 * using y = groupNorm(x, scale, bias, 2, 0) as NDArray;
 * assertEquals([...y.dataSync()], [-1, 1, -1, 1]);
 * ```
 *
 * @module
 */

import { formatShape } from "../../kernels/broadcast.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { tensorArg } from "../validate.ts";
import { numbersOf, onHost, sizeOf } from "../host_operators/host_tensors.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const hostNormBuiltins = new BuiltinTable("Host normalizations", import.meta.url);

/** A number argument. */
function num(who: string, v: unknown, what: string): number {
  if (typeof v !== "number") throw new TypeError(`${who}: ${what} must be a number`);
  return v;
}

hostNormBuiltins.add(
  "vm.op.lrn",
  (x: unknown, size: unknown, alpha: unknown, beta: unknown, bias: unknown) => {
    const who = "lrn";
    const t = tensorArg(x, "x", who, "float32");
    const n = num(who, size, "size"), a = num(who, alpha, "alpha");
    const b = num(who, beta, "beta"), k = num(who, bias, "bias");
    if (t.shape.length < 2) {
      throw new RangeError(`${who}: x ${formatShape(t.shape)} has no channels`);
    }
    const [batch, c] = t.shape, inner = sizeOf(t.shape.slice(2));
    const before = Math.floor((n - 1) / 2), after = Math.ceil((n - 1) / 2);
    return onHost(who, [t], ([xv]) => ({
      shape: t.shape,
      dtype: "float32",
      fill(out) {
        const xs = numbersOf(xv!);
        for (let p = 0; p < batch; p++) {
          for (let ch = 0; ch < c; ch++) {
            for (let i = 0; i < inner; i++) {
              let sum = 0;
              for (let q = Math.max(0, ch - before); q <= Math.min(c - 1, ch + after); q++) {
                sum += xs[(p * c + q) * inner + i] ** 2;
              }
              const j = (p * c + ch) * inner + i;
              (out as Float32Array)[j] = xs[j] / (k + (a / n) * sum) ** b;
            }
          }
        }
      },
    }));
  },
  {
    signature: "(x, size, alpha, beta, bias) → float32 tensor",
    summary:
      "ONNX's `LRN`: each element of float32 `x [N, C, …]` divided by `(bias + alpha / size · Σ x²)^beta`, the sum over the `size` channels around it (`⌊(size − 1) / 2⌋` before, `⌈(size − 1) / 2⌉` after, within the tensor). Computed on the host.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not float32, parameters not numbers), `RangeError` (no channel axis).",
    tvm: "relax.op.nn.local_response_norm",
  },
);

hostNormBuiltins.add(
  "vm.op.group_norm",
  (x: unknown, scale: unknown, bias: unknown, groups: unknown, epsilon: unknown) => {
    const who = "group_norm";
    const t = tensorArg(x, "x", who, "float32");
    const s = tensorArg(scale, "scale", who, "float32"),
      b = tensorArg(bias, "bias", who, "float32");
    const g = num(who, groups, "groups"), eps = num(who, epsilon, "epsilon");
    const [n, c] = t.shape;
    if (t.shape.length < 2 || !(g >= 1) || c % g !== 0 || s.size !== c || b.size !== c) {
      throw new RangeError(
        `${who}: x ${
          formatShape(t.shape)
        } in ${g} groups with ${s.size} scales and ${b.size} biases`,
      );
    }
    const inner = sizeOf(t.shape.slice(2)), per = (c / g) * inner;
    return onHost(who, [t, s, b], ([xv, sv, bv]) => ({
      shape: t.shape,
      dtype: "float32",
      fill(out) {
        const xs = numbersOf(xv!), ss = numbersOf(sv!), bs = numbersOf(bv!);
        for (let p = 0; p < n * g; p++) {
          let mean = 0, variance = 0;
          for (let i = 0; i < per; i++) mean += xs[p * per + i];
          mean /= per;
          for (let i = 0; i < per; i++) variance += (xs[p * per + i] - mean) ** 2;
          variance /= per;
          const inv = 1 / Math.sqrt(variance + eps);
          for (let i = 0; i < per; i++) {
            const ch = ((p % g) * per + i - ((p % g) * per + i) % inner) / inner;
            const j = p * per + i;
            (out as Float32Array)[j] = (xs[j] - mean) * inv * ss[ch] + bs[ch];
          }
        }
      },
    }));
  },
  {
    signature: "(x, scale, bias, groups, epsilon) → float32 tensor",
    summary:
      "ONNX's `GroupNormalization` (opset 21): the channels of float32 `x [N, C, …]` in `groups` groups, each group of each sample normalized by its mean and variance (plus `epsilon`), then scaled and shifted per channel by `scale [C]` and `bias [C]`. Computed on the host.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not float32, parameters not numbers), `RangeError` (channels that do not split into the groups, a scale or bias not one per channel).",
    tvm: "relax.op.nn.group_norm",
  },
);

hostNormBuiltins.add(
  "vm.op.batch_norm_training",
  (
    x: unknown,
    scale: unknown,
    bias: unknown,
    mean: unknown,
    variance: unknown,
    epsilon: unknown,
    momentum: unknown,
    output: unknown,
  ) => {
    const who = "batch_norm_training";
    const [t, s, b, m, v] = [[x, "x"], [scale, "scale"], [bias, "bias"], [mean, "mean"], [
      variance,
      "var",
    ]].map(([u, what]) => tensorArg(u, what as string, who, "float32"));
    const eps = num(who, epsilon, "epsilon"), mom = num(who, momentum, "momentum");
    const which = num(who, output, "output");
    const [n, c] = t.shape, inner = sizeOf(t.shape.slice(2));
    if (t.shape.length < 2 || [s, b, m, v].some((p) => p.size !== c)) {
      throw new RangeError(`${who}: x ${formatShape(t.shape)} with parameters not one per channel`);
    }
    return onHost(who, [t, s, b, m, v], ([xv, sv, bv, mv, vv]) => ({
      shape: which === 0 ? t.shape : [c],
      dtype: "float32",
      fill(out) {
        const xs = numbersOf(xv!), ss = numbersOf(sv!), bs = numbersOf(bv!);
        const ms = numbersOf(mv!), vs = numbersOf(vv!), o = out as Float32Array;
        for (let ch = 0; ch < c; ch++) {
          let mu = 0, sq = 0;
          for (let p = 0; p < n; p++) {
            for (let i = 0; i < inner; i++) mu += xs[(p * c + ch) * inner + i];
          }
          mu /= n * inner;
          for (let p = 0; p < n; p++) {
            for (let i = 0; i < inner; i++) sq += (xs[(p * c + ch) * inner + i] - mu) ** 2;
          }
          const batchVar = sq / (n * inner);
          if (which === 1) o[ch] = ms[ch] * mom + mu * (1 - mom);
          else if (which === 2) o[ch] = vs[ch] * mom + batchVar * (1 - mom);
          else {
            const inv = 1 / Math.sqrt(batchVar + eps);
            for (let p = 0; p < n; p++) {
              for (let i = 0; i < inner; i++) {
                const j = (p * c + ch) * inner + i;
                o[j] = (xs[j] - mu) * inv * ss[ch] + bs[ch];
              }
            }
          }
        }
      },
    }));
  },
  {
    signature: "(x, scale, bias, mean, var, epsilon, momentum, output) → float32 tensor",
    summary:
      "ONNX's `BatchNormalization` in training mode: `output` 0 gives `x [N, C, …]` normalized by each channel's batch mean and (population) variance, scaled and shifted; 1 and 2 the running mean and variance, `mean · momentum + batch mean · (1 − momentum)` and likewise. Computed on the host.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not float32, parameters not numbers), `RangeError` (parameters not one per channel).",
    tvm: "relax.op.nn.batch_norm with training=True",
  },
);
