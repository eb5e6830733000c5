/**
 * Linear quantization: `DequantizeLinear` (`(x − zero_point) · scale`) and
 * `QuantizeLinear` (`saturate(round(x / scale) + zero_point)`, halves to
 * even), per tensor, per axis (a 1-D scale along `axis`) or blocked (each
 * scale covering `block_size` elements along `axis`), for 8- and 16-bit
 * integers; the integers compute in int32. The float8 and 4-bit types go
 * through ops_low_precision.ts, which wraps these converters.
 *
 * @module
 */

import type { TensorDType } from "../ground/dtype.ts";
import { intTensor } from "./node_context.ts";
import { normAxis, Unsupported, type Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import { FLOAT, type OpSpec } from "./op_spec.ts";
import { binary, unary } from "./ops_elementwise.ts";
import { reshapeTo } from "./ops_shape.ts";

/** The integer types quantization targets here, and their ranges. */
const RANGES: Partial<Record<TensorDType, [number, number]>> = {
  int8: [-128, 127],
  uint8: [0, 255],
  int16: [-32768, 32767],
  uint16: [0, 65535],
};

/** The ONNX data type codes of those (`output_dtype`). */
const CODES: Record<number, TensorDType> = { 2: "uint8", 3: "int8", 4: "uint16", 5: "int16" };

function cast(cx: NodeContext, v: Value, dtype: TensorDType): Value {
  return cx.em.call("vm.op.cast", [cx.em.reg(v), dtype], dtype, v.shape);
}

/** `p` (a scale or zero point) made to broadcast against `x`: per tensor, per axis or blocked. */
export function along(cx: NodeContext, p: Value, x: Value): Value {
  const r = x.shape.length;
  if (p.shape.length === 0 || (p.shape.length === 1 && p.shape[0] === 1)) return p;
  const axis = normAxis(cx.int("axis", 1), r);
  const blockSize = cx.int("block_size", 0);
  if (blockSize > 0) {
    // Blocked: scale [.., ceil(n / b), ..] repeated b times along the axis.
    const n = x.shape[axis];
    if (typeof n !== "number") throw new Unsupported("blocked quantization over a symbolic axis");
    const idx = intTensor(
      Array.from({ length: n }, (_, i) => Math.floor(i / blockSize)),
      [n],
      "int32",
    );
    cx.made.push(idx);
    const shape = [...p.shape];
    shape[axis] = n;
    return cx.em.call(
      "vm.op.take",
      [cx.em.reg(p), cx.em.reg(cx.fromTensor(idx)), cx.em.imm(axis)],
      p.dtype,
      shape,
    );
  }
  if (p.shape.length !== 1) throw new Unsupported(`a scale of rank ${p.shape.length}`);
  return reshapeTo(cx, p, x.shape.map((_, i) => i === axis ? p.shape[0] : 1));
}

/** Quantization by ONNX name. */
export const QUANTIZE_OPS: Record<string, OpSpec> = {
  DequantizeLinear: {
    attrs: ["axis", "block_size", "output_dtype"],
    convert(cx) {
      const x = cx.input(0), scale = cx.input(1), zp = cx.optional(2);
      if (RANGES[x.dtype] === undefined && x.dtype !== "int32") {
        throw new Unsupported(`dequantizing ${x.dtype}`);
      }
      cx.dtype(scale, FLOAT, "scale");
      let q = cast(cx, x, "int32");
      if (zp !== undefined) q = binary(cx, "subtract", q, along(cx, cast(cx, zp, "int32"), x));
      return [binary(cx, "multiply", cast(cx, q, "float32"), along(cx, scale, x), FLOAT)];
    },
  },
  DynamicQuantizeLinear: {
    attrs: [],
    convert(cx) {
      // uint8 over the range [min(x, 0), max(x, 0)]: scale = range / 255, zero point where 0 lands.
      const x = cx.input(0);
      cx.dtype(x, FLOAT);
      const all = (op: string, v: Value) =>
        cx.em.call(`vm.op.${op}`, [cx.em.reg(v), [], cx.em.imm(0)], "float32", []);
      const hi = binary(cx, "maximum", all("max", x), cx.scalar(0), FLOAT);
      const lo = binary(
        cx,
        "minimum",
        unary(cx, "negative", all("max", unary(cx, "negative", x))),
        cx.scalar(0),
        FLOAT,
      );
      const scale = binary(
        cx,
        "divide",
        binary(cx, "subtract", hi, lo, FLOAT),
        cx.scalar(255),
        FLOAT,
      );
      const clamp = (v: Value) =>
        binary(cx, "maximum", binary(cx, "minimum", v, cx.scalar(255), FLOAT), cx.scalar(0), FLOAT);
      const zp = clamp(
        unary(cx, "round", binary(cx, "divide", unary(cx, "negative", lo), scale, FLOAT)),
      );
      const y = clamp(
        binary(cx, "add", unary(cx, "round", binary(cx, "divide", x, scale, FLOAT)), zp, FLOAT),
      );
      return [cast(cx, y, "uint8"), scale, cast(cx, zp, "uint8")];
    },
  },
  QuantizeLinear: {
    attrs: ["axis", "block_size", "output_dtype", "saturate", "precision"],
    convert(cx) {
      const x = cx.input(0), scale = cx.input(1), zp = cx.optional(2);
      cx.dtype(x, FLOAT);
      const code = cx.int("output_dtype", 0);
      const dt: TensorDType = zp?.dtype ?? (code === 0 ? "uint8" : CODES[code]);
      const range = dt === undefined ? undefined : RANGES[dt];
      if (range === undefined) throw new Unsupported(`quantizing to ${dt ?? `type ${code}`}`);
      let y = unary(cx, "round", binary(cx, "divide", x, along(cx, scale, x), FLOAT));
      if (zp !== undefined) y = binary(cx, "add", y, along(cx, cast(cx, zp, "float32"), x), FLOAT);
      y = binary(
        cx,
        "maximum",
        binary(cx, "minimum", y, cx.scalar(range[1]), FLOAT),
        cx.scalar(range[0]),
        FLOAT,
      );
      return [cast(cx, y, dt)];
    },
  },
};
