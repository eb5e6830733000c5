/**
 * `ConvInteger`, `QLinearConv`, `DeformConv` and `MaxPool`'s `Indices`
 * output, through the host
 * operators of builtins/host_nn/host_pool_operators.ts (the values
 * of such a `MaxPool` still come from ops_conv.ts's composition).
 *
 * @module
 */

import { type Dim, knownSize, Unsupported } from "./graph_values.ts";
import { NodeContext } from "./node_context.ts";
import type { OpSpec } from "./op_spec.ts";
import { WIDENED_OPS } from "./ops_widened.ts";

/** The window attributes of `cx`'s node over `r` spatial axes (explicit pads only). */
function windowLists(cx: NodeContext, r: number, kernel: number[]) {
  const autoPad = cx.string("auto_pad", "NOTSET");
  if (autoPad !== "NOTSET") throw new Unsupported(`auto_pad ${autoPad}`);
  if (cx.int("ceil_mode", 0) !== 0) throw new Unsupported("ceil_mode");
  const pads = cx.ints("pads") ?? new Array(2 * r).fill(0);
  const strides = cx.ints("strides") ?? new Array(r).fill(1);
  const dilations = cx.ints("dilations") ?? new Array(r).fill(1);
  const out = (spatial: Dim[]): Dim[] =>
    spatial.map((d, a) =>
      typeof d === "number"
        ? Math.floor(
          (d + pads[a] + pads[a + r] - dilations[a] * (kernel[a] - 1) - 1) / strides[a],
        ) + 1
        : null
    );
  return { pads, strides, dilations, out };
}

/** The operators of this module, by ONNX name. */
export const POOL_OPS: Record<string, OpSpec> = {
  ConvInteger: {
    attrs: ["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"],
    convert(cx) {
      const x = cx.input(0), w = cx.input(1);
      if (cx.int("group", 1) !== 1) throw new Unsupported("groups");
      const kernel = w.shape.slice(2);
      if (!kernel.every((d) => typeof d === "number")) throw new Unsupported("a symbolic kernel");
      const r = kernel.length;
      const win = windowLists(cx, r, kernel as number[]);
      return [
        cx.em.call(
          "vm.op.conv_integer",
          [
            cx.em.reg(x),
            cx.em.reg(w),
            cx.optionalReg(2),
            cx.optionalReg(3),
            win.pads,
            win.strides,
            win.dilations,
          ],
          "int32",
          [x.shape[0], w.shape[0], ...win.out(x.shape.slice(2))],
        ),
      ];
    },
  },
  QLinearConv: {
    attrs: ["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"],
    convert(cx) {
      const x = cx.input(0), w = cx.input(3), yz = cx.input(7);
      if (cx.int("group", 1) !== 1) throw new Unsupported("groups");
      for (const i of [1, 2, 6, 7]) {
        if (knownSize(cx.input(i).shape) !== 1) {
          throw new Unsupported("scales or zero points per axis");
        }
      }
      const kernel = w.shape.slice(2);
      if (!kernel.every((d) => typeof d === "number")) throw new Unsupported("a symbolic kernel");
      const win = windowLists(cx, kernel.length, kernel as number[]);
      const bias = cx.optional(8);
      return [
        cx.em.call(
          "vm.op.qlinear_conv",
          [
            ...[0, 1, 2, 3, 4, 5, 6, 7].map((i) => cx.em.reg(cx.input(i))),
            cx.regOrNull(bias),
            win.pads,
            win.strides,
            win.dilations,
          ],
          yz.dtype,
          [x.shape[0], w.shape[0], ...win.out(x.shape.slice(2))],
        ),
      ];
    },
  },
  DeformConv: {
    attrs: ["dilations", "group", "kernel_shape", "offset_group", "pads", "strides"],
    convert(cx) {
      const x = cx.input(0), w = cx.input(1), offset = cx.input(2);
      cx.dtype(x, ["float32"]);
      const kernel = w.shape.slice(2);
      if (x.shape.length !== 4 || !kernel.every((d) => typeof d === "number")) {
        throw new Unsupported("DeformConv other than 2-D with a known kernel");
      }
      const pads = cx.ints("pads") ?? [0, 0, 0, 0];
      const strides = cx.ints("strides") ?? [1, 1];
      const dilations = cx.ints("dilations") ?? [1, 1];
      return [
        cx.em.call(
          "vm.op.deform_conv",
          [
            cx.em.reg(x),
            cx.em.reg(w),
            cx.em.reg(offset),
            cx.optionalReg(3),
            cx.optionalReg(4),
            pads,
            strides,
            dilations,
            cx.em.imm(cx.int("group", 1)),
            cx.em.imm(cx.int("offset_group", 1)),
          ],
          "float32",
          [x.shape[0], w.shape[0], offset.shape[2], offset.shape[3]],
        ),
      ];
    },
  },
  MaxPool: {
    attrs: WIDENED_OPS.MaxPool.attrs,
    convert(cx) {
      const wantsIndices = cx.node.outputs.length > 1 && cx.node.outputs[1] !== "";
      if (!wantsIndices) return WIDENED_OPS.MaxPool.convert(cx);
      const x = cx.input(0);
      cx.dtype(x, ["float32"]);
      const kernel = cx.ints("kernel_shape") ?? [];
      const win = windowLists(cx, kernel.length, kernel);
      // The values as the node without its second output converts them.
      const node = { ...cx.node, outputs: [cx.node.outputs[0]] };
      const [values] = WIDENED_OPS.MaxPool.convert(
        new NodeContext(node, cx.opset, cx.em, [x], cx.made),
      );
      const indices = cx.em.call(
        "vm.op.max_pool_indices",
        [
          cx.em.reg(x),
          kernel,
          win.pads,
          win.strides,
          win.dilations,
          cx.em.imm(cx.int("storage_order", 0)),
        ],
        "int64",
        [x.shape[0], x.shape[1], ...win.out(x.shape.slice(2))],
      );
      return [values, indices];
    },
  },
};
