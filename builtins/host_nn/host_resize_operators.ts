/**
 * `vm.op.resize`: ONNX's `Resize` (and `Upsample`) computed on the host when
 * its scales, sizes or roi, or the resized axes' sizes, are known only at run
 * time. The importer plans a resize whose sizes it knows as device operators
 * (onnx/ops_resize.ts); this plans it from the same arithmetic
 * (resize_plan.ts) when the program runs, then applies each axis's plan to
 * the host's copy of the tensor, last axis first as the reference does,
 * accumulating in float64.
 *
 * @example Double a 1×2 image's width by linear interpolation (`asymmetric`)
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const resize = getGlobalFunc("vm.op.resize")!;
 * using x = tensor([[1, 3]]);
 * using scales = tensor([1, 2]);
 * using y = resize(x, null, scales, null, [0, 1], "linear", "asymmetric",
 *   "round_prefer_floor", -0.75, 0, 0, 0, "stretch") as NDArray;
 * assertEquals([...y.shape], [1, 4]);
 * assertEquals([...y.dataSync()], [1, 2, 3, 3]);
 * ```
 *
 * @module
 */

import { formatShape } from "../../kernels/broadcast.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { shapeArg, tensorArg } from "../validate.ts";
import {
  axisOf,
  choiceArg,
  integersOf,
  numbersOf,
  onHost,
  optionalTensor,
  sizeOf,
} from "../host_operators/host_tensors.ts";
import {
  ASPECT_RATIO_POLICIES,
  COORDINATE_MODES,
  NEAREST_MODES,
  RESIZE_MODES,
  resizeAxisPlan,
  resizeGeometry,
  type ResizeOptions,
} from "./resize_plan.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const hostResizeBuiltins = new BuiltinTable("Host resize", import.meta.url);

/** A finite number argument. */
function numberArg(who: string, v: unknown, what: string): number {
  const n = typeof v === "bigint" ? Number(v) : v;
  if (typeof n !== "number" || Number.isNaN(n)) {
    throw new TypeError(`${who}: ${what} must be a number, got ${String(v)}`);
  }
  return n;
}

/**
 * Resizes `xs` (row-major, of `shape`) to `outSizes` along `axes`, last axis
 * first, each by its plan; float64 throughout.
 */
export function resizeValues(
  o: ResizeOptions,
  xs: ArrayLike<number>,
  shape: readonly number[],
  axes: readonly number[],
  scales: readonly number[],
  outSizes: readonly number[],
  roi: readonly (readonly [number, number])[],
): Float64Array {
  let data = Float64Array.from(xs);
  const dims = [...shape];
  for (let a = dims.length - 1; a >= 0; a--) {
    if (!axes.includes(a)) continue;
    const size = dims[a], out = outSizes[a];
    const p = resizeAxisPlan(o, size, out, scales[a], roi[a]);
    const outer = sizeOf(dims.slice(0, a)), inner = sizeOf(dims.slice(a + 1));
    const next = new Float64Array(outer * out * inner);
    for (let b = 0; b < outer; b++) {
      for (let x = 0; x < out; x++) {
        const to = (b * out + x) * inner;
        if (!Number.isNaN(p.fixed[x])) {
          next.fill(p.fixed[x], to, to + inner);
          continue;
        }
        for (let t = 0; t < p.taps; t++) {
          const w = p.weight[x * p.taps + t];
          if (w === 0) continue;
          const from = (b * size + p.index[x * p.taps + t]) * inner;
          for (let i = 0; i < inner; i++) next[to + i] += w * data[from + i];
        }
      }
    }
    data = next;
    dims[a] = out;
  }
  return data;
}

hostResizeBuiltins.add(
  "vm.op.resize",
  (
    x: unknown,
    roi: unknown,
    scales: unknown,
    sizes: unknown,
    axes: unknown,
    mode: unknown,
    coordinates: unknown,
    nearestMode: unknown,
    cubicA: unknown,
    antialias: unknown,
    excludeOutside: unknown,
    extrapolation: unknown,
    policy: unknown,
  ) => {
    const who = "resize";
    const t = tensorArg(x, "x", who, "float32");
    const rt = optionalTensor(roi, "roi", who), st = optionalTensor(scales, "scales", who);
    const zt = optionalTensor(sizes, "sizes", who);
    const rank = t.shape.length;
    const ax = [...shapeArg(axes, who, "axes")].map((a) => axisOf(who, a, rank));
    if (new Set(ax).size !== ax.length) throw new RangeError(`${who}: axes [${ax}] repeat one`);
    const o: ResizeOptions = {
      mode: choiceArg(who, mode, "mode", RESIZE_MODES),
      coordinates: choiceArg(who, coordinates, "coordinate_transformation_mode", COORDINATE_MODES),
      nearestMode: choiceArg(who, nearestMode, "nearest_mode", NEAREST_MODES),
      cubicA: numberArg(who, cubicA, "cubic_coeff_a"),
      antialias: Boolean(antialias),
      excludeOutside: Boolean(excludeOutside),
      extrapolation: numberArg(who, extrapolation, "extrapolation_value"),
    };
    const p = choiceArg(who, policy, "keep_aspect_ratio_policy", ASPECT_RATIO_POLICIES);
    if (o.mode === "nearest" && o.antialias) {
      throw new RangeError(`${who}: antialias with mode nearest`);
    }
    const shape = [...t.shape];
    return onHost(who, [t, rt, st, zt], ([xv, rv, sv, zv]) => {
      // An empty tensor stands for an absent input (ONNX passes `scales` empty beside `sizes`).
      const given = (v: typeof xv, read: (v: NonNullable<typeof xv>) => number[]) =>
        v === undefined || v.length === 0 ? undefined : read(v);
      const g = resizeGeometry(shape, ax, {
        roi: given(rv, numbersOf),
        scales: given(sv, numbersOf),
        sizes: given(zv, (v) => integersOf(v, "sizes", who)),
      }, p);
      const outSizes = g.outSizes as number[];
      if (outSizes.some((d) => d <= 0)) {
        throw new RangeError(
          `${who}: x ${formatShape(shape)} resized to ${formatShape(outSizes)}`,
        );
      }
      return {
        shape: outSizes,
        dtype: "float32",
        fill(out) {
          const ys = resizeValues(o, numbersOf(xv!), shape, ax, g.scales, outSizes, g.roi);
          (out as Float32Array).set(ys);
        },
      };
    });
  },
  {
    signature:
      "(x, roi, scales, sizes, axes, mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a, antialias, exclude_outside, extrapolation_value, keep_aspect_ratio_policy) → float32 tensor",
    summary:
      "ONNX's `Resize` of float32 `x` along `axes`, as its reference computes it: to `sizes` (int64, one per axis, fitted by `keep_aspect_ratio_policy`) or by `scales` (float32; an empty or null one is absent), `roi` (starts then ends) for `tf_crop_and_resize`; `mode` `nearest` (by `nearest_mode`), `linear` or `cubic` (`cubic_coeff_a`), with `antialias`, `exclude_outside` and `extrapolation_value`. Computed on the host, in float64, for the resizes whose sizes the importer does not know; `Upsample` is the `asymmetric`, `floor` case.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not a float32 tensor, an unknown mode), `RangeError` (axes, scales or sizes that do not fit `x`, an empty result).",
    tvm:
      "relax.op.image.resize2d (two axes, no antialias or keep_aspect_ratio_policy; relaxvm follows ONNX's reference)",
  },
);
