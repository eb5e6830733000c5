/**
 * Image and sequence operators computed on the host (host_tensors.ts), as
 * ONNX's reference implementation computes them: `grid_sample` (ONNX's
 * `GridSample`: nearest, linear and cubic over 2 or more spatial axes),
 * `non_max_suppression`, `col2im`, `max_unpool` and `reverse_sequence`.
 * No device has kernels for them; they read their tensors on the host.
 *
 * @example Reverse the first 2 and 3 steps of two sequences (time on axis 0)
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const reverse = getGlobalFunc("vm.op.reverse_sequence")!;
 * using x = tensor([[1, 10], [2, 20], [3, 30]]);
 * using lens = tensor(new BigInt64Array([2n, 3n]), { shape: [2] });
 * using y = reverse(x, lens, 1, 0) as NDArray;
 * assertEquals([...y.dataSync()], [2, 30, 1, 20, 3, 10]);
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
  put,
  rint,
  sizeOf,
  stridesOf,
} from "../host_operators/host_tensors.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const hostVisionBuiltins = new BuiltinTable("Host image operators", import.meta.url);

/** A list of integers (a shape value or an array). */
function intsArg(v: unknown, who: string, what: string): number[] {
  return [...shapeArg(v, who, what)];
}

/** Reflects `x` into `[lo, hi]` by its nearer border, as often as it takes (the reference's rule). */
function reflect(x: number, lo: number, hi: number): number {
  const range = hi - lo;
  if (x < lo) {
    const dx = lo - x, n = Math.trunc(dx / range), r = dx - n * range;
    return n % 2 === 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const dx = x - hi, n = Math.trunc(dx / range), r = dx - n * range;
    return n % 2 === 0 ? hi - r : lo + r;
  }
  return x;
}

/** Keys' cubic convolution weights (alpha -0.75) for the four taps around fraction `t`. */
function cubicWeights(t: number): number[] {
  const a = -0.75, x = Math.abs(t);
  return [
    ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a,
    ((a + 2) * x - (a + 3)) * x * x + 1,
    ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1,
    ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a,
  ];
}

const GRID_MODES = ["nearest", "linear", "cubic"] as const;
const GRID_PADDING = ["zeros", "border", "reflection"] as const;

hostVisionBuiltins.add(
  "vm.op.grid_sample",
  (x: unknown, grid: unknown, mode: unknown, padding: unknown, alignCorners: unknown) => {
    const who = "grid_sample";
    const t = tensorArg(x, "x", who, "float32"), g = tensorArg(grid, "grid", who, "float32");
    const m = choiceArg(who, mode, "mode", GRID_MODES);
    const pad = choiceArg(who, padding, "padding", GRID_PADDING);
    const align = Boolean(alignCorners);
    const r = t.shape.length - 2;
    if (r < 1 || g.shape.length !== r + 2 || g.shape[0] !== t.shape[0] || g.shape[r + 1] !== r) {
      throw new RangeError(
        `${who}: grid ${formatShape(g.shape)} does not sample x ${formatShape(t.shape)}`,
      );
    }
    const [n, c] = t.shape, dims = t.shape.slice(2), outDims = g.shape.slice(1, r + 1);
    const shape = [n, c, ...outDims];
    return onHost(who, [t, g], ([xv, gv]) => ({
      shape,
      dtype: "float32",
      fill(out) {
        const xs = xv as Float32Array, gs = gv as Float32Array;
        const plane = sizeOf(dims), points = sizeOf(outDims), strides = stridesOf(dims);
        const lo = dims.map(() => (align ? 0 : -0.5)),
          hi = dims.map((d) => (align ? d - 1 : d - 0.5));
        /** Index `i` on axis `a` as padding maps it, or -1 for a zero. */
        const at = (a: number, i: number): number => {
          const d = dims[a];
          if (pad === "zeros") return i >= 0 && i < d ? i : -1;
          if (pad === "border") return Math.min(Math.max(i, 0), d - 1);
          return Math.trunc(reflect(i, lo[a], hi[a]));
        };
        for (let b = 0; b < n; b++) {
          for (let p = 0; p < points; p++) {
            // The grid's last axis is (x, y, …): innermost spatial axis first.
            const pos = new Array<number>(r);
            for (let a = 0; a < r; a++) {
              const v = gs[(b * points + p) * r + (r - 1 - a)];
              const d = dims[a];
              let u = Math.fround(align ? ((v + 1) / 2) * (d - 1) : ((v + 1) * d - 1) / 2);
              if (m === "nearest") u = rint(u);
              if (u < lo[a] || u > hi[a]) {
                if (pad === "border") u = Math.min(Math.max(u, 0), d - 1);
                else if (pad === "reflection") u = reflect(u, lo[a], hi[a]);
              }
              pos[a] = u;
            }
            // Per axis: the taps (indices after padding) and their weights.
            const taps = pos.map((u, a) => {
              if (m === "nearest") return [[at(a, Math.trunc(u)), 1]];
              const base = Math.floor(u), f = u - base;
              if (m === "linear") return [[at(a, base), 1 - f], [at(a, base + 1), f]];
              const w = cubicWeights(f);
              return w.map((wk, k) => [at(a, base - 1 + k), wk]);
            });
            for (let ch = 0; ch < c; ch++) {
              const src = (b * c + ch) * plane;
              let sum = 0;
              const walk = (a: number, offset: number, weight: number) => {
                if (a === r) {
                  sum += weight * xs[src + offset];
                  return;
                }
                for (const [i, w] of taps[a]) {
                  if (i >= 0) walk(a + 1, offset + i * strides[a], weight * w);
                }
              };
              walk(0, 0, 1);
              out[(b * c + ch) * points + p] = sum;
            }
          }
        }
      },
    }));
  },
  {
    signature: "(x, grid, mode, padding, align_corners) → float32 tensor",
    summary:
      'Samples float32 `x [N, C, D1, …, Dr]` at the points of `grid [N, H1, …, Hr, r]` (coordinates in [-1, 1], innermost axis first), as ONNX\'s `GridSample`: `mode` `"nearest"` (halves to even), `"linear"` or `"cubic"` (Keys, α = -0.75), outside points by `padding` `"zeros"`, `"border"` or `"reflection"`; `align_corners` puts -1 and 1 on the corner pixels\' centres rather than their outer edges. Computed on the host.',
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not float32 tensors, an unknown mode or padding), `RangeError` (a grid that does not fit `x`).",
    tvm: "relax.op.image.grid_sample",
  },
);

hostVisionBuiltins.add(
  "vm.op.non_max_suppression",
  (
    boxes: unknown,
    scores: unknown,
    maxOutput: unknown,
    iouThreshold: unknown,
    scoreThreshold: unknown,
    centerPointBox: unknown,
  ) => {
    const who = "non_max_suppression";
    const bt = tensorArg(boxes, "boxes", who, "float32");
    const st = tensorArg(scores, "scores", who, "float32");
    const [mt, it, tt] = [
      optionalTensor(maxOutput, "max_output_boxes_per_class", who),
      optionalTensor(iouThreshold, "iou_threshold", who),
      optionalTensor(scoreThreshold, "score_threshold", who),
    ];
    const [batches, count] = bt.shape, classes = st.shape[1];
    if (bt.shape.length !== 3 || bt.shape[2] !== 4 || st.shape.length !== 3) {
      throw new RangeError(
        `${who}: boxes ${formatShape(bt.shape)} and scores ${formatShape(st.shape)}`,
      );
    }
    const center = Boolean(centerPointBox);
    return onHost(who, [bt, st, mt, it, tt], ([bv, sv, mv, iv, tv]) => {
      const keep = mv === undefined || mv.length === 0 ? 0 : Math.max(numbersOf(mv)[0], 0);
      const iou = iv === undefined || iv.length === 0 ? 0 : numbersOf(iv)[0];
      const floor = tv === undefined || tv.length === 0 ? undefined : numbersOf(tv)[0];
      const bx = bv as Float32Array, sc = sv as Float32Array;
      const edges = (b: number, k: number) => {
        const o = (b * count + k) * 4;
        if (center) {
          const [cx, cy, w, h] = [bx[o], bx[o + 1], bx[o + 2], bx[o + 3]];
          return [cx - w / 2, cx + w / 2, cy - h / 2, cy + h / 2];
        }
        const [y1, x1, y2, x2] = [bx[o], bx[o + 1], bx[o + 2], bx[o + 3]];
        return [Math.min(x1, x2), Math.max(x1, x2), Math.min(y1, y2), Math.max(y1, y2)];
      };
      const suppresses = (b: number, p: number, q: number) => {
        const [ax0, ax1, ay0, ay1] = edges(b, p), [bx0, bx1, by0, by1] = edges(b, q);
        const ix = Math.min(ax1, bx1) - Math.max(ax0, bx0);
        const iy = Math.min(ay1, by1) - Math.max(ay0, by0);
        if (ix <= 0 || iy <= 0) return false;
        const inter = ix * iy, a1 = (ax1 - ax0) * (ay1 - ay0), a2 = (bx1 - bx0) * (by1 - by0);
        const union = a1 + a2 - inter;
        if (a1 <= 0 || a2 <= 0 || union <= 0) return false;
        return inter / union > iou;
      };
      const selected: [number, number, number][] = [];
      for (let b = 0; b < batches; b++) {
        for (let cl = 0; cl < classes; cl++) {
          const s = (k: number) => sc[(b * classes + cl) * count + k];
          // Highest score first; among equal scores the lower index first.
          const order = Array.from({ length: count }, (_, k) => k)
            .filter((k) => floor === undefined || s(k) > floor)
            .sort((p, q) => s(q) - s(p) || p - q);
          const kept: number[] = [];
          for (const k of order) {
            if (kept.length >= keep) break;
            if (kept.every((j) => !suppresses(b, k, j))) {
              kept.push(k);
              selected.push([b, cl, k]);
            }
          }
        }
      }
      return {
        shape: [selected.length, 3],
        dtype: "int64",
        fill: (out) => selected.flat().forEach((v, i) => put(out, i, v)),
      };
    });
  },
  {
    signature:
      "(boxes, scores, max_output_boxes_per_class?, iou_threshold?, score_threshold?, center_point_box?) → int64 tensor [count, 3]",
    summary:
      "ONNX's `NonMaxSuppression`: per batch and class, boxes by descending score (equal scores by index; only those above `score_threshold` when given), each kept unless its intersection over union with a kept box exceeds `iou_threshold`, at most `max_output_boxes_per_class` (default 0); rows `[batch, class, box]`. Boxes are `[y1, x1, y2, x2]` corners, or `[x, y, w, h]` with `center_point_box`. Computed on the host.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not float32 tensors), `RangeError` (boxes not `[N, B, 4]`, scores not `[N, C, B]`).",
    tvm: "relax.op.vision.all_class_non_max_suppression",
  },
);

hostVisionBuiltins.add(
  "vm.op.col2im",
  (
    x: unknown,
    imageShape: unknown,
    blockShape: unknown,
    dilations: unknown,
    pads: unknown,
    strides: unknown,
  ) => {
    const who = "col2im";
    const t = tensorArg(x, "x", who, "float32");
    const it = tensorArg(imageShape, "image_shape", who);
    const bt = tensorArg(blockShape, "block_shape", who);
    const list = (v: unknown, what: string, fill: number, k: number) =>
      v === undefined || v === null ? new Array<number>(k).fill(fill) : intsArg(v, who, what);
    return onHost(who, [t, it, bt], ([xv, iv, bv]) => {
      const image = integersOf(iv!, "image_shape", who);
      const block = integersOf(bv!, "block_shape", who);
      const r = image.length;
      const dil = list(dilations, "dilations", 1, r), pd = list(pads, "pads", 0, 2 * r);
      const st = list(strides, "strides", 1, r);
      const kernel = sizeOf(block);
      const [n, cols, length] = t.shape;
      const blocks = image.map((d, a) =>
        Math.floor((d + pd[a] + pd[a + r] - dil[a] * (block[a] - 1) - 1) / st[a]) + 1
      );
      if (t.shape.length !== 3 || cols % kernel !== 0 || length !== sizeOf(blocks)) {
        throw new RangeError(
          `${who}: x ${
            formatShape(t.shape)
          } is not the columns of [${image}] in blocks of [${block}]`,
        );
      }
      const c = cols / kernel;
      return {
        shape: [n, c, ...image],
        dtype: "float32",
        fill(out) {
          const xs = xv as Float32Array, ys = out as Float32Array;
          const plane = sizeOf(image), imStrides = stridesOf(image);
          const bStrides = stridesOf(blocks), kStrides = stridesOf(block);
          for (let b = 0; b < n; b++) {
            for (let ch = 0; ch < c; ch++) {
              for (let k = 0; k < kernel; k++) {
                for (let l = 0; l < length; l++) {
                  let offset = 0, inside = true;
                  for (let a = 0; a < r; a++) {
                    const ka = Math.floor(k / kStrides[a]) % block[a];
                    const la = Math.floor(l / bStrides[a]) % blocks[a];
                    const i = la * st[a] - pd[a] + ka * dil[a];
                    if (i < 0 || i >= image[a]) inside = false;
                    offset += i * imStrides[a];
                  }
                  if (inside) {
                    ys[(b * c + ch) * plane + offset] +=
                      xs[(b * cols + ch * kernel + k) * length + l];
                  }
                }
              }
            }
          }
        },
      };
    });
  },
  {
    signature: "(x, image_shape, block_shape, dilations?, pads?, strides?) → float32 tensor",
    summary:
      "ONNX's `Col2Im`: the columns `x [N, C·∏block, L]` of sliding blocks summed back into images `[N, C, ...image_shape]` (the inverse of im2col; overlapping elements add). `image_shape` and `block_shape` are 1-D integer tensors read when it runs; `dilations` (default 1s), `pads` (begins then ends, default 0s) and `strides` (default 1s) are shape values. Computed on the host.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not a float32 tensor), `RangeError` (columns that do not fit the blocks).",
    tvm: null,
  },
);

hostVisionBuiltins.add(
  "vm.op.max_unpool",
  (x: unknown, indices: unknown, shape: unknown, padded?: unknown) => {
    const who = "max_unpool";
    const t = tensorArg(x, "x", who), ix = tensorArg(indices, "indices", who);
    const out = intsArg(shape, who, "shape");
    const pt = padded === undefined || padded === null
      ? undefined
      : tensorArg(padded, "padded_shape", who);
    if (ix.size !== t.size) {
      throw new RangeError(
        `${who}: indices ${formatShape(ix.shape)} for x ${formatShape(t.shape)}`,
      );
    }
    return onHost(who, [t, ix, pt], ([xv, iv, pv]) => {
      const within = pv === undefined ? out : integersOf(pv, "padded_shape", who);
      if (within.length !== out.length || within.some((d, a) => d < out[a])) {
        throw new RangeError(`${who}: shape [${within}] does not hold [${out}]`);
      }
      const idx = integersOf(iv!, "indices", who), total = sizeOf(out);
      const from = stridesOf(out), to = stridesOf(within);
      return {
        shape: within,
        dtype: t.dtype,
        fill(o) {
          idx.forEach((j, i) => {
            if (j < 0 || j >= total) {
              throw new RangeError(`${who}: index ${j} outside ${formatShape(out)}`);
            }
            // Index j of `shape`, written at the same coordinates of the padded result.
            let k = 0;
            for (let a = 0; a < out.length; a++) k += (Math.floor(j / from[a]) % out[a]) * to[a];
            (o as Float32Array)[k] = (xv as Float32Array)[i];
          });
        },
      };
    });
  },
  {
    signature: "(x, indices, shape, padded_shape?) → tensor",
    summary:
      "ONNX's `MaxUnpool`: a zero tensor of `shape` (a shape value) with each element of `x` written at the flat index `indices` holds for it (what `MaxPool` gave as its `Indices`); with `padded_shape` (a 1-D integer tensor read when it runs, no smaller on any axis), that tensor at the start of a zero tensor of it, as ONNX's `output_shape` asks. Computed on the host.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not tensors), `RangeError` (an index outside the result, sizes that differ).",
    tvm: null,
  },
);

hostVisionBuiltins.add(
  "vm.op.reverse_sequence",
  (x: unknown, lengths: unknown, batchAxis: unknown, timeAxis: unknown) => {
    const who = "reverse_sequence";
    const t = tensorArg(x, "x", who), lt = tensorArg(lengths, "lengths", who);
    const ba = axisOf(who, batchAxis, t.shape.length), ta = axisOf(who, timeAxis, t.shape.length);
    return onHost(who, [t, lt], ([xv, lv]) => {
      const lens = integersOf(lv!, "lengths", who), strides = stridesOf(t.shape);
      return {
        shape: t.shape,
        dtype: t.dtype,
        fill(out) {
          const src = xv as Float32Array;
          for (let i = 0; i < t.size; i++) {
            const b = Math.floor(i / strides[ba]) % t.shape[ba];
            const k = Math.floor(i / strides[ta]) % t.shape[ta];
            const len = Math.min(Math.max(lens[b], 0), t.shape[ta]);
            (out as Float32Array)[i] = k < len ? src[i + (len - 1 - 2 * k) * strides[ta]] : src[i];
          }
        },
      };
    });
  },
  {
    signature: "(x, lengths, batch_axis, time_axis) → tensor",
    summary:
      "ONNX's `ReverseSequence`: for each index `b` of `batch_axis`, the first `lengths[b]` elements along `time_axis` reversed, the rest as they are. Computed on the host.",
    dtypes: "any",
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not tensors), `RangeError` (an axis out of range).",
    tvm: null,
  },
);

hostVisionBuiltins.add(
  "vm.op.affine_grid",
  (theta: unknown, size: unknown, alignCorners: unknown) => {
    const who = "affine_grid";
    const t = tensorArg(theta, "theta", who, "float32"), s = tensorArg(size, "size", who);
    const align = Boolean(alignCorners);
    return onHost(who, [t, s], ([tv, sv]) => {
      const [n, , ...dims] = integersOf(sv!, "size", who);
      const r = dims.length;
      if ((r !== 2 && r !== 3) || t.shape.join() !== [n, r, r + 1].join()) {
        throw new RangeError(`${who}: theta ${formatShape(t.shape)} for a size of ${r + 2} axes`);
      }
      // Each axis' coordinates in [-1, 1]: the pixels' centres, or their corners when aligned.
      const axis = dims.map((d) =>
        Array.from(
          { length: d },
          (_, i) => align ? (d === 1 ? -1 : -1 + (2 * i) / (d - 1)) : -1 + (2 * i + 1) / d,
        )
      );
      const points = sizeOf(dims), strides = stridesOf(dims);
      return {
        shape: [n, ...dims, r],
        dtype: "float32",
        fill(out) {
          const th = numbersOf(tv!);
          for (let b = 0; b < n; b++) {
            for (let p = 0; p < points; p++) {
              // Homogeneous (x, y[, z], 1): the innermost axis first.
              const base = dims.map((_, a) => axis[a][Math.floor(p / strides[a]) % dims[a]])
                .reverse();
              base.push(1);
              for (let k = 0; k < r; k++) {
                let v = 0;
                for (let q = 0; q <= r; q++) v += th[(b * r + k) * (r + 1) + q] * base[q];
                (out as Float32Array)[(b * points + p) * r + k] = v;
              }
            }
          }
        },
      };
    });
  },
  {
    signature: "(theta, size, align_corners) → float32 tensor",
    summary:
      "ONNX's `AffineGrid`: for affine matrices `theta [N, 2, 3]` (or `[N, 3, 4]`) and `size` `[N, C, H, W]` (or `[N, C, D, H, W]`; a 1-D integer tensor read when it runs), the sampling grid `[N, H, W, 2]` (`[N, D, H, W, 3]`) of each output pixel's transformed coordinates in [-1, 1], innermost axis first, as `grid_sample` reads them. `align_corners` puts -1 and 1 on the corner pixels' centres. Computed on the host.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not tensors), `RangeError` (theta that does not match the size's axes).",
    tvm: "relax.op.image.affine_grid",
  },
);

hostVisionBuiltins.add(
  "vm.op.roi_align",
  (
    x: unknown,
    rois: unknown,
    batchIndices: unknown,
    mode: unknown,
    outHeight: unknown,
    outWidth: unknown,
    samplingRatio: unknown,
    spatialScale: unknown,
    halfPixel: unknown,
  ) => {
    const who = "roi_align";
    const t = tensorArg(x, "x", who, "float32"), rt = tensorArg(rois, "rois", who, "float32");
    const bt = tensorArg(batchIndices, "batch_indices", who);
    const m = choiceArg(who, mode, "mode", ["avg", "max"]);
    const [ph, pw, ratio] = [outHeight, outWidth, samplingRatio].map((v) => Number(v));
    const scale = Number(spatialScale), half = Boolean(halfPixel);
    if (t.shape.length !== 4 || rt.shape.length !== 2 || rt.shape[1] !== 4) {
      throw new RangeError(`${who}: x ${formatShape(t.shape)} and rois ${formatShape(rt.shape)}`);
    }
    const [, c, h, w] = t.shape, n = rt.shape[0];
    return onHost(who, [t, rt, bt], ([xv, rv, bv]) => ({
      shape: [n, c, ph, pw],
      dtype: "float32",
      fill(out) {
        const xs = numbersOf(xv!), rs = numbersOf(rv!), bs = integersOf(bv!, "batch_indices", who);
        const o = out as Float32Array, offset = half ? 0.5 : 0;
        for (let r = 0; r < n; r++) {
          const [x0, y0, x1, y1] = [0, 1, 2, 3].map((k) => rs[r * 4 + k] * scale - offset);
          let rw = x1 - x0, rh = y1 - y0;
          if (!half) [rw, rh] = [Math.max(rw, 1), Math.max(rh, 1)];
          const bh = rh / ph, bw = rw / pw;
          const gh = ratio > 0 ? ratio : Math.ceil(rh / ph),
            gw = ratio > 0 ? ratio : Math.ceil(rw / pw);
          const count = Math.max(gh * gw, 1);
          // Each sample: four corner offsets into a channel's plane and their bilinear weights.
          const samples: [number[], number[]][][] = [];
          for (let i = 0; i < ph; i++) {
            for (let j = 0; j < pw; j++) {
              const bin: [number[], number[]][] = [];
              for (let iy = 0; iy < gh; iy++) {
                for (let ix = 0; ix < gw; ix++) {
                  let yy = y0 + i * bh + ((iy + 0.5) * bh) / gh;
                  let xx = x0 + j * bw + ((ix + 0.5) * bw) / gw;
                  if (yy < -1 || yy > h || xx < -1 || xx > w) {
                    bin.push([[0, 0, 0, 0], [0, 0, 0, 0]]);
                    continue;
                  }
                  yy = Math.max(yy, 0);
                  xx = Math.max(xx, 0);
                  let yl = Math.trunc(yy), xl = Math.trunc(xx), yh: number, xh: number;
                  if (yl >= h - 1) yh = yl = yy = h - 1;
                  else yh = yl + 1;
                  if (xl >= w - 1) xh = xl = xx = w - 1;
                  else xh = xl + 1;
                  const ly = yy - yl, lx = xx - xl, hy = 1 - ly, hx = 1 - lx;
                  bin.push([
                    [yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh],
                    [hy * hx, hy * lx, ly * hx, ly * lx],
                  ]);
                }
              }
              samples.push(bin);
            }
          }
          for (let ch = 0; ch < c; ch++) {
            const base = (bs[r] * c + ch) * h * w;
            samples.forEach((bin, k) => {
              let v = m === "avg" ? 0 : -Infinity;
              for (const [pos, wt] of bin) {
                const terms = pos.map((p, q) => wt[q] * xs[base + p]);
                if (m === "avg") v += terms[0] + terms[1] + terms[2] + terms[3];
                else v = Math.max(v, ...terms);
              }
              o[(r * c + ch) * ph * pw + k] = m === "avg" ? v / count : v;
            });
          }
        }
      },
    }));
  },
  {
    signature:
      "(x, rois, batch_indices, mode, output_height, output_width, sampling_ratio, spatial_scale, half_pixel) → float32 tensor",
    summary:
      'ONNX\'s `RoiAlign`: for each region `[x1, y1, x2, y2]` of `rois` (scaled by `spatial_scale`, shifted half a pixel with `half_pixel`) in image `batch_indices[r]` of float32 `x [N, C, H, W]`, an `output_height × output_width` grid of bins, each the average (`mode` `"avg"`) or largest weighted corner (`"max"`, as the reference takes it) of bilinear samples on a `sampling_ratio` grid (0: as many as the bin spans). Computed on the host.',
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not float32 tensors, an unknown mode), `RangeError` (shapes).",
    tvm: "relax.op.vision.roi_align",
  },
);
