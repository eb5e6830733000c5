/**
 * Image and sequence operators with no composition in `vm.op.*`:
 * `GridSample`, `AffineGrid`, `RoiAlign`, `NonMaxSuppression`, `Col2Im`,
 * `MaxUnpool`, `ReverseSequence` and `CenterCropPad`, each one call of the host operator of the same
 * meaning (builtins/host_nn/host_vision_operators.ts).
 *
 * @module
 */

import { type Dim, knownSize, Unsupported, type Value } from "./graph_values.ts";
import type { OpSpec } from "./op_spec.ts";

/** The sizes of `v`, which must all be known. */
function sizes(v: Value, what: string): number[] {
  if (knownSize(v.shape) === null) throw new Unsupported(`${what} of unknown shape`);
  return v.shape as number[];
}

/** GridSample's modes by their opset-16 and opset-20 names. */
const GRID_MODES: Record<string, string> = {
  bilinear: "linear",
  linear: "linear",
  nearest: "nearest",
  bicubic: "cubic",
  cubic: "cubic",
};

/** The operators of this module, by ONNX name. */
export const VISION_OPS: Record<string, OpSpec> = {
  GridSample: {
    attrs: ["align_corners", "mode", "padding_mode"],
    convert(cx) {
      const x = cx.input(0), grid = cx.input(1);
      cx.dtype(x, ["float32"]);
      const mode = GRID_MODES[cx.string("mode", "linear")];
      if (mode === undefined) throw new Unsupported(`mode ${cx.string("mode", "")}`);
      const r = x.shape.length - 2;
      const shape: Dim[] = [x.shape[0], x.shape[1], ...grid.shape.slice(1, r + 1)];
      return [
        cx.em.call(
          "vm.op.grid_sample",
          [
            cx.em.reg(x),
            cx.em.reg(grid),
            mode,
            cx.string("padding_mode", "zeros"),
            cx.em.imm(cx.int("align_corners", 0)),
          ],
          "float32",
          shape,
        ),
      ];
    },
  },
  AffineGrid: {
    attrs: ["align_corners"],
    convert(cx) {
      const theta = cx.input(0), size = cx.input(1);
      cx.dtype(theta, ["float32"]);
      const n = size.shape[0];
      if (typeof n !== "number") throw new Unsupported("a size of unknown length");
      const dims: Dim[] = size.ints !== undefined
        ? [...size.ints.slice(2)]
        : new Array(n - 2).fill(null);
      return [
        cx.em.call(
          "vm.op.affine_grid",
          [cx.em.reg(theta), cx.em.reg(size), cx.em.imm(cx.int("align_corners", 0))],
          "float32",
          [theta.shape[0], ...dims, n - 2],
        ),
      ];
    },
  },
  CenterCropPad: {
    attrs: ["axes"],
    convert(cx) {
      const x = cx.input(0), shape = cx.input(1);
      const axes = cx.ints("axes");
      const r = x.shape.length;
      const outShape: Dim[] = [...x.shape];
      const sizes = shape.ints;
      (axes ?? x.shape.map((_, i) => i)).forEach((a, k) => {
        const axis = a < 0 ? a + r : a;
        outShape[axis] = sizes !== undefined ? sizes[k] : null;
      });
      const axesReg = axes === undefined
        ? cx.em.record("vm.builtin.null_value", [])!
        : cx.em.reg(cx.knownValue(axes, [axes.length]));
      return [
        cx.em.call(
          "vm.op.center_crop_pad",
          [cx.em.reg(x), cx.em.reg(shape), axesReg],
          x.dtype,
          outShape,
        ),
      ];
    },
  },
  RoiAlign: {
    attrs: [
      "coordinate_transformation_mode",
      "mode",
      "output_height",
      "output_width",
      "sampling_ratio",
      "spatial_scale",
    ],
    convert(cx) {
      const x = cx.input(0), rois = cx.input(1);
      cx.dtype(x, ["float32"]);
      const h = cx.int("output_height", 1), w = cx.int("output_width", 1);
      // Opset 16's default is half_pixel; opset 10 had only output_half_pixel.
      const ctm = cx.string(
        "coordinate_transformation_mode",
        cx.opset >= 16 ? "half_pixel" : "output_half_pixel",
      );
      return [
        cx.em.call(
          "vm.op.roi_align",
          [
            cx.em.reg(x),
            cx.em.reg(rois),
            cx.em.reg(cx.input(2)),
            cx.string("mode", "avg"),
            cx.em.imm(h),
            cx.em.imm(w),
            cx.em.imm(cx.int("sampling_ratio", 0)),
            cx.em.ib.convert_constant(cx.float("spatial_scale", 1)),
            cx.em.imm(ctm === "half_pixel" ? 1 : 0),
          ],
          "float32",
          [rois.shape[0], x.shape[1], h, w],
        ),
      ];
    },
  },
  NonMaxSuppression: {
    attrs: ["center_point_box"],
    convert(cx) {
      const args = [cx.em.reg(cx.input(0)), cx.em.reg(cx.input(1))];
      for (const i of [2, 3, 4]) args.push(cx.optionalReg(i));
      return [
        cx.em.call(
          "vm.op.non_max_suppression",
          [...args, cx.em.imm(cx.int("center_point_box", 0))],
          "int64",
          [null, 3],
        ),
      ];
    },
  },
  Col2Im: {
    attrs: ["dilations", "pads", "strides"],
    convert(cx) {
      const x = cx.input(0), image = cx.input(1), block = cx.input(2);
      const r = image.shape[0];
      if (image.shape.length !== 1 || typeof r !== "number") {
        throw new Unsupported("image_shape of unknown length");
      }
      // The channels are known when the block is; else bound from the result.
      const cols = x.shape[1];
      const kernel = block.ints?.every((d) => typeof d === "number")
        ? (block.ints as number[]).reduce((p, q) => p * q, 1)
        : null;
      const channels = typeof cols === "number" && kernel !== null ? cols / kernel : null;
      const dims: Dim[] = image.ints !== undefined ? [...image.ints] : new Array(r).fill(null);
      const list = (name: string) => {
        const v = cx.ints(name);
        return v === undefined ? cx.em.record("vm.builtin.null_value", [])! : v;
      };
      return [
        cx.em.call(
          "vm.op.col2im",
          [
            cx.em.reg(x),
            cx.em.reg(image),
            cx.em.reg(block),
            list("dilations"),
            list("pads"),
            list("strides"),
          ],
          "float32",
          [x.shape[0], channels, ...dims],
        ),
      ];
    },
  },
  MaxUnpool: {
    attrs: ["kernel_shape", "pads", "strides"],
    convert(cx) {
      const x = cx.input(0), dims = sizes(x, "input");
      const kernel = cx.ints("kernel_shape") ?? [];
      const r = kernel.length;
      const pads = cx.ints("pads") ?? new Array(2 * r).fill(0);
      const strides = cx.ints("strides") ?? kernel.map(() => 1);
      const inferred = [
        dims[0],
        dims[1],
        ...kernel.map((k, a) => (dims[a + 2] - 1) * strides[a] - (pads[a] + pads[a + r]) + k),
      ];
      const given = cx.optional(2);
      const out: Dim[] = given === undefined
        ? inferred
        : given.ints !== undefined
        ? [...given.ints]
        : new Array(dims.length).fill(null);
      return [
        cx.em.call(
          "vm.op.max_unpool",
          [cx.em.reg(x), cx.em.reg(cx.input(1)), inferred, cx.optionalReg(2)],
          x.dtype,
          out,
        ),
      ];
    },
  },
  ReverseSequence: {
    attrs: ["batch_axis", "time_axis"],
    convert(cx) {
      const x = cx.input(0);
      return [
        cx.em.call(
          "vm.op.reverse_sequence",
          [
            cx.em.reg(x),
            cx.em.reg(cx.input(1)),
            cx.em.imm(cx.int("batch_axis", 1)),
            cx.em.imm(cx.int("time_axis", 0)),
          ],
          x.dtype,
          x.shape,
        ),
      ];
    },
  },
};
