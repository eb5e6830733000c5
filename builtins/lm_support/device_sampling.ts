/**
 * Operators that choose tokens on the device the logits are on, so that a
 * decode loop can feed a token to the next step without a read back:
 *
 * | call | result |
 * | --- | --- |
 * | `argmax(x, axis?, keepdims?)` | int32 indices of the first maximal element along `axis` (an `imm`; absent or null: over the flattened tensor, a 0-d result); `keepdims` an `imm` 0/1. NaN counts as larger than every number (NumPy). float32 or int32. |
 * | `sample_top_p(logits, uniform, temperature, top_p)` | int32 `[...]` for float32 `logits [..., V]`: per row, top-p (nucleus) sampling from `softmax(logits / temperature)` with the row's uniform sample in [0, 1) from the float32 tensor `uniform` (one per row, any shape of that size, on the logits' device). `temperature` and `top_p` are numbers; a temperature below 1e-6 takes the first maximal logit. NaN logits are never chosen; a row of NaN gives 0. |
 *
 * TVM's `relax.op.argmax` returns int64; these return int32, which WGSL can
 * compute and `vm.op.take` accepts. `sample_top_p` picks what the host
 * builtins `apply_softmax_with_temperature` then `sample_top_p_from_prob`
 * pick (TVM's rule, shortcut included), with one caveat: the GPU sums
 * float32 weights in another order than the CPU, so a uniform sample within
 * rounding of the boundary between two tokens may choose the neighbour.
 *
 * Errors: `TypeError` (kind of value, dtype), `RangeError` (shapes, axis,
 * `top_p` outside (0, 1], a negative or NaN temperature, no elements).
 *
 * @example Greedy and nucleus choices from one row of logits
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const argmax = getGlobalFunc("vm.op.argmax")!;
 * const sample = getGlobalFunc("vm.op.sample_top_p")!;
 * using logits = tensor([[1, 3, 2, 3]]);
 * using best = argmax(logits, -1) as NDArray;
 * assertEquals([...best.dataSync()], [1]); // the first of the two 3s
 * using u = tensor([0.9]);
 * // At temperature 1 the weights are e^-2, 1, e^-1, 1: top_p 0.5 keeps the two 3s,
 * // and u = 0.9 falls in the second.
 * using picked = sample(logits, u, 1, 0.5) as NDArray;
 * assertEquals([...picked.dataSync()], [3]);
 * ```
 *
 * @module
 */

import type { NDArray } from "../../devices/ndarray.ts";
import type { TensorDType } from "../../ground/dtype.ts";
import { formatShape } from "../../kernels/broadcast.ts";
import { withHostScratch } from "../host_scratch.ts";
import { BuiltinTable } from "../builtin_table.ts";
import {
  checkArgCount,
  checkDType,
  checkSameDevice,
  flagArg,
  launch,
  normalizeAxis,
} from "../operators/operator_arguments.ts";
import { describe } from "../describe.ts";
import { tensorArg } from "../validate.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const samplingOperatorBuiltins = new BuiltinTable(
  "Sampling operators",
  import.meta.url,
);

/** Every packed function name this module registers. */
export const SAMPLING_OPERATOR_NAMES: readonly string[] = ["vm.op.argmax", "vm.op.sample_top_p"];

const ARGMAX_DTYPES: readonly TensorDType[] = ["float32", "int32"];

/** `vm.op.argmax(x, axis?, keepdims?)`. */
function argmax(args: readonly unknown[]): NDArray {
  const name = "vm.op.argmax";
  checkArgCount(name, args, 1, 3);
  const x = tensorArg(args[0], "argument 0 (x)", name);
  checkDType(name, x, "x", ARGMAX_DTYPES);
  const keepdims = flagArg(name, args[2], "keepdims");
  const axisArg = args[1];
  if (x.size === 0) {
    throw new RangeError(`${name}: x of shape ${formatShape(x.shape)} has no elements`);
  }
  if (axisArg === undefined || axisArg === null) {
    const shape = keepdims ? x.shape.map(() => 1) : [];
    return launch(x, shape, "int32", (backend, out) => backend.argmax(x, 1, x.size, 1, out));
  }
  if (typeof axisArg !== "number") {
    throw new TypeError(`${name}: axis must be an integer, got ${describe(axisArg)}`);
  }
  const axis = normalizeAxis(name, axisArg, x.shape);
  let outer = 1, inner = 1;
  for (let d = 0; d < axis; d++) outer *= x.shape[d];
  for (let d = axis + 1; d < x.shape.length; d++) inner *= x.shape[d];
  const shape = keepdims
    ? x.shape.map((d, i) => (i === axis ? 1 : d))
    : x.shape.filter((_, i) => i !== axis);
  return launch(
    x,
    shape,
    "int32",
    (backend, out) => backend.argmax(x, outer, x.shape[axis], inner, out),
  );
}

/** `vm.op.sample_top_p(logits, uniform, temperature, top_p)`. */
function sampleTopP(args: readonly unknown[]): NDArray {
  const name = "vm.op.sample_top_p";
  checkArgCount(name, args, 4, 4);
  const logits = tensorArg(args[0], "argument 0 (logits)", name);
  const uniform = tensorArg(args[1], "argument 1 (uniform)", name);
  checkDType(name, logits, "logits", ["float32"]);
  checkDType(name, uniform, "uniform", ["float32"]);
  checkSameDevice(name, [logits, uniform]);
  const [temperature, topP] = [args[2], args[3]];
  if (typeof temperature !== "number" || !(temperature >= 0)) {
    throw new RangeError(
      `${name}: temperature must be a number of at least 0, got ${describe(temperature)}`,
    );
  }
  if (typeof topP !== "number" || !(topP > 0 && topP <= 1)) {
    throw new RangeError(`${name}: top_p must be a number in (0, 1], got ${describe(topP)}`);
  }
  const rank = logits.shape.length;
  if (rank === 0 || logits.shape[rank - 1] === 0) {
    throw new RangeError(
      `${name}: logits must have a last axis of at least one element, got ${
        formatShape(logits.shape)
      }`,
    );
  }
  const rowsShape = logits.shape.slice(0, -1);
  const rows = logits.size / logits.shape[rank - 1];
  if (uniform.size !== rows) {
    throw new RangeError(
      `${name}: ${rows} rows of logits ${
        formatShape(logits.shape)
      } need ${rows} uniform samples, ` +
        `got ${formatShape(uniform.shape)}`,
    );
  }
  // On the CPU a row's weights and sort order live on the host: about 24 bytes an element.
  const scratch = logits.device.kind === "cpu" ? 24 * logits.shape[rank - 1] : 0;
  return withHostScratch(scratch, name, () =>
    launch(
      logits,
      rowsShape,
      "int32",
      (backend, out) => backend.sampleTopP(logits, uniform, temperature, topP, out),
    ));
}

const ERRORS =
  "`TypeError` (an argument of the wrong kind or dtype, tensors on different devices), `RangeError` (shapes, axis, no elements, `top_p` outside (0, 1], a negative or NaN temperature); messages start with the operator's name.";

samplingOperatorBuiltins.add("vm.op.argmax", (...args: unknown[]) => argmax(args), {
  signature: "(x, axis?, keepdims?) → int32 tensor",
  summary:
    "The index of the first maximal element along `axis` (an `imm`, negative counts from the end; absent or null: over the flattened tensor, a 0-d result), that axis dropped or kept with length 1 when `keepdims` (an `imm` 0/1) is 1. NaN counts as larger than every number (NumPy).",
  dtypes: ARGMAX_DTYPES,
  devices: ["cpu", "webgpu"],
  errors: ERRORS,
  tvm: "relax.op.argmax, which returns int64; int32 here, what WGSL computes and vm.op.take reads",
});
samplingOperatorBuiltins.add("vm.op.sample_top_p", (...args: unknown[]) => sampleTopP(args), {
  signature: "(logits, uniform, temperature, top_p) → int32 tensor",
  summary:
    "Per row of `logits [..., V]`, a token drawn by top-p (nucleus) sampling from `softmax(logits / temperature)` with the row's uniform sample in [0, 1) from `uniform` (a float32 tensor of one sample per row, on the logits' device) → `[...]`. TVM's rule, shortcut included: the most probable token when `u < p_max / top_p`, else the first of the sorted nucleus whose cumulative mass exceeds `u` times the nucleus's. A temperature below 1e-6 takes the first maximal logit; NaN logits are never chosen (a row of NaN gives 0). On WebGPU one workgroup per row, by bisection over the weights, without sorting; its float32 sums may choose the neighbouring token for a `u` within rounding of a boundary.",
  dtypes: ["float32"],
  devices: ["cpu", "webgpu"],
  errors: ERRORS,
  tvm:
    "vm.builtin.apply_softmax_with_temperature then vm.builtin.sample_top_p_from_prob (lm_support.cc), run where the logits are",
});
