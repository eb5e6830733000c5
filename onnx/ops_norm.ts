/**
 * Normalizations through the host operators of
 * builtins/host_nn/host_norm_operators.ts: `LRN`,
 * `GroupNormalization` (opset 21's scale and bias per channel) and
 * `BatchNormalization` in training mode (its output and the updated
 * running mean and variance); inference-mode `BatchNormalization` stays
 * ops_composite.ts's composition.
 *
 * @module
 */

import type { CallArg } from "../builder/builder_options.ts";
import { Unsupported } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import type { OpSpec } from "./op_spec.ts";
import { COMPOSITE_OPS } from "./ops_composite.ts";

/** A float attribute as a numeric constant of the executable. */
function number(cx: NodeContext, v: number): CallArg {
  return cx.em.ib.convert_constant(v);
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
      if (cx.int("training_mode", 0) === 0) return COMPOSITE_OPS.BatchNormalization.convert(cx);
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
