/**
 * The arithmetic of ONNX's `Resize`, as its reference implementation
 * (`onnx/reference/ops/op_resize.py`) does it, shared by the importer, which
 * plans a resize at import when its sizes are known then (onnx/ops_resize.ts:
 * a gather, a product by weights and a sum per axis on the device), and the
 * host operator `vm.op.resize` (host_resize_operators.ts), which plans it
 * when the program runs. One module, so the two cannot drift apart.
 *
 * The reference interpolates the last axis first, then each earlier one,
 * each output element from a few neighbours of its source position (edge
 * values repeated past the ends). That is separable: an axis's plan gives,
 * per output index, the input indices it reads and their weights, worked out
 * in float64 from the axis's size, the output size and the scale.
 *
 * It imports nothing: bad options are `RangeError`s, which the importer turns
 * into its own errors.
 *
 * @module
 */

/** `mode`s. */
export const RESIZE_MODES = ["nearest", "linear", "cubic"] as const;
/** `nearest_mode`s. */
export const NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"] as const;
/** `coordinate_transformation_mode`s. */
export const COORDINATE_MODES = [
  "half_pixel",
  "half_pixel_symmetric",
  "pytorch_half_pixel",
  "align_corners",
  "asymmetric",
  "tf_crop_and_resize",
] as const;
/** `keep_aspect_ratio_policy`s. */
export const ASPECT_RATIO_POLICIES = ["stretch", "not_larger", "not_smaller"] as const;

/** A resize's attributes as the reference reads them. */
export interface ResizeOptions {
  /** One of `RESIZE_MODES`. */
  readonly mode: string;
  /** One of `NEAREST_MODES` (read for mode `nearest`). */
  readonly nearestMode: string;
  /** One of `COORDINATE_MODES`. */
  readonly coordinates: string;
  /** `cubic_coeff_a`. */
  readonly cubicA: number;
  /** `antialias` (linear and cubic only). */
  readonly antialias: boolean;
  /** `exclude_outside`: weights of taps past the edges set to 0, the rest renormalized. */
  readonly excludeOutside: boolean;
  /** `extrapolation_value` (`tf_crop_and_resize` outside the roi). */
  readonly extrapolation: number;
}

/** One resized axis: for each output, `taps` input indices and their weights, and extrapolation. */
export interface AxisPlan {
  /** `[output, taps]` input indices (unused taps read 0 with weight 0). */
  readonly index: Int32Array;
  /** `[output, taps]` weights. */
  readonly weight: Float64Array;
  /** Taps per output (at least 1). */
  readonly taps: number;
  /** Per output, the value it takes outright (`tf_crop_and_resize` outside the roi), or NaN. */
  readonly fixed: Float64Array;
}

/** Per axis of the input: the scale, the output size and the roi, as `_interpolate_nd` lays them out. */
export interface ResizeGeometry {
  readonly scales: number[];
  /** Output sizes; `null` where the input's size is (a symbol at import). */
  readonly outSizes: (number | null)[];
  readonly roi: [number, number][];
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
    throw new RangeError(`resize: nearest_mode "${o.nearestMode}"`);
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
  throw new RangeError(`resize: mode "${o.mode}"`);
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

/** The source position of output `x` (the reference's coordinate transformation). */
function sourcePosition(
  o: ResizeOptions,
  x: number,
  size: number,
  outSize: number,
  scale: number,
  roi: readonly [number, number],
): number {
  const outWidth = scale * size;
  switch (o.coordinates) {
    case "align_corners":
      return outWidth === 1 ? 0 : x * (size - 1) / (outWidth - 1);
    case "asymmetric":
      return x / scale;
    case "tf_crop_and_resize":
      return (outWidth === 1
        ? (roi[1] - roi[0]) * (size - 1) / 2
        : x * (roi[1] - roi[0]) * (size - 1) / (outWidth - 1)) + roi[0] * (size - 1);
    case "pytorch_half_pixel":
      return outWidth === 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    case "half_pixel":
      return (x + 0.5) / scale - 0.5;
    case "half_pixel_symmetric": {
      const adjustment = outSize / outWidth, center = size / 2;
      return center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
    }
  }
  throw new RangeError(`resize: coordinate_transformation_mode "${o.coordinates}"`);
}

/** The plan of one axis of `size` resized to `outSize` by `scale` (the reference's per-axis step). */
export function resizeAxisPlan(
  o: ResizeOptions,
  size: number,
  outSize: number,
  scale: number,
  roi: readonly [number, number],
): AxisPlan {
  if (!(size > 0 && outSize > 0)) {
    throw new RangeError(`resize: an axis from ${size} to ${outSize}`);
  }
  const rows: { idx: number[]; w: number[] }[] = [];
  const fixed = new Float64Array(outSize).fill(NaN);
  for (let x = 0; x < outSize; x++) {
    const xo = sourcePosition(o, x, size, outSize, scale, roi);
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

/**
 * Each axis's scale, output size and roi from what the node gives (the
 * reference's `_interpolate_nd`): `scales` or `sizes` (one per entry of
 * `axes`), `roi` (starts then ends, one each per entry of `axes`, or
 * undefined) and the `keep_aspect_ratio_policy`. `shape` may hold `null`s
 * (sizes unknown at import) only on axes `scales` resize or none resize.
 */
export function resizeGeometry(
  shape: readonly (number | null)[],
  axes: readonly number[],
  given: { scales?: readonly number[]; sizes?: readonly number[]; roi?: readonly number[] },
  policy: string,
): ResizeGeometry {
  const rank = shape.length;
  const scales = new Array<number>(rank).fill(1);
  const roi: [number, number][] = Array.from({ length: rank }, () => [0, 1]);
  const outSizes = [...shape];
  const { scales: s, sizes, roi: r } = given;
  if (r !== undefined) {
    if (r.length !== 2 * axes.length) {
      throw new RangeError(`resize: a roi of ${r.length} for ${axes.length} axes`);
    }
    axes.forEach((a, i) => roi[a] = [r[i], r[axes.length + i]]);
  }
  if (s !== undefined) {
    if (s.length !== axes.length) {
      throw new RangeError(`resize: ${s.length} scales for ${axes.length} axes`);
    }
    axes.forEach((a, i) => {
      if (!(s[i] > 0)) throw new RangeError(`resize: scale ${s[i]}`);
      scales[a] = s[i];
      const d = shape[a];
      // numpy's astype(int) of the product: truncation.
      outSizes[a] = d === null ? null : Math.trunc(s[i] * d);
    });
    return { scales, outSizes, roi };
  }
  if (sizes === undefined) throw new RangeError("resize: neither scales nor sizes");
  if (sizes.length !== axes.length) {
    throw new RangeError(`resize: ${sizes.length} sizes for ${axes.length} axes`);
  }
  const dims = axes.map((a) => {
    const d = shape[a];
    if (d === null) throw new RangeError(`resize: sizes for axis ${a} of unknown size`);
    return d;
  });
  axes.forEach((a, i) => {
    outSizes[a] = sizes[i];
    scales[a] = sizes[i] / dims[i];
  });
  if (policy !== "stretch") {
    if (policy !== "not_larger" && policy !== "not_smaller") {
      throw new RangeError(`resize: keep_aspect_ratio_policy "${policy}"`);
    }
    const picked = axes.map((a) => scales[a]);
    const one = policy === "not_larger" ? Math.min(...picked) : Math.max(...picked);
    axes.forEach((a, i) => {
      scales[a] = one;
      outSizes[a] = Math.trunc(one * dims[i] + 0.5);
    });
  }
  return { scales, outSizes, roi };
}
