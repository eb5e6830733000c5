/**
 * Cases the plain converters refuse for want of a kernel, done through one
 * they have: `Where` on 8- and 16-bit integers (in int32), `ReduceMax` and
 * `ReduceMin` on bools (in int32) and over an empty axis known at import (ONNX's -∞ and +∞,
 * as a constant), `MaxPool` on 8-bit integers (in float32, which holds them
 * exactly), `Dropout`'s mask and a training-mode `Dropout` whose ratio is 0
 * (both the identity; a mode or ratio known only at run time goes to
 * `vm.op.dropout`, which refuses to drop anything), and `Pow` on integers
 * (`vm.op.power`, on the host). An empty axis given at run time goes to
 * `vm.op.reduce_extreme`.
 * Each result equals what ONNX's reference gives for the dtype asked.
 *
 * @module
 */

import type { TensorDType } from "../ground/dtype.ts";
import { tensor } from "../devices/tensor.ts";
import { broadcastShapes, knownSize, normAxis, type Value } from "./graph_values.ts";
import { NodeContext } from "./node_context.ts";
import type { OpSpec } from "./op_spec.ts";
import { CONV_OPS } from "./ops_conv.ts";
import { ELEMENTWISE_OPS } from "./ops_elementwise.ts";
import { NN_OPS } from "./ops_nn.ts";
import { SHAPE_OPS } from "./ops_shape.ts";

/** `v` cast to `dtype` (a copy when it has it already). */
function cast(cx: NodeContext, v: Value, dtype: TensorDType): Value {
  return cx.em.call("vm.op.cast", [cx.em.reg(v), dtype], dtype, v.shape);
}

/**
 * `spec` on `inputs` cast to `wide` when input `at` has one of `narrow`,
 * its outputs of `wide` cast back; else `spec` as it is.
 */
function through(
  spec: OpSpec,
  narrow: readonly TensorDType[],
  wide: TensorDType,
  at: number,
  widened: readonly number[],
): OpSpec {
  return {
    attrs: spec.attrs,
    convert(cx) {
      const dt = cx.optional(at)?.dtype;
      if (dt === undefined || !narrow.includes(dt)) return spec.convert(cx);
      const inputs: (Value | undefined)[] = [];
      for (let i = 0; i < cx.inputCount; i++) {
        const v = cx.optional(i);
        inputs.push(
          v !== undefined && widened.includes(i) && v.dtype === dt ? cast(cx, v, wide) : v,
        );
      }
      const outputs = spec.convert(new NodeContext(cx.node, cx.opset, cx.em, inputs, cx.made));
      return outputs.map((v) => v === undefined || v.dtype !== wide ? v : cast(cx, v, dt));
    },
  };
}

/**
 * ReduceMax or ReduceMin (`sign` 1 or -1) as `spec`, except over an empty
 * axis of a float32 input of known shape: the reduction's identity, -∞ or
 * +∞, as ONNX's reference gives.
 */
function emptyAware(spec: OpSpec, sign: number): OpSpec {
  return {
    attrs: spec.attrs,
    convert(cx) {
      const x = cx.input(0), r = x.shape.length;
      if (x.dtype !== "float32" || knownSize(x.shape) !== 0) return spec.convert(cx);
      const axesInput = cx.opset >= 18 ? cx.optional(1) : undefined;
      if (axesInput !== undefined && axesInput.ints === undefined) {
        // Axes given at run time: the host reduction, which knows the empty set's identity.
        const count = axesInput.shape[0];
        if (typeof count !== "number") return spec.convert(cx);
        const keepAll = cx.int("keepdims", 1) === 1;
        return [
          cx.em.call(
            "vm.op.reduce_extreme",
            [
              cx.em.reg(x),
              cx.em.reg(axesInput),
              cx.em.imm(keepAll ? 1 : 0),
              cx.em.imm(sign > 0 ? 1 : 0),
            ],
            "float32",
            new Array(keepAll ? r : r - count).fill(null),
          ),
        ];
      }
      const given = axesInput !== undefined ? cx.knownInts(1, "axes") : cx.ints("axes");
      if ((given === undefined || given.length === 0) && cx.int("noop_with_empty_axes", 0) === 1) {
        return spec.convert(cx);
      }
      const axes = given === undefined || given.length === 0
        ? x.shape.map((_, i) => i)
        : given.map((a) => normAxis(a, r));
      const keep = cx.int("keepdims", 1) === 1;
      const shape = (x.shape as number[]).flatMap((d, i) =>
        axes.includes(i) ? (keep ? [1] : []) : [d]
      );
      if (knownSize(shape) === 0) return spec.convert(cx);
      const n = knownSize(shape)!;
      const t = tensor(new Float32Array(n).fill(-sign * Infinity), { shape });
      cx.made.push(t);
      return [cx.fromTensor(t)];
    },
  };
}

/** A bool tensor of `x`'s shape, all true: the mask of a Dropout that drops nothing. */
function allTrue(cx: NodeContext, x: Value): Value {
  const one = tensor(new Uint8Array([1]), { dtype: "bool", shape: [1] });
  cx.made.push(one);
  return cx.em.call(
    "vm.op.full",
    [cx.em.shape(x.shape), cx.em.reg(cx.fromTensor(one))],
    "bool",
    x.shape,
  );
}

/** The operators of this module, by ONNX name (they wrap the plain converters). */
export const WIDENED_OPS: Record<string, OpSpec> = {
  Where: through(ELEMENTWISE_OPS.Where, ["int8", "int16", "uint8", "uint16"], "int32", 1, [1, 2]),
  ReduceMax: through(emptyAware(NN_OPS.ReduceMax, 1), ["bool"], "int32", 0, [0]),
  ReduceMin: through(emptyAware(NN_OPS.ReduceMin, -1), ["bool"], "int32", 0, [0]),
  MaxPool: through(CONV_OPS.MaxPool, ["int8", "uint8"], "float32", 0, [0]),
  Dropout: {
    attrs: SHAPE_OPS.Dropout.attrs,
    convert(cx) {
      const x = cx.input(0), ratio = cx.optional(1), mode = cx.optional(2);
      const known = (v: Value | undefined) =>
        v?.tensor === undefined ? undefined : Number(v.tensor.dataSync()[0]);
      const wantsMask = cx.node.outputs.length > 1 && cx.node.outputs[1] !== "";
      if (
        mode !== undefined &&
        (known(mode) === undefined || (known(mode) !== 0 && known(ratio) === undefined))
      ) {
        // Training mode or ratio known only at run time: vm.op.dropout checks that nothing drops.
        const y = cx.em.call(
          "vm.op.dropout",
          [cx.em.reg(x), cx.regOrNull(ratio), cx.regOrNull(mode)],
          x.dtype,
          x.shape,
        );
        return wantsMask ? [y, allTrue(cx, x)] : [y];
      }
      const training = mode !== undefined && known(mode) !== 0;
      // The identity: inference, or training that drops nothing. Else the plain converter refuses.
      if (training && known(ratio) !== 0) return SHAPE_OPS.Dropout.convert(cx);
      if (!training && !wantsMask) return SHAPE_OPS.Dropout.convert(cx);
      const y = cx.em.call("vm.op.cast", [cx.em.reg(x), x.dtype], x.dtype, x.shape);
      return wantsMask ? [y, allTrue(cx, x)] : [y];
    },
  },
  Pow: {
    attrs: ELEMENTWISE_OPS.Pow.attrs,
    convert(cx) {
      const x = cx.input(0), e = cx.input(1);
      if (!["int32", "int64"].includes(x.dtype)) return ELEMENTWISE_OPS.Pow.convert(cx);
      return [
        cx.em.call(
          "vm.op.power",
          [cx.em.reg(x), cx.em.reg(e)],
          x.dtype,
          broadcastShapes(x.shape, e.shape),
        ),
      ];
    },
  },
};
