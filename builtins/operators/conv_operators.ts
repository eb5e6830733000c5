/**
 * The convolution operator, `vm.op.conv2d`: a direct 2-D convolution with
 * strides, padding, dilations, channel groups (depthwise included), an
 * optional bias, and an input spacing that makes it a transposed
 * convolution. Tensors first, then shape constants and immediates:
 *
 * | call | result |
 * | --- | --- |
 * | `conv2d(x, weight, strides?, padding?, dilation?, groups?, input_dilation?, bias?, epilogue?)` | `x [N, C, H, W]` convolved with `weight [M, C / groups, KH, KW]` → `[N, M, OH, OW]`, float32. `strides` `[sh, sw]` (default `[1, 1]`), `padding` `[top, left, bottom, right]` (default zeros), `dilation` `[dh, dw]` (default `[1, 1]`), `groups` (default 1; `C` and `M` multiples of it), `input_dilation` `[ih, iw]` (default `[1, 1]`): the input's elements placed `ih` rows and `iw` columns apart, zeros between; `bias [M]` added to each output channel, `epilogue` (a string: steps applied to each output after the bias, `relu`, `affine(a, b)`, `clip(lo, hi)`, `hardsigmoid(alpha, beta)`, `hardswish(a, b)`, `sigmoid`; conv_epilogue.ts). `OH = ⌊((H − 1)·ih + 1 + top + bottom − (KH − 1)·dh − 1) / sh⌋ + 1`, likewise `OW`. Null for any of the optional arguments takes its default. |
 *
 * A transposed convolution (ONNX's `ConvTranspose`) of stride `s` and
 * padding `p` is this one with `input_dilation` `s`, padding
 * `(K − 1)·d − p` on each side (plus the output padding after) and the
 * weights flipped and their channel axes swapped per group; the importer
 * (onnx/ops_conv.ts) writes it so.
 *
 * The epilogue is the activation and scaling an exporter writes after a
 * convolution (onnx/conv_fusion.ts folds them in at import), computed while
 * the output is in cache instead of as elementwise passes of their own.
 *
 * The kernels compute it without an im2col index tensor: on the CPU
 * (kernels/cpu/conv2d.ts) as one matrix product per image and group in
 * WebAssembly SIMD, or a direct loop for depthwise and transposed
 * convolutions; on WebGPU (kernels/webgpu/conv2d.ts) one thread per output.
 *
 * Errors: `TypeError` (wrong kind of value or dtype), `RangeError` (shapes,
 * geometry), messages starting with the operator name.
 *
 * @example A 3×3 box filter over a 4×4 image, padded by one
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const conv2d = getGlobalFunc("vm.op.conv2d")!;
 * using x = tensor(new Float32Array(16).fill(1), { shape: [1, 1, 4, 4] });
 * using w = tensor(new Float32Array(9).fill(1), { shape: [1, 1, 3, 3] });
 * using y = conv2d(x, w, [1, 1], [1, 1, 1, 1]) as NDArray;
 * assertEquals(y.shape, [1, 1, 4, 4]);
 * assertEquals([...y.dataSync()].slice(0, 4), [4, 6, 6, 4]); // corners see 4 inputs, edges 6
 * ```
 *
 * @module
 */

import type { TensorDType } from "../../ground/dtype.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import { BuiltinTable } from "../builtin_table.ts";
import type { Conv2dGeometry } from "../../kernels/kernel_backend.ts";
import { formatShape } from "../../kernels/broadcast.ts";
import {
  axisList,
  checkArgCount,
  checkDType,
  checkSameDevice,
  launch,
} from "./operator_arguments.ts";
import { describe } from "../describe.ts";
import { tensorArg } from "../validate.ts";
import { parseConvEpilogue } from "./conv_epilogue.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const convBuiltins = new BuiltinTable("Convolution operators", import.meta.url);

/** Every packed function name this module registers. */
export const CONV_OPERATOR_NAMES: readonly string[] = ["vm.op.conv2d"];

const FLOAT: readonly TensorDType[] = ["float32"];

/** A list of `length` positive (or, with `min` 0, non-negative) integers; `fallback` when absent. */
function intList(
  name: string,
  value: unknown,
  role: string,
  length: number,
  min: number,
  fallback: number,
): number[] {
  const given = axisList(name, value, role);
  if (given === undefined) return new Array(length).fill(fallback);
  if (given.length !== length || !given.every((v) => Number.isSafeInteger(v) && v >= min)) {
    throw new RangeError(
      `${name}: ${role} must be ${length} integers of at least ${min}, got [${given.join(", ")}]`,
    );
  }
  return given;
}

/** `vm.op.conv2d(x, weight, strides?, padding?, dilation?, groups?, input_dilation?, bias?, epilogue?)`. */
function conv2d(args: readonly unknown[]): NDArray {
  const name = "vm.op.conv2d";
  checkArgCount(name, args, 2, 9);
  const x = tensorArg(args[0], "argument 0 (x)", name);
  const w = tensorArg(args[1], "argument 1 (weight)", name);
  const bias = args[7] === undefined || args[7] === null
    ? null
    : tensorArg(args[7], "argument 7 (bias)", name);
  checkDType(name, x, "x", FLOAT);
  checkDType(name, w, "weight", FLOAT);
  if (bias !== null) checkDType(name, bias, "bias", FLOAT);
  checkSameDevice(name, bias === null ? [x, w] : [x, w, bias]);
  const strides = intList(name, args[2], "strides", 2, 1, 1);
  const padding = intList(name, args[3], "padding", 4, 0, 0);
  const dilations = intList(name, args[4], "dilation", 2, 1, 1);
  const groups = args[5] ?? 1;
  if (typeof groups !== "number" || !Number.isSafeInteger(groups) || groups < 1) {
    throw new TypeError(`${name}: groups must be a positive integer, got ${describe(groups)}`);
  }
  const inputDilations = intList(name, args[6], "input_dilation", 2, 1, 1);
  const text = args[8] ?? "";
  if (typeof text !== "string") {
    throw new TypeError(`${name}: epilogue must be a string of steps, got ${describe(text)}`);
  }
  const epilogue = parseConvEpilogue(name, text);
  if (x.shape.length !== 4 || w.shape.length !== 4) {
    throw new RangeError(
      `${name}: x ${formatShape(x.shape)} and weight ${formatShape(w.shape)} must both be 4-D`,
    );
  }
  const [N, C, H, W] = x.shape, [M, Cg, KH, KW] = w.shape;
  if (C !== Cg * groups || M % groups !== 0) {
    throw new RangeError(
      `${name}: weight ${formatShape(w.shape)} does not fit x ${
        formatShape(x.shape)
      } in ${groups} group(s): x needs ${groups}·${Cg} channels and ${M} outputs a multiple of ${groups}`,
    );
  }
  if (bias !== null && (bias.shape.length !== 1 || bias.shape[0] !== M)) {
    throw new RangeError(`${name}: bias ${formatShape(bias.shape)} must be [${M}]`);
  }
  const size = (n: number, k: number, axis: number) => {
    const spaced = n === 0 ? 0 : (n - 1) * inputDilations[axis] + 1;
    const room = spaced + padding[axis] + padding[axis + 2] - (k - 1) * dilations[axis] - 1;
    return room < 0 ? -1 : Math.floor(room / strides[axis]) + 1;
  };
  const OH = size(H, KH, 0), OW = size(W, KW, 1);
  if (OH < 0 || OW < 0 || KH === 0 || KW === 0) {
    throw new RangeError(
      `${name}: a ${KH}×${KW} kernel (dilation [${dilations.join(", ")}]) does not fit x ${
        formatShape(x.shape)
      } padded by [${padding.join(", ")}]`,
    );
  }
  const geometry: Conv2dGeometry = {
    strides,
    padBegin: [padding[0], padding[1]],
    dilations,
    inputDilations,
    groups,
    ...(epilogue.length > 0 ? { epilogue } : {}),
  };
  const work = N * M * OH * OW * Cg * KH * KW;
  return launch(
    x,
    [N, M, OH, OW],
    "float32",
    (backend, out) => backend.conv2d(x, w, bias, geometry, out),
    work,
  );
}

convBuiltins.add("vm.op.conv2d", (...args: unknown[]) => conv2d(args), {
  signature:
    "(x, weight, strides?, padding?, dilation?, groups?, input_dilation?, bias?, epilogue?) → tensor",
  summary:
    "2-D convolution, direct (no im2col index): `x [N, C, H, W]`, `weight [M, C/groups, KH, KW]` → `[N, M, OH, OW]`. `strides` `[sh, sw]`, `padding` `[top, left, bottom, right]`, `dilation` `[dh, dw]`, `groups` (depthwise: `groups = C`), `input_dilation` `[ih, iw]` (the input's elements spaced apart: a transposed convolution), `bias [M]`, `epilogue` (steps after the bias: `relu`, `affine(a, b)`, `clip(lo, hi)`, `hardsigmoid(alpha, beta)`, `hardswish(a, b)`, `sigmoid`, space-separated); null takes the default (ones, zeros, 1, no bias, none).",
  dtypes: FLOAT,
  devices: ["cpu", "webgpu"],
  errors:
    "`TypeError` (an argument of the wrong kind or dtype, tensors on different devices), `RangeError` (shapes, geometry); messages start with the operator's name.",
  tvm: "relax.op.nn.conv2d (NCHW, OIHW); with input_dilation, relax.op.nn.conv2d_transpose",
});
