/**
 * Signal operators: `HannWindow`, `HammingWindow`, `BlackmanWindow`,
 * `MelWeightMatrix`, `DFT` and `STFT`, one call each of `vm.op.window`,
 * `vm.op.mel_weight_matrix`, `vm.op.dft` and `vm.op.stft`
 * (builtins/host_nn/host_signal_operators.ts). A window's size and a
 * transform's length may be graph inputs, read when the program runs.
 *
 * @module
 */

import type { CallArg } from "../builder/builder_options.ts";
import { type Dim, normAxis, Unsupported } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import { dtypeOf, onnxTypeName } from "./onnx_tensor.ts";
import type { OpSpec } from "./op_spec.ts";

/** The one integer of known input `i`, or null. */
function knownInt(cx: NodeContext, i: number): number | null {
  const ints = cx.optional(i)?.ints;
  return ints !== undefined && ints.length === 1 && typeof ints[0] === "number" ? ints[0] : null;
}

/** A window operator of `kind`. */
function window(kind: string): OpSpec {
  return {
    attrs: ["output_datatype", "periodic"],
    convert(cx) {
      const code = cx.int("output_datatype", 1);
      const dtype = dtypeOf(code);
      if (dtype === null || !["float32", "float64", "int32", "int64"].includes(dtype)) {
        throw new Unsupported(`a window of ${onnxTypeName(code)}`);
      }
      return [
        cx.em.call(
          "vm.op.window",
          [cx.em.reg(cx.input(0)), kind, cx.em.imm(cx.int("periodic", 1)), dtype],
          dtype,
          [knownInt(cx, 0)],
        ),
      ];
    },
  };
}

/** The operators of this module, by ONNX name. */
export const SIGNAL_OPS: Record<string, OpSpec> = {
  HannWindow: window("hann"),
  HammingWindow: window("hamming"),
  BlackmanWindow: window("blackman"),
  MelWeightMatrix: {
    attrs: ["output_datatype"],
    convert(cx) {
      const code = cx.int("output_datatype", 1);
      const dtype = dtypeOf(code);
      if (dtype !== "float32" && dtype !== "float64") {
        throw new Unsupported(`a matrix of ${onnxTypeName(code)}`);
      }
      const length = knownInt(cx, 1), bins = knownInt(cx, 0);
      const args = [0, 1, 2, 3, 4].map((i) => cx.em.reg(cx.input(i)));
      return [
        cx.em.call("vm.op.mel_weight_matrix", [...args, dtype], dtype, [
          length === null ? null : Math.floor(length / 2) + 1,
          bins,
        ]),
      ];
    },
  },
  DFT: {
    attrs: ["axis", "inverse", "onesided"],
    convert(cx) {
      const x = cx.input(0), r = x.shape.length;
      // Opset 20 moved the axis from an attribute (default 1) to an input (default -2).
      const given = cx.opset >= 20 ? knownInt(cx, 2) : cx.int("axis", 1);
      const onesided = cx.int("onesided", 0);
      let axisArg: CallArg, shape: Dim[];
      if (cx.opset >= 20 && cx.optional(2) !== undefined && given === null) {
        // An axis read when it runs: every size but the last is bound from the result.
        axisArg = cx.em.reg(cx.input(2));
        shape = [...x.shape.slice(0, -1).map(() => null), 2];
      } else {
        const axis = normAxis(given ?? -2, r - 1);
        axisArg = cx.em.imm(axis);
        const length = cx.optional(1) === undefined ? x.shape[axis] : knownInt(cx, 1);
        shape = [...x.shape];
        shape[axis] = typeof length === "number" && onesided ? Math.floor(length / 2) + 1 : length;
        shape[r - 1] = 2;
      }
      const lengthReg = cx.optionalReg(1);
      return [
        cx.em.call(
          "vm.op.dft",
          [
            cx.em.reg(x),
            lengthReg,
            axisArg,
            cx.em.imm(cx.int("inverse", 0)),
            cx.em.imm(onesided),
          ],
          x.dtype,
          shape,
        ),
      ];
    },
  },
  STFT: {
    attrs: ["onesided"],
    convert(cx) {
      const x = cx.input(0), onesided = cx.int("onesided", 1);
      if (x.shape.length !== 3) throw new Unsupported(`a signal of rank ${x.shape.length}`);
      const w = cx.optional(2), given = cx.optional(3) === undefined ? null : knownInt(cx, 3);
      // The sizes, where the step, the frame's length and the signal's are known.
      const length = cx.optional(3) !== undefined
        ? given
        : w !== undefined
        ? w.shape[0]
        : x.shape[1];
      const step = knownInt(cx, 1), total = x.shape[1];
      const frames = typeof length === "number" && step !== null && typeof total === "number"
        ? 1 + Math.floor((total - length) / step)
        : null;
      const bins = typeof length === "number"
        ? (onesided ? Math.floor(length / 2) + 1 : length)
        : null;
      const none = () => cx.em.record("vm.builtin.null_value", [])!;
      return [
        cx.em.call(
          "vm.op.stft",
          [
            cx.em.reg(x),
            cx.em.reg(cx.input(1)),
            w === undefined ? none() : cx.em.reg(w),
            cx.optional(3) === undefined ? none() : cx.em.reg(cx.input(3)),
            cx.em.imm(onesided),
          ],
          x.dtype,
          [x.shape[0], frames, bins, 2],
        ),
      ];
    },
  },
};
