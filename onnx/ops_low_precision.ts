/**
 * The 8- and 4-bit types (float8, FLOAT4E2M1, INT4, UINT4), which relaxvm
 * holds in uint8 and int8 tensors (onnx_tensor.ts's `LOW_PRECISION_TYPES`):
 * `Cast` and `CastLike` to and from them, `QuantizeLinear` to them and
 * `DequantizeLinear` from them, through `vm.op.to_low_precision` and
 * `vm.op.from_low_precision` (builtins/host_operators/), with ONNX's
 * rounding, overflow and `saturate` rules. Everything else goes to the
 * converters of ops_shape.ts and ops_quantize.ts; no other operator takes
 * these values (import_onnx.ts refuses them).
 *
 * @module
 */

import type { TensorDType } from "../ground/dtype.ts";
import {
  isFloatFormat,
  type LowPrecisionFormat,
} from "../builtins/host_operators/low_precision.ts";
import { type HeldFormat, Unsupported, type Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import { dtypeOf, lowPrecisionOf, onnxTypeName } from "./onnx_tensor.ts";
import { FLOAT, type OpSpec } from "./op_spec.ts";
import { binary, unary } from "./ops_elementwise.ts";
import { along, QUANTIZE_OPS } from "./ops_quantize.ts";
import { SHAPE_OPS } from "./ops_shape.ts";

/** What a conversion makes: a dtype, and the format it holds if it is a low-precision type. */
interface Target {
  dtype: TensorDType;
  format?: HeldFormat;
}

/** Whether `f` is a float format held as bits (not INT4/UINT4 values, not UINT64). */
function isFloat(f: HeldFormat | undefined): f is LowPrecisionFormat {
  return f !== undefined && f !== "uint64" && isFloatFormat(f);
}

/** `x` as numbers: a float format's codes decoded to float32; other values as they are. */
function numbers(cx: NodeContext, x: Value): Value {
  if (!isFloat(x.format)) return x;
  return cx.em.call("vm.op.from_low_precision", [cx.em.reg(x), x.format], "float32", x.shape);
}

/**
 * `x` converted to `target`, as ONNX's `Cast` (`saturate` for the float8
 * formats, `roundMode` for FLOAT8E8M0).
 */
function convertTo(
  cx: NodeContext,
  x: Value,
  target: Target,
  saturate: boolean,
  roundMode = "up",
): Value {
  let v = numbers(cx, x);
  if (target.format === undefined) {
    return cx.em.call("vm.op.cast", [cx.em.reg(v), target.dtype], target.dtype, x.shape);
  }
  if (v.dtype === "float16" || v.dtype === "bfloat16" || v.dtype === "bool") {
    v = cx.em.call("vm.op.cast", [cx.em.reg(v), "float32"], "float32", x.shape);
  }
  const out = cx.em.call(
    "vm.op.to_low_precision",
    [cx.em.reg(v), target.format, cx.em.imm(saturate ? 1 : 0), roundMode],
    target.dtype,
    x.shape,
  );
  return { ...out, format: target.format };
}

/** The target of ONNX type `code`. */
function targetOf(code: number): Target {
  const dtype = dtypeOf(code);
  if (dtype === null) throw new Unsupported(`Cast to ${onnxTypeName(code)}`);
  return { dtype, format: lowPrecisionOf(code) };
}

/** The operators of this module, by ONNX name (they wrap the plain converters). */
export const LOW_PRECISION_OPS: Record<string, OpSpec> = {
  Cast: {
    attrs: [...SHAPE_OPS.Cast.attrs, "round_mode"],
    convert(cx) {
      const x = cx.input(0), target = targetOf(cx.int("to", 0));
      const roundMode = cx.string("round_mode", "up");
      if (roundMode !== "up" && target.format !== "float8e8m0") {
        throw new Unsupported(
          `round_mode ${roundMode} for a cast to ${target.format ?? target.dtype}`,
        );
      }
      if (x.format === undefined && target.format === undefined) return SHAPE_OPS.Cast.convert(cx);
      return [convertTo(cx, x, target, cx.int("saturate", 1) !== 0, roundMode)];
    },
  },
  CastLike: {
    attrs: SHAPE_OPS.CastLike.attrs,
    convert(cx) {
      const x = cx.input(0), like = cx.input(1);
      if (x.format === undefined && like.format === undefined) {
        return SHAPE_OPS.CastLike.convert(cx);
      }
      const target = { dtype: like.dtype, format: like.format };
      return [convertTo(cx, x, target, cx.int("saturate", 1) !== 0)];
    },
  },
  QuantizeLinear: {
    attrs: QUANTIZE_OPS.QuantizeLinear.attrs,
    convert(cx) {
      const x = cx.input(0), scale = cx.input(1), zp = cx.optional(2);
      const code = cx.int("output_dtype", 0);
      const held = zp?.format ?? lowPrecisionOf(code);
      if (held === undefined || held === "uint64") return QUANTIZE_OPS.QuantizeLinear.convert(cx);
      const format: LowPrecisionFormat = held;
      if (cx.has("precision")) throw new Unsupported("precision");
      cx.dtype(x, FLOAT);
      const dtype: TensorDType = format === "int4" ? "int8" : "uint8";
      let y = binary(cx, "divide", x, along(cx, scale, x), FLOAT);
      if (isFloatFormat(format)) {
        // float8: the zero point must be 0 (ONNX ignores it); FLOAT4E2M1 adds it.
        if (format === "float4e2m1" && zp !== undefined) {
          y = binary(cx, "add", y, along(cx, numbers(cx, zp), x), FLOAT);
        }
        return [convertTo(cx, y, { dtype, format }, cx.int("saturate", 1) !== 0)];
      }
      // INT4/UINT4: round halves to even, add the zero point, clamp to the type's range.
      y = unary(cx, "round", y);
      if (zp !== undefined) {
        const z = cx.em.call("vm.op.cast", [cx.em.reg(zp), "float32"], "float32", zp.shape);
        y = binary(cx, "add", y, along(cx, z, x), FLOAT);
      }
      const [lo, hi] = format === "int4" ? [-8, 7] : [0, 15];
      y = binary(
        cx,
        "maximum",
        binary(cx, "minimum", y, cx.scalar(hi), FLOAT),
        cx.scalar(lo),
        FLOAT,
      );
      const out = cx.em.call("vm.op.cast", [cx.em.reg(y), dtype], dtype, x.shape);
      return [{ ...out, format }];
    },
  },
  DequantizeLinear: {
    attrs: QUANTIZE_OPS.DequantizeLinear.attrs,
    convert(cx) {
      const x = cx.input(0), scale = cx.input(1), zp = cx.optional(2);
      // INT4/UINT4 are int8/uint8 values, which the plain converter takes.
      if (!isFloat(x.format)) {
        return QUANTIZE_OPS.DequantizeLinear.convert(cx);
      }
      cx.dtype(scale, FLOAT, "scale");
      let y = numbers(cx, x);
      if (zp !== undefined) y = binary(cx, "subtract", y, along(cx, numbers(cx, zp), x), FLOAT);
      return [binary(cx, "multiply", y, along(cx, scale, x), FLOAT)];
    },
  },
};
