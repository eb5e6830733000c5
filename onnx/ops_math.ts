/**
 * `Det`, `QLinearMatMul` and `MatMulInteger`, one call each of `vm.op.det`,
 * `vm.op.qlinear_matmul` and `vm.op.matmul_integer`
 * (builtins/host_operators/host_math_operators.ts). `QLinearMatMul` takes
 * float16 scales as they are (import_onnx.ts does not widen them): its
 * result depends on their rounding.
 *
 * @module
 */

import { broadcastShapes, knownSize, Unsupported } from "./graph_values.ts";
import type { OpSpec } from "./op_spec.ts";

/** The operators of this module, by ONNX name. */
export const MATH_OPS: Record<string, OpSpec> = {
  Det: {
    attrs: [],
    convert(cx) {
      const x = cx.input(0);
      cx.dtype(x, ["float32"]);
      return [cx.em.call("vm.op.det", [cx.em.reg(x)], "float32", x.shape.slice(0, -2))];
    },
  },
  QLinearMatMul: {
    attrs: [],
    convert(cx) {
      const a = cx.input(0), b = cx.input(3), yz = cx.input(7);
      for (const i of [1, 2, 4, 5, 6, 7]) {
        if (knownSize(cx.input(i).shape) !== 1) {
          throw new Unsupported("scales and zero points per row or column");
        }
      }
      if (a.shape.length < 2 || b.shape.length < 2) throw new Unsupported("1-D operands");
      const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2));
      const args = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => cx.em.reg(cx.input(i)));
      return [
        cx.em.call("vm.op.qlinear_matmul", args, yz.dtype, [
          ...batch,
          a.shape[a.shape.length - 2],
          b.shape[b.shape.length - 1],
        ]),
      ];
    },
  },
  MatMulInteger: {
    attrs: [],
    convert(cx) {
      const a = cx.input(0), b = cx.input(1);
      if (a.shape.length !== 2 || b.shape.length !== 2) {
        throw new Unsupported(`MatMulInteger of ranks ${a.shape.length} and ${b.shape.length}`);
      }
      return [
        cx.em.call(
          "vm.op.matmul_integer",
          [cx.em.reg(a), cx.em.reg(b), cx.optionalReg(2), cx.optionalReg(3)],
          "int32",
          [a.shape[0], b.shape[1]],
        ),
      ];
    },
  },
};
