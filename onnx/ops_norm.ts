/**
 * Normalizations through the host operators of
 * builtins/host_nn/host_norm_operators.ts: `LRN`,
 * `GroupNormalization` (opset 21's scale and bias per channel) and
 * `BatchNormalization` in training mode (its output and the updated
 * running mean and variance); inference-mode `BatchNormalization` of
 * float32 images is `x − mean` then a depthwise 1×1 `vm.op.conv2d`
 * (`batchNormByConv`), of anything else ops_composite.ts's composition.
 *
 * @module
 */

import type { CallArg } from "../builder/builder_options.ts";
import { Unsupported, type Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import { FLOAT, type OpSpec } from "./op_spec.ts";
import { COMPOSITE_OPS } from "./ops_composite.ts";
import { binary, unary } from "./ops_elementwise.ts";
import { reshapeTo } from "./ops_shape.ts";

/** A float attribute as a numeric constant of the executable. */
function number(cx: NodeContext, v: number): CallArg {
  return cx.em.ib.convert_constant(v);
}

/**
 * Inference `BatchNormalization` of float32 images `[N, C, H, W]` in two
 * passes over them: `x − mean` (a broadcast subtraction), then a depthwise
 * 1×1 `vm.op.conv2d` by `scale / sqrt(var + eps)` with `B` as its bias (one
 * multiply-add a value, on the CPU kernels' threads), where the composition
 * made three (subtract, multiply, add: a tenth of PP-OCRv4's detector). The
 * subtraction stays first, as ONNX writes it, so that a mean far from zero
 * does not cancel in a folded shift. Null where it does not apply (another
 * rank or dtype, channels unknown, per-channel inputs not `[C]`).
 */
function batchNormByConv(cx: NodeContext): Value | null {
  const x = cx.input(0), c = x.shape[1];
  if (x.shape.length !== 4 || x.dtype !== "float32" || typeof c !== "number") return null;
  if (cx.int("spatial", 1) !== 1) return null;
  const [scale, b, mean, variance] = [1, 2, 3, 4].map((i) => cx.input(i));
  for (const v of [scale, b, mean, variance]) {
    if (v.dtype !== "float32" || v.shape.length !== 1 || v.shape[0] !== c) return null;
  }
  const centered = binary(cx, "subtract", x, reshapeTo(cx, mean, [c, 1, 1]), FLOAT);
  const eps = cx.scalar(cx.float("epsilon", 1e-5));
  const root = unary(cx, "sqrt", binary(cx, "add", variance, eps, FLOAT));
  const w = reshapeTo(cx, binary(cx, "divide", scale, root, FLOAT), [c, 1, 1, 1]);
  return cx.em.call(
    "vm.op.conv2d",
    [
      cx.em.reg(centered),
      cx.em.reg(w),
      [1, 1],
      [0, 0, 0, 0],
      [1, 1],
      cx.em.imm(c),
      [1, 1],
      cx.em.reg(b),
    ],
    "float32",
    x.shape,
  );
}

/** The operators of this module, by ONNX name. */
export const NORM_OPS: Record<string, OpSpec> = {
  LRN: {
    attrs: ["alpha", "beta", "bias", "size"],
    convert(cx) {
      const x = cx.input(0);
      cx.dtype(x, ["float32"]);
      const size = cx.int("size", 0);
      if (size < 1) throw new Unsupported(`size ${size}`);
      return [
        cx.em.call(
          "vm.op.lrn",
          [
            cx.em.reg(x),
            cx.em.imm(size),
            number(cx, cx.float("alpha", 0.0001)),
            number(cx, cx.float("beta", 0.75)),
            number(cx, cx.float("bias", 1)),
          ],
          "float32",
          x.shape,
        ),
      ];
    },
  },
  GroupNormalization: {
    attrs: ["epsilon", "num_groups", "stash_type"],
    convert(cx) {
      if (cx.opset < 21) throw new Unsupported("GroupNormalization-18 (a scale per group)");
      const x = cx.input(0);
      cx.dtype(x, ["float32"]);
      return [
        cx.em.call(
          "vm.op.group_norm",
          [
            cx.em.reg(x),
            cx.em.reg(cx.input(1)),
            cx.em.reg(cx.input(2)),
            cx.em.imm(cx.int("num_groups", 0)),
            number(cx, cx.float("epsilon", 1e-5)),
          ],
          "float32",
          x.shape,
        ),
      ];
    },
  },
  BatchNormalization: {
    attrs: COMPOSITE_OPS.BatchNormalization.attrs,
    convert(cx) {
      if (cx.int("training_mode", 0) === 0) {
        const inference = cx.node.outputs.slice(1).every((o) => o === "")
          ? batchNormByConv(cx)
          : null;
        return inference === null ? COMPOSITE_OPS.BatchNormalization.convert(cx) : [inference];
      }
      const x = cx.input(0);
      cx.dtype(x, ["float32"]);
      const args = [0, 1, 2, 3, 4].map((i) => cx.em.reg(cx.input(i)));
      const eps = number(cx, cx.float("epsilon", 1e-5));
      const momentum = number(cx, cx.float("momentum", 0.9));
      return cx.node.outputs.map((name, output) =>
        name === "" ? undefined : cx.em.call(
          "vm.op.batch_norm_training",
          [...args, eps, momentum, cx.em.imm(output)],
          "float32",
          output === 0 ? x.shape : [x.shape[1]],
        )
      );
    },
  },
};
