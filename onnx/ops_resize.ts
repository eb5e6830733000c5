/**
 * `Resize` (and its older form `Upsample`, which opset 10's `Resize` is), as
 * ONNX's reference implementation (`onnx/reference/ops/op_resize.py`)
 * computes it: modes `nearest` (its four `nearest_mode`s), `linear` and
 * `cubic` (`cubic_coeff_a`), with `antialias` for the last two, every
 * `coordinate_transformation_mode` (`half_pixel`, `half_pixel_symmetric`,
 * `pytorch_half_pixel`, `align_corners`, `asymmetric`, `tf_crop_and_resize`
 * with its `roi` and `extrapolation_value`), `exclude_outside`, `axes` and
 * `keep_aspect_ratio_policy`. The arithmetic is builtins/host_nn/resize_plan.ts's,
 * shared with the host operator.
 *
 * The reference is separable, so when the scales or sizes, the roi and the
 * resized axes' sizes are known at import, each resized axis is one gather
 * of `[output, taps]` neighbours (`vm.op.take` by a constant index), a
 * product by constant weights and a sum over the taps, on the device; the
 * index and weights are worked out at import, in float64. The other axes may
 * be symbols.
 *
 * An integer upscale by `nearest` whose output `o` reads input `⌊o / s⌋` (as
 * `asymmetric` with `floor` does, the exporters' FPN upsampling) over the
 * two last axes of an image batch needs no known size: it is a depthwise
 * transposed convolution by an s×s kernel of ones (`vm.op.conv2d` with
 * `input_dilation` s), exact, which follows image sizes known only at run
 * time (a text detector's input).
 *
 * Anything else known only at run time (scales, sizes or roi given as graph
 * inputs, as ONNX's node tests give them; resized axes of symbolic size) is
 * `vm.op.resize`, which plans the resize when the program runs and computes it
 * on the host (builtins/host_nn/host_resize_operators.ts).
 *
 * @module
 */

import { tensor } from "../devices/tensor.ts";
import { type Dim, shapeText, Unsupported, type Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import { FLOAT, type OpSpec } from "./op_spec.ts";
import {
  ASPECT_RATIO_POLICIES,
  type AxisPlan,
  COORDINATE_MODES,
  NEAREST_MODES,
  RESIZE_MODES,
  resizeAxisPlan,
  resizeGeometry,
  type ResizeOptions,
} from "../builtins/host_nn/resize_plan.ts";

/** Whether a plan copies its axis unchanged. */
function isIdentity(p: AxisPlan, size: number): boolean {
  if (p.taps !== 1 || p.index.length !== size) return false;
  for (let x = 0; x < size; x++) {
    if (p.index[x] !== x || p.weight[x] !== 1 || !Number.isNaN(p.fixed[x])) return false;
  }
  return true;
}

/** Whether a plan reads input `⌊o / s⌋` with weight 1 for every output `o`. */
function isNearestRepeat(p: AxisPlan, s: number): boolean {
  if (p.taps !== 1) return false;
  for (let x = 0; x < p.index.length; x++) {
    if (p.index[x] !== Math.floor(x / s) || p.weight[x] !== 1 || !Number.isNaN(p.fixed[x])) {
      return false;
    }
  }
  return true;
}

/**
 * The numbers of optional input `v`: known at import, `undefined` when it is
 * absent or empty (ONNX's way of leaving out `scales` beside `sizes`), or
 * `null` when they are known only at run time.
 */
function knownFloats(v: Value | undefined): number[] | undefined | null {
  if (v === undefined) return undefined;
  if (v.shape.length === 1 && v.shape[0] === 0) return undefined;
  if (v.ints !== undefined && v.ints.every((d) => typeof d === "number")) {
    return v.ints as number[];
  }
  if (v.tensor === undefined) return null;
  return Array.from(v.tensor.dataSync() as ArrayLike<number | bigint>, Number);
}

/** `f()`, its `RangeError`s (the shared plan's: options or sizes it cannot resize by) unsupported. */
function planned<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof RangeError) throw new Unsupported(e.message.replace(/^resize: /, ""));
    throw e;
  }
}

/** One resized axis applied: gather `[out, taps]`, weigh, sum the taps, add the fixed values. */
function resizeAxis(cx: NodeContext, x: Value, axis: number, p: AxisPlan): Value {
  const outSize = p.fixed.length, rank = x.shape.length;
  const trailing = new Array(rank - axis - 1).fill(1);
  const idx = tensor(p.index, { shape: [outSize, p.taps] });
  cx.made.push(idx);
  const gatheredShape: Dim[] = [
    ...x.shape.slice(0, axis),
    outSize,
    p.taps,
    ...x.shape.slice(axis + 1),
  ];
  const gathered = cx.em.call(
    "vm.op.take",
    [cx.em.reg(x), cx.em.reg(cx.fromTensor(idx)), cx.em.imm(axis)],
    "float32",
    gatheredShape,
  );
  const outShape: Dim[] = [...x.shape.slice(0, axis), outSize, ...x.shape.slice(axis + 1)];
  let y: Value;
  if (p.taps === 1 && p.weight.every((w) => w === 1)) {
    y = reshapeKnown(cx, gathered, outShape);
  } else {
    const w = tensor(Float32Array.from(p.weight), { shape: [outSize, p.taps, ...trailing] });
    cx.made.push(w);
    const weighted = cx.em.call(
      "vm.op.multiply",
      [cx.em.reg(gathered), cx.em.reg(cx.fromTensor(w))],
      "float32",
      gatheredShape,
    );
    y = cx.em.call(
      "vm.op.sum",
      [cx.em.reg(weighted), [axis + 1], cx.em.imm(0)],
      "float32",
      outShape,
    );
  }
  if (p.fixed.some((v) => !Number.isNaN(v))) {
    // Outputs outside the roi: weights 0 above, plus their value here.
    const add = tensor(Float32Array.from(p.fixed, (v) => Number.isNaN(v) ? 0 : v), {
      shape: [outSize, ...trailing],
    });
    cx.made.push(add);
    y = cx.em.call("vm.op.add", [cx.em.reg(y), cx.em.reg(cx.fromTensor(add))], "float32", outShape);
  }
  return y;
}

/** `x` viewed with `dims` (its element count unchanged). */
function reshapeKnown(cx: NodeContext, x: Value, dims: Dim[]): Value {
  return cx.em.call("vm.builtin.reshape", [cx.em.reg(x), cx.em.shape(dims)], x.dtype, dims);
}

/**
 * An integer nearest upscale of the two last axes of `x [N, C, H, W]` as a
 * depthwise transposed convolution by s×s ones (see the module's comment).
 */
function repeatByConv(cx: NodeContext, x: Value, sh: number, sw: number): Value {
  const c = x.shape[1];
  if (typeof c !== "number") throw new Unsupported(`a resize of ${shapeText(x.shape)}`);
  const w = tensor(new Float32Array(c * sh * sw).fill(1), { shape: [c, 1, sh, sw] });
  cx.made.push(w);
  const out = x.shape.slice(2).map((d, i) => typeof d === "number" ? d * [sh, sw][i] : null);
  return cx.em.call(
    "vm.op.conv2d",
    [
      cx.em.reg(x),
      cx.em.reg(cx.fromTensor(w)),
      [1, 1],
      [sh - 1, sw - 1, sh - 1, sw - 1],
      [1, 1],
      cx.em.imm(c),
      [sh, sw],
    ],
    "float32",
    [x.shape[0], c, ...out],
  );
}

/** String attribute `attr` (or `fallback`), which must be one of `choices`. */
function choice(
  cx: NodeContext,
  attr: string,
  fallback: string,
  choices: readonly string[],
): string {
  const value = cx.string(attr, fallback);
  if (!choices.includes(value)) throw new Unsupported(`${attr}="${value}"`);
  return value;
}

/** A resize's inputs: which of roi, scales and sizes it has (the values, known or not). */
interface ResizeInputs {
  roi?: Value;
  scales?: Value;
  sizes?: Value;
}

/**
 * The resize on the host, planned when the program runs (`vm.op.resize`):
 * scales, sizes or roi known only then, or resized axes whose sizes are.
 */
function resizeAtRunTime(
  cx: NodeContext,
  x: Value,
  o: ResizeOptions,
  axes: number[],
  policy: string,
  given: ResizeInputs,
): Value {
  const shape = x.shape.map((d, a) => axes.includes(a) ? null : d);
  return cx.em.call(
    "vm.op.resize",
    [
      cx.em.reg(x),
      cx.regOrNull(given.roi),
      cx.regOrNull(given.scales),
      cx.regOrNull(given.sizes),
      axes,
      o.mode,
      o.coordinates,
      o.nearestMode,
      cx.em.ib.convert_constant(o.cubicA),
      cx.em.imm(o.antialias ? 1 : 0),
      cx.em.imm(o.excludeOutside ? 1 : 0),
      cx.em.ib.convert_constant(o.extrapolation),
      policy,
    ],
    "float32",
    shape,
  );
}

/**
 * `Resize`, or with `legacy` the older form (`Upsample`, opset 10's
 * `Resize`): scales alone (an input, or `Upsample`-7's attribute),
 * asymmetric coordinates, nearest by floor.
 */
function convertResize(cx: NodeContext, legacy: boolean): Value[] {
  const x = cx.input(0);
  cx.dtype(x, FLOAT);
  const rank = x.shape.length;
  const o: ResizeOptions = {
    mode: choice(cx, "mode", "nearest", RESIZE_MODES),
    nearestMode: legacy ? "floor" : choice(cx, "nearest_mode", "round_prefer_floor", NEAREST_MODES),
    coordinates: legacy
      ? "asymmetric"
      : choice(cx, "coordinate_transformation_mode", "half_pixel", COORDINATE_MODES),
    cubicA: cx.float("cubic_coeff_a", -0.75),
    antialias: cx.int("antialias", 0) === 1,
    excludeOutside: cx.int("exclude_outside", 0) === 1,
    extrapolation: cx.float("extrapolation_value", 0),
  };
  const policy = choice(cx, "keep_aspect_ratio_policy", "stretch", ASPECT_RATIO_POLICIES);
  if (o.mode === "nearest" && o.antialias) throw new Unsupported("antialias with mode nearest");
  const axes = (cx.ints("axes") ?? [...Array(rank).keys()]).map((a) => a < 0 ? a + rank : a);
  if (axes.some((a) => a < 0 || a >= rank) || new Set(axes).size !== axes.length) {
    throw new Unsupported(`axes [${cx.ints("axes")}] of a rank-${rank} input`);
  }
  const inputs: ResizeInputs = {};
  if (!legacy) {
    inputs.roi = cx.optional(1);
    inputs.scales = cx.optional(2);
    inputs.sizes = cx.optional(3);
  } else if (cx.node.opType === "Upsample" && cx.opset < 9) {
    const s = cx.floats("scales");
    if (s === undefined) throw new Unsupported("Upsample without scales");
    const t = tensor(Float32Array.from(s), { shape: [s.length] });
    cx.made.push(t);
    inputs.scales = cx.fromTensor(t);
  } else inputs.scales = cx.input(1);
  const roi = knownFloats(inputs.roi), scales = knownFloats(inputs.scales);
  const sizes = knownFloats(inputs.sizes);
  if (scales === undefined && sizes === undefined) {
    throw new Unsupported("neither scales nor sizes");
  }
  const atRunTime = () => [resizeAtRunTime(cx, x, o, axes, policy, inputs)];
  if (roi === null || scales === null || sizes === null) return atRunTime();
  const dynamic = axes.some((a) => typeof x.shape[a] !== "number");
  if (dynamic && scales === undefined) return atRunTime();
  const dims = x.shape.map((d) => typeof d === "number" ? d : null);
  const g = planned(() =>
    resizeGeometry(dims, axes, { roi, scales: scales ?? undefined, sizes }, policy)
  );
  if (dynamic) {
    // An integer nearest upscale of an image batch is exact on the device; the rest on the host.
    const [sh, sw] = [g.scales[2], g.scales[3]];
    const probe = (s: number) =>
      [5, 6].every((n) =>
        isNearestRepeat(planned(() => resizeAxisPlan(o, n, n * s, s, [0, 1])), s)
      );
    if (
      rank === 4 && g.scales[0] === 1 && g.scales[1] === 1 && Number.isInteger(sh) && sh >= 1 &&
      Number.isInteger(sw) && sw >= 1 && probe(sh) && probe(sw)
    ) {
      return [repeatByConv(cx, x, sh, sw)];
    }
    return atRunTime();
  }
  // The reference interpolates the last axis first.
  let y = x;
  for (let a = rank - 1; a >= 0; a--) {
    if (!axes.includes(a)) continue;
    const size = x.shape[a] as number, out = g.outSizes[a] as number;
    const plan = planned(() => resizeAxisPlan(o, size, out, g.scales[a], g.roi[a]));
    if (out === size && isIdentity(plan, size)) continue;
    y = resizeAxis(cx, y, a, plan);
  }
  if (y === x) return [cx.em.call("vm.op.cast", [cx.em.reg(x), "float32"], "float32", x.shape)];
  return [y];
}

/** `Resize` by ONNX name. */
export const RESIZE_OPS: Record<string, OpSpec> = {
  Resize: {
    attrs: [
      "antialias",
      "axes",
      "coordinate_transformation_mode",
      "cubic_coeff_a",
      "exclude_outside",
      "extrapolation_value",
      "keep_aspect_ratio_policy",
      "mode",
      "nearest_mode",
    ],
    convert: (cx) => convertResize(cx, cx.opset < 11),
  },
  // Deprecated since opset 10 (Resize-10 is the same operator), still in models and node tests.
  Upsample: {
    attrs: ["mode", "scales"],
    convert: (cx) => convertResize(cx, true),
  },
};
