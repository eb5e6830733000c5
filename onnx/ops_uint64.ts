/**
 * UINT64, which relaxvm has no dtype for: the importer holds it as its bits
 * in int64 (onnx_tensor.ts) and tags the value, and the arithmetic,
 * comparison and bitwise operators on it call `vm.op.uint64_binary`
 * (builtins/host_operators/host_math_operators.ts), which reads the bits
 * as unsigned. `Cast` to UINT64 tags the int64 result; from UINT64 only to
 * UINT64 or INT64 (the bits as they are). `Pow` takes a UINT64 exponent of a
 * float base (its value as a float). Any other operator refuses a
 * UINT64 value (import_onnx.ts), so none computes on the bits as signed.
 *
 * @module
 */

import { broadcastShapes, Unsupported, type Value } from "./graph_values.ts";
import { NodeContext } from "./node_context.ts";
import type { OpSpec } from "./op_spec.ts";
import { ELEMENTWISE_OPS } from "./ops_elementwise.ts";
import { INDEX_OPS } from "./ops_index.ts";
import { LOW_PRECISION_OPS } from "./ops_low_precision.ts";
import { WIDENED_OPS } from "./ops_widened.ts";

/** Whether any input of the node is a UINT64 value. */
function anyUint64(cx: NodeContext): boolean {
  for (let i = 0; i < cx.inputCount; i++) if (cx.optional(i)?.format === "uint64") return true;
  return false;
}

/** `a op b` on UINT64 bits: arithmetic results tagged UINT64, comparisons plain bools. */
function binary(cx: NodeContext, a: Value, b: Value, op: string, compares: boolean): Value {
  for (const v of [a, b]) {
    if (v.format !== "uint64") throw new Unsupported(`UINT64 with ${v.format ?? v.dtype}`);
  }
  const out = cx.em.call(
    "vm.op.uint64_binary",
    [cx.em.reg(a), cx.em.reg(b), op],
    compares ? "bool" : "int64",
    broadcastShapes(a.shape, b.shape),
  );
  return compares ? out : { ...out, format: "uint64" };
}

/** `spec`, or on UINT64 inputs the (variadic, left to right) `op` of `uint64_binary`. */
function unsigned(spec: OpSpec, op: string | ((cx: NodeContext) => string), compares = false) {
  return {
    attrs: spec.attrs,
    convert(cx: NodeContext): (Value | undefined)[] {
      if (!anyUint64(cx)) return spec.convert(cx);
      const name = typeof op === "string" ? op : op(cx);
      let y = cx.input(0);
      for (let i = 1; i < cx.inputCount; i++) y = binary(cx, y, cx.input(i), name, compares);
      return [y];
    },
  };
}

/** A `Cast`/`CastLike` that knows UINT64: to it tags the int64 result, from it only as bits. */
function cast(
  spec: OpSpec,
  toUint64: (cx: NodeContext) => boolean,
  toInt64: (cx: NodeContext) => boolean,
): OpSpec {
  return {
    attrs: spec.attrs,
    convert(cx) {
      const x = cx.input(0), to = toUint64(cx);
      if (x.format !== "uint64" && !to) return spec.convert(cx);
      if (x.format === "uint64" && !to && !toInt64(cx)) {
        throw new Unsupported("Cast from UINT64 to a type other than UINT64 or INT64");
      }
      const out = cx.em.call("vm.op.cast", [cx.em.reg(x), "int64"], "int64", x.shape);
      return [to ? { ...out, format: "uint64" } : out];
    },
  };
}

/** UINT64 bits as float32 values: int64's, plus 2^64 where the top bit made them negative. */
function unsignedToFloat(cx: NodeContext, v: Value): Value {
  const call = (op: string, args: Value[], dtype: "float32" | "bool") =>
    cx.em.call(`vm.op.${op}`, args.map((a) => cx.em.reg(a)), dtype, v.shape);
  const f = cx.em.call("vm.op.cast", [cx.em.reg(v), "float32"], "float32", v.shape);
  const negative = call("less", [f, cx.scalar(0)], "bool");
  return call("where", [negative, call("add", [f, cx.scalar(2 ** 64)], "float32"), f], "float32");
}

/** The operators of this module, by ONNX name (they wrap the plain converters). */
export const UINT64_OPS: Record<string, OpSpec> = {
  Add: unsigned(ELEMENTWISE_OPS.Add, "add"),
  Sub: unsigned(ELEMENTWISE_OPS.Sub, "subtract"),
  Mul: unsigned(ELEMENTWISE_OPS.Mul, "multiply"),
  Div: unsigned(ELEMENTWISE_OPS.Div, "divide"),
  Mod: unsigned(ELEMENTWISE_OPS.Mod, "mod"),
  Max: unsigned(ELEMENTWISE_OPS.Max, "maximum"),
  Min: unsigned(ELEMENTWISE_OPS.Min, "minimum"),
  Equal: unsigned(ELEMENTWISE_OPS.Equal, "equal", true),
  Less: unsigned(ELEMENTWISE_OPS.Less, "less", true),
  LessOrEqual: unsigned(ELEMENTWISE_OPS.LessOrEqual, "less_equal", true),
  Greater: unsigned(ELEMENTWISE_OPS.Greater, "greater", true),
  GreaterOrEqual: unsigned(ELEMENTWISE_OPS.GreaterOrEqual, "greater_equal", true),
  BitwiseAnd: unsigned(INDEX_OPS.BitwiseAnd, "bitwise_and"),
  BitwiseOr: unsigned(INDEX_OPS.BitwiseOr, "bitwise_or"),
  BitwiseXor: unsigned(INDEX_OPS.BitwiseXor, "bitwise_xor"),
  BitShift: unsigned(
    INDEX_OPS.BitShift,
    (cx) => cx.string("direction", "") === "LEFT" ? "left_shift" : "right_shift",
  ),
  // A float base by a UINT64 exponent: the exponent's value as a float, then Pow as ever.
  Pow: {
    attrs: WIDENED_OPS.Pow.attrs,
    convert(cx) {
      const x = cx.input(0), e = cx.input(1);
      if (e.format !== "uint64") return WIDENED_OPS.Pow.convert(cx);
      if (x.format !== undefined || x.dtype !== "float32") {
        throw new Unsupported(`Pow of ${x.format ?? x.dtype} by a UINT64 exponent`);
      }
      const inputs = [x, unsignedToFloat(cx, e)];
      return ELEMENTWISE_OPS.Pow.convert(
        new NodeContext(cx.node, cx.opset, cx.em, inputs, cx.made),
      );
    },
  },
  TopK: {
    attrs: INDEX_OPS.TopK.attrs,
    convert(cx) {
      const x = cx.input(0);
      if (x.format !== "uint64") return INDEX_OPS.TopK.convert(cx);
      // The plain converter orders UINT64 bits as unsigned; its values are UINT64 again.
      const [values, indices] = INDEX_OPS.TopK.convert(cx);
      return [values && { ...values, format: "uint64" }, indices];
    },
  },
  Cast: cast(
    LOW_PRECISION_OPS.Cast,
    (cx) => cx.int("to", 0) === 13,
    (cx) => cx.int("to", 0) === 7,
  ),
  CastLike: cast(
    LOW_PRECISION_OPS.CastLike,
    (cx) => cx.input(1).format === "uint64",
    (cx) => cx.input(1).dtype === "int64" && cx.input(1).format === undefined,
  ),
};
