/**
 * Windowed operators the im2col compositions of the ONNX importer cannot
 * give, computed on the host (host_tensors.ts): `conv_integer` (ONNX's
 * `ConvInteger`: 8-bit images and kernels less their zero points, summed
 * in int32, exact whatever the sizes), `qlinear_conv` (requantized as
 * `qlinear_matmul` is), `deform_conv` (ONNX's `DeformConv`: each tap moved
 * by an offset and sampled bilinearly) and `max_pool_indices` (the
 * `Indices` output of ONNX's `MaxPool`: where each window's maximum is, as
 * a flat index into the input, row-major or column-major).
 *
 * @example Where the maxima of 2×2 windows are
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const where = getGlobalFunc("vm.op.max_pool_indices")!;
 * using x = tensor([1, 5, 2, 0, 3, 4, 9, 8, 7], { shape: [1, 1, 3, 3] });
 * using i = where(x, [2, 2], [0, 0, 0, 0], [1, 1], [1, 1], 0) as NDArray;
 * assertEquals([...i.dataSync()], [1n, 1n, 6n, 7n]);
 * ```
 *
 * @module
 */

import { formatShape } from "../../kernels/broadcast.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { shapeArg, tensorArg } from "../validate.ts";
import {
  numbersOf,
  onHost,
  optionalTensor,
  put,
  rint,
  sizeOf,
  stridesOf,
} from "../host_operators/host_tensors.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const hostPoolBuiltins = new BuiltinTable("Host window operators", import.meta.url);

/** The windows of a pooling or convolution over `spatial` sizes. */
interface Windows {
  kernel: number[];
  pads: number[];
  strides: number[];
  dilations: number[];
  /** Output sizes. */
  out: number[];
}

/** The windows' layout from the lists (shape values), with the output sizes. */
function windows(who: string, spatial: readonly number[], lists: unknown[]): Windows {
  const [kernel, pads, strides, dilations] = lists.map((l) => [...shapeArg(l, who)]);
  const r = spatial.length;
  if (
    kernel.length !== r || pads.length !== 2 * r || strides.length !== r || dilations.length !== r
  ) {
    throw new RangeError(`${who}: window lists for ${r} spatial axes`);
  }
  const out = spatial.map((d, a) =>
    Math.floor((d + pads[a] + pads[a + r] - dilations[a] * (kernel[a] - 1) - 1) / strides[a]) + 1
  );
  if (out.some((d) => d < 1)) throw new RangeError(`${who}: no window fits [${spatial}]`);
  return { kernel, pads, strides, dilations, out };
}

/** Calls `visit` with each output position's flat index and its window's input offsets (-1: padding). */
function eachWindow(
  spatial: readonly number[],
  w: Windows,
  visit: (o: number, taps: number[]) => void,
): void {
  const r = spatial.length, inStrides = stridesOf(spatial), outStrides = stridesOf(w.out);
  const kStrides = stridesOf(w.kernel), taps = sizeOf(w.kernel);
  const offsets = new Array<number>(taps);
  for (let o = 0; o < sizeOf(w.out); o++) {
    for (let k = 0; k < taps; k++) {
      let off = 0;
      for (let a = 0; a < r && off >= 0; a++) {
        const oa = Math.floor(o / outStrides[a]) % w.out[a];
        const ka = Math.floor(k / kStrides[a]) % w.kernel[a];
        const i = oa * w.strides[a] - w.pads[a] + ka * w.dilations[a];
        off = i < 0 || i >= spatial[a] ? -1 : off + i * inStrides[a];
      }
      offsets[k] = off;
    }
    visit(o, offsets);
  }
}

hostPoolBuiltins.add(
  "vm.op.conv_integer",
  (
    x: unknown,
    w: unknown,
    xZero: unknown,
    wZero: unknown,
    pads: unknown,
    strides: unknown,
    dilations: unknown,
  ) => {
    const who = "conv_integer";
    const xt = tensorArg(x, "x", who), wt = tensorArg(w, "w", who);
    const xz = optionalTensor(xZero, "x_zero_point", who);
    const wz = optionalTensor(wZero, "w_zero_point", who);
    const [n, c, ...spatial] = xt.shape, [m, wc, ...kernel] = wt.shape;
    if (wc !== c || kernel.length !== spatial.length) {
      throw new RangeError(`${who}: w ${formatShape(wt.shape)} for x ${formatShape(xt.shape)}`);
    }
    const win = windows(who, spatial, [kernel, pads, strides, dilations]);
    return onHost(who, [xt, wt, xz, wz], ([xv, wv, xzv, wzv]) => ({
      shape: [n, m, ...win.out],
      dtype: "int32",
      fill(out) {
        const xs = numbersOf(xv!), ws = numbersOf(wv!);
        const zx = xzv === undefined ? 0 : numbersOf(xzv)[0];
        const zws = wzv === undefined ? [0] : numbersOf(wzv);
        const plane = sizeOf(spatial), taps = sizeOf(kernel), outPlane = sizeOf(win.out);
        for (let b = 0; b < n; b++) {
          for (let f = 0; f < m; f++) {
            // One kernel zero point, or one per output channel.
            const zw = zws[zws.length === 1 ? 0 : f];
            eachWindow(spatial, win, (o, offsets) => {
              let sum = 0;
              for (let ch = 0; ch < c; ch++) {
                for (let k = 0; k < taps; k++) {
                  // Padding is the zero point: it contributes nothing.
                  const xv = offsets[k] < 0 ? zx : xs[(b * c + ch) * plane + offsets[k]];
                  sum += (xv - zx) * (ws[(f * c + ch) * taps + k] - zw);
                }
              }
              (out as Int32Array)[(b * m + f) * outPlane + o] = sum;
            });
          }
        }
      },
    }));
  },
  {
    signature: "(x, w, x_zero_point?, w_zero_point?, pads, strides, dilations) → int32 tensor",
    summary:
      "ONNX's `ConvInteger` (one group): `(x − x_zero_point) ⋆ (w − w_zero_point)` of 8-bit `x [N, C, ...]` and `w [M, C, ...]`, summed in int32; padding counts as the zero point. `pads` (begins then ends), `strides`, `dilations` are shape values. Computed on the host.",
    dtypes: ["int8", "uint8"],
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not tensors), `RangeError` (a kernel that does not fit `x`).",
    tvm: null,
  },
);

hostPoolBuiltins.add(
  "vm.op.max_pool_indices",
  (
    x: unknown,
    kernel: unknown,
    pads: unknown,
    strides: unknown,
    dilations: unknown,
    storageOrder: unknown,
  ) => {
    const who = "max_pool_indices";
    const t = tensorArg(x, "x", who, "float32");
    const [n, c, ...spatial] = t.shape;
    const win = windows(who, spatial, [kernel, pads, strides, dilations]);
    const columnMajor = Boolean(storageOrder);
    return onHost(who, [t], ([xv]) => ({
      shape: [n, c, ...win.out],
      dtype: "int64",
      fill(out) {
        const xs = numbersOf(xv!), plane = sizeOf(spatial), outPlane = sizeOf(win.out);
        const inStrides = stridesOf(spatial);
        // Column-major: the spatial axes' strides reversed (ONNX's storage_order 1).
        const colStrides = spatial.map((_, a) => sizeOf(spatial.slice(0, a)));
        for (let p = 0; p < n * c; p++) {
          eachWindow(spatial, win, (o, offsets) => {
            let best = -1;
            for (const off of offsets) {
              if (off >= 0 && (best < 0 || xs[p * plane + off] > xs[p * plane + best])) best = off;
            }
            let index = best;
            if (columnMajor) {
              index = spatial.reduce(
                (s, d, a) => s + (Math.floor(best / inStrides[a]) % d) * colStrides[a],
                0,
              );
            }
            put(out, p * outPlane + o, p * plane + index);
          });
        }
      },
    }));
  },
  {
    signature: "(x, kernel, pads, strides, dilations, storage_order) → int64 tensor",
    summary:
      "The `Indices` output of ONNX's `MaxPool` for float32 `x [N, C, ...]`: for each window the flat index into `x` of its first largest element (padding never chosen), the spatial part row-major, or column-major with `storage_order`. The four lists are shape values (`pads` begins then ends). Computed on the host.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not float32), `RangeError` (a window that does not fit `x`).",
    tvm: null,
  },
);

hostPoolBuiltins.add(
  "vm.op.qlinear_conv",
  (...args: unknown[]) => {
    const who = "qlinear_conv";
    // Every one of the eight, present or not, so a missing one is a TypeError naming it.
    const [x, xs, xz, w, ws, wz, ys, yz] = Array.from(
      { length: 8 },
      (_, i) => tensorArg(args[i], `input ${i}`, who),
    );
    const bias = args[8] === undefined || args[8] === null
      ? undefined
      : tensorArg(args[8], "bias", who, "int32");
    const [pads, strides, dilations] = args.slice(9, 12);
    const [n, c, ...spatial] = x.shape, [m, wc, ...kernel] = w.shape;
    if (wc !== c || kernel.length !== spatial.length) {
      throw new RangeError(`${who}: w ${formatShape(w.shape)} for x ${formatShape(x.shape)}`);
    }
    const win = windows(who, spatial, [kernel, pads, strides, dilations]);
    const lo = yz.dtype === "int8" ? -128 : 0;
    return onHost(who, [x, xs, xz, w, ws, wz, ys, yz, bias], (views) => ({
      shape: [n, m, ...win.out],
      dtype: yz.dtype,
      fill(out) {
        const [xv, xsv, xzv, wv, wsv, wzv, ysv, yzv] = views.slice(0, 8).map((v) => numbersOf(v!));
        const bv = views[8] === undefined ? undefined : numbersOf(views[8]);
        const plane = sizeOf(spatial), taps = sizeOf(kernel), outPlane = sizeOf(win.out);
        for (let b = 0; b < n; b++) {
          for (let f = 0; f < m; f++) {
            const zw = wzv[wzv.length === 1 ? 0 : f];
            // NumPy: x_scale * w_scale / y_scale in float32, then the int32 sums times it in float64.
            const scale = Math.fround(
              Math.fround(xsv[0] * wsv[wsv.length === 1 ? 0 : f]) / ysv[0],
            );
            eachWindow(spatial, win, (o, offsets) => {
              let sum = bv === undefined ? 0 : bv[f];
              for (let ch = 0; ch < c; ch++) {
                for (let k = 0; k < taps; k++) {
                  if (offsets[k] < 0) continue;
                  sum += (xv[(b * c + ch) * plane + offsets[k]] - xzv[0]) *
                    (wv[(f * c + ch) * taps + k] - zw);
                }
              }
              const y = Math.min(Math.max(sum * scale + yzv[0], lo), lo + 255);
              (out as Int32Array)[(b * m + f) * outPlane + o] = rint(y);
            });
          }
        }
      },
    }));
  },
  {
    signature:
      "(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, bias?, pads, strides, dilations) → 8-bit tensor",
    summary:
      "ONNX's `QLinearConv` (one group): the int32 convolution of `x` and `w` less their zero points (plus the int32 `bias`), times `x_scale · w_scale / y_scale` (`w_scale` one, or one per output channel), plus `y_zero_point`, clipped to its int8 or uint8 range and rounded half to even. Computed on the host.",
    dtypes: ["int8", "uint8", "float32", "int32"],
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not tensors), `RangeError` (a kernel that does not fit `x`).",
    tvm: null,
  },
);

hostPoolBuiltins.add(
  "vm.op.deform_conv",
  (...args: unknown[]) => {
    const who = "deform_conv";
    const [x, w, offset] = ["x", "w", "offset"].map((what, i) =>
      tensorArg(args[i], what, who, "float32")
    );
    const bias = optionalTensor(args[3], "bias", who, "float32");
    const mask = optionalTensor(args[4], "mask", who, "float32");
    const [pads, strides, dilations] = args.slice(5, 8);
    const group = Number(args[8] ?? 1), offsetGroup = Number(args[9] ?? 1);
    const [n, c, ih, iw] = x.shape, [m, cg, kh, kw] = w.shape;
    if (x.shape.length !== 4 || w.shape.length !== 4 || c !== cg * group || m % group !== 0) {
      throw new RangeError(
        `${who}: x ${formatShape(x.shape)} and w ${formatShape(w.shape)} (2-D only)`,
      );
    }
    const win = windows(who, [ih, iw], [[kh, kw], pads, strides, dilations]);
    const [oh, ow] = win.out;
    if (offset.shape.join() !== [n, offsetGroup * kh * kw * 2, oh, ow].join()) {
      throw new RangeError(`${who}: offset ${formatShape(offset.shape)} for ${oh}×${ow} outputs`);
    }
    return onHost(who, [x, w, offset, bias, mask], ([xv, wv, ov, bv, mv]) => ({
      shape: [n, m, oh, ow],
      dtype: "float32",
      fill(out) {
        const xs = numbersOf(xv!), ws = numbersOf(wv!), os = numbersOf(ov!);
        const bs = bv === undefined ? undefined : numbersOf(bv);
        const ms = mv === undefined ? undefined : numbersOf(mv);
        const taps = kh * kw, perOffsetGroup = c / offsetGroup, outPerGroup = m / group;
        /** Bilinear sample of channel plane `p` at (y, x), zero outside. */
        const sample = (p: number, y: number, xx: number) => {
          const y0 = Math.floor(y), x0 = Math.floor(xx), fy = y - y0, fx = xx - x0;
          let v = 0;
          for (const [yy, wy] of [[y0, 1 - fy], [y0 + 1, fy]]) {
            for (const [xc, wx] of [[x0, 1 - fx], [x0 + 1, fx]]) {
              if (yy >= 0 && yy < ih && xc >= 0 && xc < iw) v += wy * wx * xs[p + yy * iw + xc];
            }
          }
          return v;
        };
        const o = out as Float32Array;
        for (let b = 0; b < n; b++) {
          for (let f = 0; f < m; f++) {
            const g = Math.floor(f / outPerGroup);
            for (let i = 0; i < oh; i++) {
              for (let j = 0; j < ow; j++) {
                let sum = bs === undefined ? 0 : bs[f];
                for (let cc = 0; cc < cg; cc++) {
                  const ch = g * cg + cc, og = Math.floor(ch / perOffsetGroup);
                  for (let k = 0; k < taps; k++) {
                    const ky = Math.floor(k / kw), kx = k % kw;
                    // Offsets: [n, offset_group, kh, kw, 2 (dy, dx), oh, ow].
                    const at = (d: number) =>
                      os[((((b * offsetGroup + og) * taps + k) * 2 + d) * oh + i) * ow + j];
                    const y = i * win.strides[0] - win.pads[0] + ky * win.dilations[0] + at(0);
                    const xx = j * win.strides[1] - win.pads[1] + kx * win.dilations[1] + at(1);
                    const scale = ms === undefined
                      ? 1
                      : ms[(((b * offsetGroup + og) * taps + k) * oh + i) * ow + j];
                    sum += sample((b * c + ch) * ih * iw, y, xx) * ws[(f * cg + cc) * taps + k] *
                      scale;
                  }
                }
                o[((b * m + f) * oh + i) * ow + j] = sum;
              }
            }
          }
        }
      },
    }));
  },
  {
    signature:
      "(x, w, offset, bias?, mask?, pads, strides, dilations, group, offset_group) → float32 tensor",
    summary:
      "ONNX's `DeformConv` over two spatial axes: a convolution of float32 `x [N, C, H, W]` by `w [M, C/group, kH, kW]` whose every tap is moved by `offset [N, offset_group·kH·kW·2, oH, oW]` (dy, dx), sampled bilinearly (zero outside) and weighted by `mask` (default 1), plus `bias`. `pads`, `strides`, `dilations` are shape values. Computed on the host.",
    dtypes: ["float32"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not float32 tensors), `RangeError` (shapes that do not fit, other than 2-D).",
    tvm: "relax.op.vision.deformable_conv2d",
  },
);
