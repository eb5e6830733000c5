/**
 * Conversions between ordinary numbers and the 8- and 4-bit formats
 * relaxvm holds in uint8 and int8 tensors (low_precision.ts says how):
 * `vm.op.to_low_precision` and `vm.op.from_low_precision`, computed on the
 * host (host_tensors.ts), for ONNX's `Cast`, `CastLike`, `QuantizeLinear`
 * and `DequantizeLinear` on those types.
 *
 * @example float32 to FLOAT8E4M3FN and back
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const encode = getGlobalFunc("vm.op.to_low_precision")!;
 * const decode = getGlobalFunc("vm.op.from_low_precision")!;
 * using x = tensor([0.3, 1000, -2]);
 * using bits = encode(x, "float8e4m3fn", 1) as NDArray;
 * assertEquals([...bits.dataSync()], [0x2a, 0x7e, 0xc0]);
 * using back = decode(bits, "float8e4m3fn") as NDArray;
 * assertEquals([...back.dataSync()], [0.3125, 448, -2]);
 * ```
 *
 * @module
 */

import type { TensorDType } from "../../ground/dtype.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { tensorArg } from "../validate.ts";
import { choiceArg, numbersOf, onHost } from "./host_tensors.ts";
import {
  decodeLowPrecision,
  encodeLowPrecision,
  LOW_PRECISION_FORMATS,
  type RoundMode,
} from "./low_precision.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const lowPrecisionBuiltins = new BuiltinTable(
  "Low-precision conversions",
  import.meta.url,
);

/** Dtypes the conversions read numbers from. */
const NUMBER_DTYPES: readonly TensorDType[] = [
  "float32",
  "float64",
  "int8",
  "int16",
  "int32",
  "int64",
  "uint8",
  "uint16",
  "uint32",
];

lowPrecisionBuiltins.add(
  "vm.op.to_low_precision",
  (x: unknown, format: unknown, saturate?: unknown, roundMode?: unknown) => {
    const who = "to_low_precision";
    const t = tensorArg(x, "x", who);
    choiceArg(who, t.dtype, "x's dtype", NUMBER_DTYPES);
    const f = choiceArg(who, format, "format", LOW_PRECISION_FORMATS);
    const sat = saturate === undefined || saturate === null ? true : Boolean(saturate);
    const mode: RoundMode = roundMode === undefined || roundMode === null
      ? "up"
      : choiceArg(who, roundMode, "round_mode", ["up", "down", "nearest"]);
    return onHost(who, [t], ([v]) => ({
      shape: t.shape,
      dtype: f === "int4" ? "int8" : "uint8",
      fill(out) {
        numbersOf(v!).forEach((
          n,
          i,
        ) => ((out as Int8Array)[i] = encodeLowPrecision(f, n, sat, mode)));
      },
    }));
  },
  {
    signature: "(x, format, saturate?, round_mode?) → uint8 or int8 tensor",
    summary:
      '`x`\'s numbers in `format` (`"float8e4m3fn"`, `"float8e4m3fnuz"`, `"float8e5m2"`, `"float8e5m2fnuz"`, `"float4e2m1"`, `"float8e8m0"`: their bit patterns in a uint8 tensor; `"int4"`, `"uint4"`: their values in int8 and uint8), as ONNX\'s `Cast` computes them: floats round to nearest, ties to even, and past the largest finite value become infinity (E5M2) or NaN, or with `saturate` (default 1) that largest value; FLOAT4E2M1 always saturates; FLOAT8E8M0 (a power of 2) rounds by `round_mode` (`"up"`, the default, `"down"` or `"nearest"`, on float32\'s bits as ONNX\'s reference does); INT4 and UINT4 truncate toward zero and wrap. Computed on the host.',
    dtypes: NUMBER_DTYPES,
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not a tensor of numbers, an unknown format).",
    tvm: null,
  },
);

lowPrecisionBuiltins.add("vm.op.from_low_precision", (x: unknown, format: unknown) => {
  const who = "from_low_precision";
  const t = tensorArg(x, "x", who);
  const f = choiceArg(who, format, "format", LOW_PRECISION_FORMATS);
  choiceArg(who, t.dtype, "x's dtype", f === "int4" ? ["int8"] : ["uint8"]);
  return onHost(who, [t], ([v]) => ({
    shape: t.shape,
    dtype: "float32",
    fill(out) {
      numbersOf(v!).forEach((c, i) => ((out as Float32Array)[i] = decodeLowPrecision(f, c)));
    },
  }));
}, {
  signature: "(x, format) → float32 tensor",
  summary:
    "The numbers `x` holds in `format` (see `to_low_precision`: float formats' bit patterns in uint8, INT4's values in int8, UINT4's in uint8), as float32, which holds each exactly. Computed on the host.",
  dtypes: ["uint8", "int8"],
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not a tensor, an unknown format, codes not in uint8 (int8 for INT4)).",
  tvm: null,
});
