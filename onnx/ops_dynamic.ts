/**
 * Shape operators whose sizes arrive only at run time: `Slice`, `Split`,
 * `Tile`, `Expand`, `ConstantOfShape` and `Range` convert as before
 * (ops_shape.ts, ops_composite.ts) when their bounds, sizes or shapes are
 * known at import, and otherwise call the host operators of
 * builtins/host_operators/host_shape_operators.ts (`vm.op.dynamic_strided_slice`,
 * `split_section`, `tile`, `expand`, `full`, `arange`; `dynamic_reshape` for
 * a `Reshape` whose target ops_shape.ts cannot work out), which read them
 * when the program runs; the result's dimensions are bound from the tensor the
 * call made. `Pad` always goes that way (`vm.op.pad`: its four modes and
 * cropping by negative pads).
 *
 * @module
 */

import { tensor } from "../devices/tensor.ts";
import { type Dim, normAxis, Unsupported, type Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import type { OpSpec } from "./op_spec.ts";
import { COMPOSITE_OPS } from "./ops_composite.ts";
import { PAD_OPS } from "./ops_pad.ts";
import { ELEMENTWISE_OPS } from "./ops_elementwise.ts";
import { SHAPE_OPS } from "./ops_shape.ts";

/** Whether input `i` is absent or its integers are all known at import. */
function known(cx: NodeContext, i: number): boolean {
  const v = cx.optional(i);
  return v === undefined || (v.ints !== undefined && v.ints.every((d) => typeof d === "number"));
}

/** Whether input `i` is absent or its integers are each a number or a shape symbol. */
function symbolic(cx: NodeContext, i: number): boolean {
  const v = cx.optional(i);
  return v === undefined || (v.ints !== undefined && v.ints.every((d) => d !== null));
}

/**
 * `spec` when inputs `runtime` are known at import; else `dynamic`, which
 * reads them when the program runs.
 */
function orAtRunTime(
  spec: OpSpec,
  runtime: readonly number[],
  dynamic: (cx: NodeContext) => (Value | undefined)[],
  symbols = false,
): OpSpec {
  return {
    attrs: spec.attrs,
    convert(cx) {
      if (runtime.every((i) => known(cx, i))) return spec.convert(cx);
      // Sizes that are shape symbols stay on the device (`spec` binds them through the shape
      // heap); what it cannot express goes to the host.
      if (symbols && runtime.every((i) => symbolic(cx, i))) {
        try {
          return spec.convert(cx);
        } catch (e) {
          if (!(e instanceof Unsupported)) throw e;
        }
      }
      return dynamic(cx);
    },
  };
}

/** The length of 1-D input `i` (a shape, pads), which must be known to give the result's rank. */
function lengthOf(cx: NodeContext, i: number, what: string): number {
  const v = cx.input(i);
  const n = v.shape.length === 1 ? v.shape[0] : null;
  if (typeof n !== "number") throw new Unsupported(`${what} (input ${i}) of unknown length`);
  return n;
}

/** Rank-`rank` dims all unknown until the call that makes them has run. */
function unknownDims(rank: number): Dim[] {
  return new Array<Dim>(rank).fill(null);
}

/** The operators of this module, by ONNX name. */
export const DYNAMIC_OPS: Record<string, OpSpec> = {
  // Folded on known integers, as Add and Sub are: functions write `Neg(axis)` into shape arithmetic.
  Neg: {
    attrs: ELEMENTWISE_OPS.Neg.attrs,
    convert(cx) {
      const x = cx.input(0), ints = x.ints;
      if (
        ints !== undefined && ints.every((d) => typeof d === "number") && x.tensor !== undefined
      ) {
        return [cx.knownValue((ints as number[]).map((d) => -d), [...x.tensor.shape], x.dtype)];
      }
      return ELEMENTWISE_OPS.Neg.convert(cx);
    },
  },
  Reshape: {
    attrs: SHAPE_OPS.Reshape.attrs,
    convert(cx) {
      // The shape arithmetic of ops_shape.ts first; what it cannot decide is read at run time.
      try {
        return SHAPE_OPS.Reshape.convert(cx);
      } catch (e) {
        if (!(e instanceof Unsupported)) throw e;
      }
      const x = cx.input(0);
      const args = [cx.em.reg(x), cx.em.reg(cx.input(1)), cx.em.imm(cx.int("allowzero", 0))];
      return [
        cx.em.call("vm.op.dynamic_reshape", args, x.dtype, unknownDims(lengthOf(cx, 1, "shape"))),
      ];
    },
  },
  Slice: orAtRunTime(SHAPE_OPS.Slice, [1, 2, 3, 4], (cx) => {
    if (cx.opset < 10) throw new Unsupported("Slice-1 bounds are attributes");
    const x = cx.input(0), r = x.shape.length;
    const shape: Dim[] = [...x.shape];
    if (known(cx, 3) && cx.optional(3) !== undefined) {
      for (const a of cx.knownInts(3, "axes")) shape[normAxis(a, r)] = null;
    } else if (cx.optional(3) === undefined) {
      const n = lengthOf(cx, 1, "starts");
      for (let a = 0; a < n && a < r; a++) shape[a] = null;
    } else shape.fill(null);
    const args = [x, cx.input(1), cx.input(2)].map((v) => cx.em.reg(v));
    return [
      cx.em.call(
        "vm.op.dynamic_strided_slice",
        [...args, cx.optionalReg(3), cx.optionalReg(4)],
        x.dtype,
        shape,
      ),
    ];
  }, true),
  Split: orAtRunTime(SHAPE_OPS.Split, [1], (cx) => {
    const x = cx.input(0), axis = normAxis(cx.int("axis", 0), x.shape.length);
    const sizes = cx.em.reg(cx.input(1));
    return cx.node.outputs.map((_, i) => {
      const shape = [...x.shape];
      shape[axis] = null;
      return cx.em.call(
        "vm.op.split_section",
        [cx.em.reg(x), sizes, cx.em.imm(axis), cx.em.imm(i)],
        x.dtype,
        shape,
      );
    });
  }),
  Tile: orAtRunTime(COMPOSITE_OPS.Tile, [1], (cx) => {
    const x = cx.input(0);
    return [
      cx.em.call(
        "vm.op.tile",
        [cx.em.reg(x), cx.em.reg(cx.input(1))],
        x.dtype,
        unknownDims(x.shape.length),
      ),
    ];
  }),
  Expand: orAtRunTime(SHAPE_OPS.Expand, [1], (cx) => {
    const x = cx.input(0);
    const rank = Math.max(x.shape.length, lengthOf(cx, 1, "shape"));
    return [
      cx.em.call(
        "vm.op.expand",
        [cx.em.reg(x), cx.em.reg(cx.input(1))],
        x.dtype,
        unknownDims(rank),
      ),
    ];
  }, true),
  ConstantOfShape: orAtRunTime(SHAPE_OPS.ConstantOfShape, [0], (cx) => {
    const s = cx.input(0), rank = lengthOf(cx, 0, "shape");
    const value = cx.tensorAttr("value") ?? tensor([0], { shape: [1] });
    if (!cx.made.includes(value)) cx.made.push(value);
    // Symbolic sizes (Shape of a graph input) are a shape value; computed ones a tensor.
    const shape = s.ints !== undefined ? cx.em.shape(s.ints) : cx.em.reg(s);
    const dims = s.ints !== undefined ? [...s.ints] : unknownDims(rank);
    return [
      cx.em.call("vm.op.full", [shape, cx.em.reg(cx.fromTensor(value))], value.dtype, dims),
    ];
  }),
  Range: orAtRunTime(SHAPE_OPS.Range, [0, 1, 2], (cx) => {
    const start = cx.input(0);
    const args = [0, 1, 2].map((i) => cx.em.reg(cx.input(i)));
    return [cx.em.call("vm.op.arange", args, start.dtype, [null])];
  }),
  // Pads known at import: slices and concatenations on the device (ops_pad.ts);
  // otherwise vm.op.pad reads them when the program runs.
  Pad: {
    attrs: PAD_OPS.Pad.attrs,
    convert(cx) {
      const constant = cx.opset < 11 ? undefined : cx.optional(2);
      if (
        (cx.opset < 11 || (known(cx, 1) && known(cx, 3))) &&
        (constant === undefined || constant.tensor !== undefined)
      ) return PAD_OPS.Pad.convert(cx);
      const x = cx.input(0), r = x.shape.length;
      const mode = cx.string("mode", "constant");
      let pads: Value, value: Value | undefined, axes: Value | undefined;
      if (cx.opset < 11) {
        const p = cx.ints("pads") ?? [];
        pads = cx.knownValue(p, [p.length]);
        value = cx.scalar(cx.float("value", 0), x.dtype);
      } else {
        pads = cx.input(1);
        value = cx.optional(2);
        axes = cx.optional(3);
      }
      // The result's sizes, where pads, axes and x's sizes are known.
      let shape = unknownDims(r);
      if (known(cx, 3) && (cx.opset < 11 || known(cx, 1))) {
        const amounts = (pads.ints ?? []) as number[];
        const ax = axes === undefined
          ? x.shape.map((_, i) => i)
          : (axes.ints as number[]).map((a) => normAxis(a, r));
        if (amounts.length !== 2 * ax.length) {
          throw new Unsupported(`${amounts.length} pads for ${ax.length} axes`);
        }
        shape = [...x.shape];
        ax.forEach((a, k) => {
          const d = shape[a];
          shape[a] = typeof d === "number" ? d + amounts[k] + amounts[k + ax.length] : null;
        });
      }
      const none = () => cx.em.record("vm.builtin.null_value", [])!;
      const v = value === undefined ? none() : cx.em.reg(value);
      const a = axes === undefined ? none() : cx.em.reg(axes);
      return [cx.em.call("vm.op.pad", [cx.em.reg(x), cx.em.reg(pads), v, mode, a], x.dtype, shape)];
    },
  },
};
