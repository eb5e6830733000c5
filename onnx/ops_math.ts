/**
 * `Det` and `MatMulInteger`, one call each of `vm.op.det` and
 * `vm.op.matmul_integer` (builtins/host_operators/host_math_operators.ts).
 *
 * @module
 */

import { Unsupported } from "./graph_values.ts";
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
  MatMulInteger: {
    attrs: [],
    convert(cx) {
      const a = cx.input(0), b = cx.input(1);
      if (a.shape.length !== 2 || b.shape.length !== 2) {
        throw new Unsupported(`MatMulInteger of ranks ${a.shape.length} and ${b.shape.length}`);
      }
      const zero = (i: number) => {
        const v = cx.optional(i);
        return v === undefined ? cx.em.record("vm.builtin.null_value", [])! : cx.em.reg(v);
      };
      return [
        cx.em.call(
          "vm.op.matmul_integer",
          [cx.em.reg(a), cx.em.reg(b), zero(2), zero(3)],
          "int32",
          [a.shape[0], b.shape[1]],
        ),
      ];
    },
  },
};
