/**
 * `Resize` (and the opset-10 form, which is `Upsample`'s), as ONNX's
 * reference implementation (`onnx/reference/ops/op_resize.py`) computes it:
 * modes `nearest` (its four `nearest_mode`s), `linear` and `cubic`
 * (`cubic_coeff_a`), with `antialias` for the last two, every
 * `coordinate_transformation_mode` (`half_pixel`, `half_pixel_symmetric`,
 * `pytorch_half_pixel`, `align_corners`, `asymmetric`, `tf_crop_and_resize`
 * with its `roi` and `extrapolation_value`), `exclude_outside`, `axes` and
 * `keep_aspect_ratio_policy`.
 *
 * The reference interpolates the last axis first, then each earlier one,
 * each output element from a few neighbours of its source position (edge
 * values repeated past the ends). That is separable, so each resized axis
 * is one gather of `[output, taps]` neighbours (`vm.op.take` by a constant
 * index), a product by constant weights and a sum over the taps; the index
 * and weights are worked out at import, in float64, from the axis's size
 * and the scale. So the resized axes' sizes, and the scales or sizes, must
 * be known at import; the other axes may be symbols.
 *
 * One case needs no known size: an integer upscale by `nearest` whose
 * output `o` reads input `⌊o / s⌋` (as `asymmetric` with `floor` does, the
 * exporters' FPN upsampling) over the two last axes of an image batch is a
 * depthwise transposed convolution by an s×s kernel of ones
 * (`vm.op.conv2d` with `input_dilation` s), exact, which follows image sizes
 * known only at run time (a text detector's input).
 *
 * @module
 */

import { tensor } from "../devices/tensor.ts";
import { type Dim, shapeText, Unsupported, type Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import { FLOAT, type OpSpec } from "./op_spec.ts";

/** One resized axis: for each output, `taps` input indices and their weights, and extrapolation. */
interface AxisPlan {
  index: Int32Array;
  weight: Float64Array;
  taps: number;
  /** Per output, the value it takes outright (`tf_crop_and_resize` outside the roi), or NaN. */
  fixed: Float64Array;
}

/** The node's attributes as the reference reads them. */
interface ResizeOptions {
  mode: string;
  nearestMode: string;
  coordinates: string;
  cubicA: number;
  antialias: boolean;
  excludeOutside: boolean;
  extrapolation: number;
}

/** The coefficients of `ratio` (in (0, 1]) for a mode, as the reference's `_*_coeffs`. */
function coefficients(o: ResizeOptions, ratio: number, scale: number): number[] {
  if (o.mode === "nearest") {
    if (Number.isInteger(ratio)) return [0, 1];
    switch (o.nearestMode) {
      case "round_prefer_floor":
        return [ratio <= 0.5 ? 1 : 0, ratio > 0.5 ? 1 : 0];
      case "round_prefer_ceil":
        return [ratio < 0.5 ? 1 : 0, ratio >= 0.5 ? 1 : 0];
      case "floor":
        return [1, 0];
      case "ceil":
        return [0, 1];
    }
    throw new Unsupported(`nearest_mode="${o.nearestMode}"`);
  }
  if (o.mode === "linear") {
    if (!o.antialias) return [1 - ratio, ratio];
    const s = Math.min(scale, 1);
    const start = Math.floor(-1 / s) + 1, footprint = 2 - 2 * start;
    const c: number[] = [];
    for (let i = start; i < start + footprint; i++) {
      c.push(Math.min(1, Math.max(0, 1 - Math.abs((i - ratio) * s))));
    }
    const sum = c.reduce((a, b) => a + b, 0);
    return c.map((v) => v / sum);
  }
  if (o.mode === "cubic") {
    const A = o.cubicA;
    if (!o.antialias) {
      const r = ratio, q = 1 - ratio;
      return [
        ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
        ((A + 2) * r - (A + 3)) * r * r + 1,
        ((A + 2) * q - (A + 3)) * q * q + 1,
        ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A,
      ];
    }
    const s = Math.min(scale, 1);
    const coeff = (v: number) => {
      const x = Math.abs(v), x2 = x * x, x3 = x * x2;
      if (x <= 1) return (A + 2) * x3 - (A + 3) * x2 + 1;
      if (x < 2) return A * x3 - 5 * A * x2 + 8 * A * x - 4 * A;
      return 0;
    };
    const start = Math.floor(-2 / s) + 1, end = 2 - start;
    const c: number[] = [];
    for (let i = start; i < end; i++) c.push(coeff(s * (i - ratio)));
    const sum = c.reduce((a, b) => a + b, 0);
    return c.map((v) => v / sum);
  }
  throw new Unsupported(`mode="${o.mode}"`);
}

/**
 * The `n` indices nearest `x` among `[−pad, size + pad)` with `pad = ⌈n/2⌉`
 * (ties to the smaller), ascending: the reference's `_get_neighbor` over the
 * edge-padded axis.
 */
function neighbours(x: number, n: number, size: number): number[] {
  const pad = Math.ceil(n / 2);
  const lo = Math.max(-pad, Math.floor(x) - n - 1), hi = Math.min(size + pad, Math.ceil(x) + n + 2);
  const candidates: number[] = [];
  for (let i = lo; i < hi; i++) candidates.push(i);
  candidates.sort((a, b) => Math.abs(x - a) - Math.abs(x - b) || a - b);
  return candidates.slice(0, n).sort((a, b) => a - b);
}

/** The plan of one axis of `size` resized to `outSize` by `scale` (the reference's per-axis step). */
function axisPlan(
  o: ResizeOptions,
  size: number,
  outSize: number,
  scale: number,
  roi: [number, number],
): AxisPlan {
  const rows: { idx: number[]; w: number[] }[] = [];
  const fixed = new Float64Array(outSize).fill(NaN);
  const outWidth = scale * size;
  for (let x = 0; x < outSize; x++) {
    let xo: number;
    switch (o.coordinates) {
      case "align_corners":
        xo = outWidth === 1 ? 0 : x * (size - 1) / (outWidth - 1);
        break;
      case "asymmetric":
        xo = x / scale;
        break;
      case "tf_crop_and_resize":
        xo = outWidth === 1
          ? (roi[1] - roi[0]) * (size - 1) / 2
          : x * (roi[1] - roi[0]) * (size - 1) / (outWidth - 1);
        xo += roi[0] * (size - 1);
        break;
      case "pytorch_half_pixel":
        xo = outWidth === 1 ? -0.5 : (x + 0.5) / scale - 0.5;
        break;
      case "half_pixel":
        xo = (x + 0.5) / scale - 0.5;
        break;
      case "half_pixel_symmetric": {
        const adjustment = outSize / outWidth, center = size / 2;
        xo = center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
        break;
      }
      default:
        throw new Unsupported(`coordinate_transformation_mode="${o.coordinates}"`);
    }
    if (o.coordinates === "tf_crop_and_resize" && (xo < 0 || xo > size - 1)) {
      fixed[x] = o.extrapolation;
      rows.push({ idx: [], w: [] });
      continue;
    }
    const ratio = Number.isInteger(xo) ? 1 : xo - Math.floor(xo);
    const c = coefficients(o, ratio, scale);
    const near = neighbours(xo, c.length, size);
    if (o.excludeOutside) {
      for (let i = 0; i < near.length; i++) if (near[i] < 0 || near[i] >= size) c[i] = 0;
      const sum = c.reduce((a, b) => a + b, 0);
      for (let i = 0; i < c.length; i++) c[i] /= sum;
    }
    // Merge taps that read one element (edges repeat) and drop zero weights.
    const merged = new Map<number, number>();
    for (let i = 0; i < near.length; i++) {
      if (c[i] === 0) continue;
      const at = Math.min(size - 1, Math.max(0, near[i]));
      merged.set(at, (merged.get(at) ?? 0) + c[i]);
    }
    rows.push({ idx: [...merged.keys()], w: [...merged.values()] });
  }
  const taps = Math.max(1, ...rows.map((r) => r.idx.length));
  const index = new Int32Array(outSize * taps), weight = new Float64Array(outSize * taps);
  rows.forEach((r, x) => {
    for (let t = 0; t < r.idx.length; t++) {
      index[x * taps + t] = r.idx[t];
      weight[x * taps + t] = r.w[t];
    }
  });
  return { index, weight, taps, fixed };
}

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

/** The float contents of a value known at import, or undefined when it is absent or empty. */
function knownFloats(v: Value | undefined, what: string): number[] | undefined {
  if (v === undefined) return undefined;
  if (v.shape.length === 1 && v.shape[0] === 0) return undefined;
  if (v.ints !== undefined && v.ints.every((d) => typeof d === "number")) {
    return v.ints as number[];
  }
  if (v.tensor === undefined) {
    throw new Unsupported(`${what} known only at run time`);
  }
  return Array.from(v.tensor.dataSync() as ArrayLike<number | bigint>, Number);
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

function convertResize(cx: NodeContext): Value[] {
  const x = cx.input(0);
  cx.dtype(x, FLOAT);
  const rank = x.shape.length;
  const opset10 = cx.opset < 11;
  const o: ResizeOptions = {
    mode: cx.string("mode", "nearest"),
    // Opset 10's Resize is Upsample's: asymmetric coordinates, nearest by floor.
    nearestMode: opset10 ? "floor" : cx.string("nearest_mode", "round_prefer_floor"),
    coordinates: opset10 ? "asymmetric" : cx.string("coordinate_transformation_mode", "half_pixel"),
    cubicA: cx.float("cubic_coeff_a", -0.75),
    antialias: cx.int("antialias", 0) === 1,
    excludeOutside: cx.int("exclude_outside", 0) === 1,
    extrapolation: cx.float("extrapolation_value", 0),
  };
  if (o.mode === "nearest" && o.antialias) throw new Unsupported("antialias with mode nearest");
  const axes = (cx.ints("axes") ?? [...Array(rank).keys()]).map((a) => a < 0 ? a + rank : a);
  if (axes.some((a) => a < 0 || a >= rank) || new Set(axes).size !== axes.length) {
    throw new Unsupported(`axes [${cx.ints("axes")}] of a rank-${rank} input`);
  }
  const roiGiven = opset10 ? undefined : knownFloats(cx.optional(1), "roi");
  let scalesGiven = knownFloats(cx.optional(opset10 ? 1 : 2), "scales");
  const sizesGiven = opset10 ? undefined : knownFloats(cx.optional(3), "sizes");
  if (scalesGiven === undefined && sizesGiven === undefined) {
    throw new Unsupported("neither scales nor sizes");
  }
  if (scalesGiven !== undefined && scalesGiven.length !== axes.length) {
    throw new Unsupported(`${scalesGiven.length} scales for ${axes.length} axes`);
  }
  if (sizesGiven !== undefined && sizesGiven.length !== axes.length) {
    throw new Unsupported(`${sizesGiven.length} sizes for ${axes.length} axes`);
  }
  // Per axis of x: scale, output size, roi (as the reference's _interpolate_nd lays them out).
  const scales = new Array<number>(rank).fill(1);
  const roi: [number, number][] = Array.from({ length: rank }, () => [0, 1]);
  if (roiGiven !== undefined) {
    const n = roiGiven.length / 2;
    axes.forEach((a, i) => roi[a] = [roiGiven[i], roiGiven[n + i]]);
  }
  const outSizes: Dim[] = [...x.shape];
  const dynamic = axes.some((a) => typeof x.shape[a] !== "number");
  if (scalesGiven !== undefined) {
    axes.forEach((a, i) => scales[a] = scalesGiven![i]);
    for (const a of axes) {
      const d = x.shape[a];
      outSizes[a] = typeof d === "number" ? Math.floor(scales[a] * d) : null;
    }
  } else {
    if (dynamic) throw new Unsupported(`sizes for an input of shape ${shapeText(x.shape)}`);
    const policy = cx.string("keep_aspect_ratio_policy", "stretch");
    axes.forEach((a, i) => {
      outSizes[a] = sizesGiven![i];
      scales[a] = sizesGiven![i] / (x.shape[a] as number);
    });
    if (policy !== "stretch") {
      if (policy !== "not_larger" && policy !== "not_smaller") {
        throw new Unsupported(`keep_aspect_ratio_policy="${policy}"`);
      }
      const picked = axes.map((a) => scales[a]);
      const s = policy === "not_larger" ? Math.min(...picked) : Math.max(...picked);
      for (const a of axes) {
        scales[a] = s;
        outSizes[a] = Math.floor(s * (x.shape[a] as number) + 0.5);
      }
    }
    scalesGiven = undefined;
  }
  if (dynamic) {
    // Sizes known only at run time: only the integer nearest upscale of an image batch.
    const [sh, sw] = [scales[2], scales[3]];
    const probe = (s: number) =>
      [5, 6].every((n) => isNearestRepeat(axisPlan(o, n, n * s, s, [0, 1]), s));
    if (
      rank === 4 && scales[0] === 1 && scales[1] === 1 && Number.isInteger(sh) && sh >= 1 &&
      Number.isInteger(sw) && sw >= 1 && probe(sh) && probe(sw)
    ) {
      return [repeatByConv(cx, x, sh, sw)];
    }
    throw new Unsupported(
      `a ${o.mode} resize by [${scales}] of an input of shape ${
        shapeText(x.shape)
      } (sizes known only at run time)`,
    );
  }
  // The reference interpolates the last axis first.
  let y = x;
  for (let a = rank - 1; a >= 0; a--) {
    const size = x.shape[a] as number, out = outSizes[a] as number;
    if (!axes.includes(a)) continue;
    if (out <= 0 || size <= 0) {
      throw new Unsupported(`a resize of axis ${a} from ${size} to ${out}`);
    }
    const plan = axisPlan(o, size, out, scales[a], roi[a]);
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
    convert: convertResize,
  },
};
