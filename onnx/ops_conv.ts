/**
 * Convolution and pooling windows (`Conv`, `MaxPool`, `AveragePool`,
 * `LpPool`) through im2col: the input, flattened per channel with one
 * padding element appended, is gathered (`vm.op.take`) by a constant index
 * tensor of every window's every element `[kernel, output]` (a window
 * element in the padding reads the padding element), then reduced
 * (pooling) or multiplied by the weights (`vm.op.matmul`, groups as a batch
 * axis). Strides, dilations, explicit and `auto_pad` padding, `ceil_mode`
 * and `count_include_pad` are all in the index tensor and the divisor, which
 * are computed at import: the shapes must be known then, and the index
 * tensor holds kernel × output elements. So 2-D `Conv`, and 2-D
 * `ConvTranspose` by weights known at import, go instead to the direct
 * kernel `vm.op.conv2d`, which follows image sizes known only at run time;
 * the index path stays for 1-D and 3-D convolutions and for pooling.
 *
 * @module
 */

import type { CallArg } from "../builder/builder_options.ts";
import { tensor } from "../devices/tensor.ts";
import { formatConvEpilogue } from "../builtins/operators/conv_epilogue.ts";
import { type ChannelAffine, convChannelAffines, convEpilogues } from "./conv_fusion.ts";
import { type Dim, shapeText, Unsupported, type Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import { FLOAT, type OpSpec } from "./op_spec.ts";
import { binary, unary } from "./ops_elementwise.ts";
import { reshapeTo } from "./ops_shape.ts";

/** Most elements of an im2col index tensor (64 MiB of int32). */
const MAX_INDEX_ELEMENTS = 1 << 24;

const product = (xs: readonly number[]) => xs.reduce((a, b) => a * b, 1);

/** The window geometry of one node over spatial dims `size`. */
interface Windows {
  kernel: number[];
  out: number[];
  /** Padding before each spatial dim. */
  begin: number[];
  /** Padding after each spatial dim. */
  end: number[];
  strides: number[];
  dilations: number[];
}

/** Reads kernel, strides, dilations and padding (`pads` or `auto_pad`) as ONNX defines them. */
function windows(cx: NodeContext, size: number[], kernel: number[], pooling: boolean): Windows {
  const n = size.length;
  const strides = cx.ints("strides") ?? new Array(n).fill(1);
  const dilations = cx.ints("dilations") ?? new Array(n).fill(1);
  const pads = cx.ints("pads") ?? new Array(2 * n).fill(0);
  const autoPad = cx.string("auto_pad", "NOTSET");
  const ceil = pooling && cx.int("ceil_mode", 0) === 1;
  const begin = pads.slice(0, n), end = pads.slice(n);
  const out: number[] = [];
  for (let d = 0; d < n; d++) {
    const span = (kernel[d] - 1) * dilations[d] + 1;
    if (autoPad === "SAME_UPPER" || autoPad === "SAME_LOWER") {
      const o = Math.ceil(size[d] / strides[d]);
      const total = Math.max(0, (o - 1) * strides[d] + span - size[d]);
      begin[d] = autoPad === "SAME_UPPER" ? Math.floor(total / 2) : Math.ceil(total / 2);
      end[d] = total - begin[d];
      out.push(o);
      continue;
    }
    if (autoPad === "VALID") begin[d] = end[d] = 0;
    else if (autoPad !== "NOTSET") throw new Unsupported(`auto_pad="${autoPad}"`);
    const room = size[d] + begin[d] + end[d] - span;
    let o = (ceil ? Math.ceil(room / strides[d]) : Math.floor(room / strides[d])) + 1;
    // With ceil_mode a last window must still start inside the input or its leading padding.
    if (ceil && (o - 1) * strides[d] >= size[d] + begin[d]) o--;
    out.push(o);
  }
  if (out.some((o) => o <= 0)) throw new Unsupported(`windows that produce no output`);
  return { kernel, out, begin, end, strides, dilations };
}

/**
 * The im2col index `[kernel elements, output positions]` into a channel of
 * `size` flattened (the padding element at index `product(size)`), and per
 * output position how many window elements fall in the input (`inside`) or
 * in the input and its explicit padding (`padded`).
 */
function im2col(
  size: number[],
  w: Windows,
): { index: Int32Array; inside: number[]; padded: number[] } {
  const kk = product(w.kernel), oo = product(w.out), pad = product(size);
  if (kk * oo > MAX_INDEX_ELEMENTS) {
    throw new Unsupported(`a window index of ${kk * oo} elements (a direct kernel is missing)`);
  }
  const index = new Int32Array(kk * oo);
  const inside = new Array<number>(oo).fill(0), padded = new Array<number>(oo).fill(0);
  const n = size.length;
  const kc = new Array<number>(n), oc = new Array<number>(n);
  for (let k = 0; k < kk; k++) {
    let r = k;
    for (let d = n - 1; d >= 0; d--) {
      kc[d] = r % w.kernel[d];
      r = Math.floor(r / w.kernel[d]);
    }
    for (let o = 0; o < oo; o++) {
      let q = o;
      for (let d = n - 1; d >= 0; d--) {
        oc[d] = q % w.out[d];
        q = Math.floor(q / w.out[d]);
      }
      let flat = 0, isInside = true, isPadded = true;
      for (let d = 0; d < n; d++) {
        const s = oc[d] * w.strides[d] - w.begin[d] + kc[d] * w.dilations[d];
        if (s < 0 || s >= size[d]) isInside = false;
        if (s < -w.begin[d] || s >= size[d] + w.end[d]) isPadded = false;
        flat = flat * size[d] + s;
      }
      index[k * oo + o] = isInside ? flat : pad;
      if (isInside) inside[o]++;
      if (isPadded) padded[o]++;
    }
  }
  return { index, inside, padded };
}

/** A float32 constant. */
function constant(cx: NodeContext, data: ArrayLike<number>, shape: number[]): Value {
  const t = tensor(Float32Array.from(data), { shape });
  cx.made.push(t);
  return cx.fromTensor(t);
}

/**
 * `x [N, C, *S]` as windows `[N, C, kernel, output]`, padding elements
 * reading `padValue`. Returns the windows and the geometry.
 */
function gatherWindows(
  cx: NodeContext,
  x: Value,
  kernel: number[],
  pooling: boolean,
  padValue: number,
): { cols: Value; w: Windows; inside: number[]; padded: number[] } {
  cx.dtype(x, FLOAT);
  // The batch may be a symbol: the index is per channel.
  if (!x.shape.slice(1).every((d) => typeof d === "number") || x.shape.length < 3) {
    throw new Unsupported(`windows over an input of shape ${shapeText(x.shape)}`);
  }
  const size = (x.shape as number[]).slice(2);
  const w = windows(cx, size, kernel, pooling);
  const { index, inside, padded } = im2col(size, w);
  const cols = gatherByIndex(cx, x, index, product(kernel), product(w.out), padValue);
  return { cols, w, inside, padded };
}

/**
 * `x [N, C, *S]` gathered by `index [kk, oo]` into its channels flattened
 * with one padding element (`padValue`) appended: `[N, C, kk, oo]`.
 */
function gatherByIndex(
  cx: NodeContext,
  x: Value,
  index: Int32Array,
  kk: number,
  oo: number,
  padValue: number,
): Value {
  const [n, c, ...size] = x.shape as number[];
  const p = product(size);
  const flat = reshapeTo(cx, x, [n, c, p]);
  const idx = tensor(index, { shape: [kk, oo] });
  cx.made.push(idx);
  if (!index.includes(p)) {
    // No window reaches into the padding: gather from the input itself.
    return cx.em.call(
      "vm.op.take",
      [cx.em.reg(flat), cx.em.reg(cx.fromTensor(idx)), cx.em.imm(2)],
      "float32",
      [n, c, kk, oo],
    );
  }
  if (typeof n !== "number") throw new Unsupported(`padded windows over a batch of size ${n}`);
  const padT = tensor(new Float32Array(n * c).fill(padValue), { shape: [n, c, 1] });
  cx.made.push(padT);
  const tuple = cx.em.record("vm.builtin.make_tuple", [
    cx.em.reg(flat),
    cx.em.reg(cx.fromTensor(padT)),
  ])!;
  const withPad = cx.em.call("vm.op.concat", [tuple, cx.em.imm(2)], "float32", [n, c, p + 1]);
  return cx.em.call(
    "vm.op.take",
    [cx.em.reg(withPad), cx.em.reg(cx.fromTensor(idx)), cx.em.imm(2)],
    "float32",
    [n, c, kk, oo],
  );
}

/**
 * The index of a transposed convolution: output `o` takes input
 * `i = (o + begin − k·dilation) / stride` through kernel element `k` when
 * that is a whole number inside the input (ONNX's col2im, read backwards).
 */
function transposedIndex(
  size: number[],
  kernel: number[],
  out: number[],
  strides: number[],
  dilations: number[],
  begin: number[],
): Int32Array {
  const kk = product(kernel), oo = product(out), pad = product(size), n = size.length;
  if (kk * oo > MAX_INDEX_ELEMENTS) {
    throw new Unsupported(`a window index of ${kk * oo} elements (a direct kernel is missing)`);
  }
  const index = new Int32Array(kk * oo);
  const kc = new Array<number>(n), oc = new Array<number>(n);
  for (let k = 0; k < kk; k++) {
    let r = k;
    for (let d = n - 1; d >= 0; d--) {
      kc[d] = r % kernel[d];
      r = Math.floor(r / kernel[d]);
    }
    for (let o = 0; o < oo; o++) {
      let q = o;
      for (let d = n - 1; d >= 0; d--) {
        oc[d] = q % out[d];
        q = Math.floor(q / out[d]);
      }
      let flat = 0, ok = true;
      for (let d = 0; d < n && ok; d++) {
        const t = oc[d] + begin[d] - kc[d] * dilations[d];
        const i = t / strides[d];
        if (t < 0 || t % strides[d] !== 0 || i >= size[d]) ok = false;
        flat = flat * size[d] + i;
      }
      index[k * oo + o] = ok ? flat : pad;
    }
  }
  return index;
}

/** `vm.op.<op>` over the window axis (2) of `cols [N, C, K, O]`, reshaped to `[N, C, *out]`. */
function pool(cx: NodeContext, op: string, cols: Value, out: number[]): Value {
  const [n, c, , oo] = cols.shape as number[];
  const r = cx.em.call(`vm.op.${op}`, [cx.em.reg(cols), [2], cx.em.imm(0)], "float32", [n, c, oo]);
  return reshapeTo(cx, r, [n, c, ...out]);
}

function kernelShape(cx: NodeContext): number[] {
  const k = cx.ints("kernel_shape");
  if (k === undefined) throw new Unsupported("no kernel_shape");
  return k;
}

/**
 * `Conv` of images `[N, C, H, W]` as one `vm.op.conv2d`: no index tensor, so
 * image sizes may be symbols (the output's are bound when it is made) and
 * memory does not grow with kernel × output. Padding is `pads`, or
 * `auto_pad`'s when the size is known at import.
 */
function conv2d(cx: NodeContext, x: Value, weight: Value, bias: Value | undefined): Value {
  cx.dtype(x, FLOAT);
  const [m, cg, kh, kw] = weight.shape as number[];
  const kernel = cx.ints("kernel_shape") ?? [kh, kw];
  if (kernel.length !== 2 || kernel[0] !== kh || kernel[1] !== kw) {
    throw new Unsupported(`kernel_shape [${kernel}] for weights ${shapeText(weight.shape)}`);
  }
  const g = cx.int("group", 1), c = x.shape[1];
  if ((typeof c === "number" && c !== cg * g) || m % g !== 0) {
    throw new Unsupported(`group ${g} of ${c} channels`);
  }
  const strides = cx.ints("strides") ?? [1, 1], dilations = cx.ints("dilations") ?? [1, 1];
  const size = x.shape.slice(2);
  const autoPad = cx.string("auto_pad", "NOTSET");
  let pads = cx.ints("pads") ?? [0, 0, 0, 0];
  if (autoPad === "VALID") pads = [0, 0, 0, 0];
  else if (autoPad !== "NOTSET") {
    if (!size.every((d) => typeof d === "number")) {
      throw new Unsupported(`auto_pad="${autoPad}" over an image of size not known at import`);
    }
    const w = windows(cx, size as number[], kernel, false);
    pads = [...w.begin, ...w.end];
  }
  const out = size.map((d, i) => {
    if (typeof d !== "number") return null;
    const room = d + pads[i] + pads[i + 2] - (kernel[i] - 1) * dilations[i] - 1;
    if (room < 0) throw new Unsupported(`windows that produce no output`);
    return Math.floor(room / strides[i]) + 1;
  });
  const args: CallArg[] = [
    cx.em.reg(x),
    cx.em.reg(weight),
    strides,
    pads,
    dilations,
    cx.em.imm(g),
    [1, 1],
  ];
  const affine = convChannelAffines.get(cx.node);
  if (affine !== undefined) {
    const w = weight.tensor!.dataSync() as Float32Array;
    args[1] = cx.em.reg(scaledWeights(cx, w, weight.shape as number[], affine));
  }
  pushBiasAndEpilogue(cx, args, bias, m, affine);
  return cx.em.call("vm.op.conv2d", args, "float32", [x.shape[0], m, ...out]);
}

/**
 * `Conv` of sequences `[N, C, W]` (one group, shapes known at import) as
 * `vm.op.linear` of the windows: the input, channels flattened with one
 * padding element appended, is gathered into rows `[N·O, C·K]` (each
 * output position's window across every channel), which `vm.op.linear`
 * multiplies by the weights `[M, C·K]` read as stored — when they are
 * constants, sealed, so they stay in the kernels' memory instead of being
 * copied each call as the left operand of a `matmul` is — adding the bias
 * as it stores `[N·O, M]`;
 * a transpose gives `[N, M, O]` (a reshape where `O` is 1). Null where it
 * does not apply.
 */
function conv1dByLinear(
  cx: NodeContext,
  x: Value,
  weight: Value,
  bias: Value | undefined,
): Value | null {
  const [m, c, k] = weight.shape as number[];
  if (cx.int("group", 1) !== 1) return null;
  if (!x.shape.every((d) => typeof d === "number") || x.shape[1] !== c) return null;
  cx.dtype(x, FLOAT);
  const [n, , size] = x.shape as number[];
  const w = windows(cx, [size], cx.ints("kernel_shape") ?? [k], false);
  if (w.kernel.length !== 1 || w.kernel[0] !== k) return null;
  const { index } = im2col([size], w);
  const oo = w.out[0], ck = c * k, pad = c * size;
  // Row o, column (ci, j): the window element j of output o in channel ci (`pad` in the padding).
  const rows = new Int32Array(oo * ck);
  for (let o = 0; o < oo; o++) {
    for (let ci = 0; ci < c; ci++) {
      for (let j = 0; j < k; j++) {
        const v = index[j * oo + o];
        rows[(o * c + ci) * k + j] = v === size ? pad : ci * size + v;
      }
    }
  }
  // One sequence: its channels flattened to one axis, gathered straight into the rows [O, C·K].
  const lead = n === 1 ? [] : [n], axis = lead.length;
  let flat = reshapeTo(cx, x, [...lead, pad]);
  if (rows.includes(pad)) {
    const zeros = tensor(new Float32Array(n), { shape: [...lead, 1] });
    cx.made.push(zeros);
    const tuple = cx.em.record("vm.builtin.make_tuple", [
      cx.em.reg(flat),
      cx.em.reg(cx.fromTensor(zeros)),
    ])!;
    flat = cx.em.call("vm.op.concat", [tuple, cx.em.imm(axis)], "float32", [...lead, pad + 1]);
  }
  const idx = tensor(rows, { shape: [oo, ck] });
  cx.made.push(idx);
  const cols = cx.em.call(
    "vm.op.take",
    [cx.em.reg(flat), cx.em.reg(cx.fromTensor(idx)), cx.em.imm(axis)],
    "float32",
    [...lead, oo, ck],
  );
  // A parameter (an initializer, which `load_params` may replace) is read as it is at run time.
  const wt = weight.tensor === undefined || weight.param !== undefined
    ? reshapeTo(cx, weight, [m, ck])
    : constant(cx, weight.tensor.dataSync() as Float32Array, [m, ck]);
  const args = [cx.em.reg(n === 1 ? cols : reshapeTo(cx, cols, [n * oo, ck])), cx.em.reg(wt)];
  if (bias !== undefined) args.push(cx.em.reg(bias));
  const y = cx.em.call("vm.op.linear", args, "float32", [n * oo, m]);
  if (oo === 1) return reshapeTo(cx, y, [n, m, 1]);
  const y3 = reshapeTo(cx, y, [n, oo, m]);
  return cx.em.call("vm.op.transpose", [cx.em.reg(y3), [0, 2, 1]], "float32", [n, m, oo]);
}

/**
 * Weights of `shape` `[M, …]` (`w`, row-major) with row `m` times
 * `affine.scale[m]`: the per-channel steps conv_fusion.ts folded into the
 * convolution.
 */
function scaledWeights(
  cx: NodeContext,
  w: Float32Array,
  shape: number[],
  affine: ChannelAffine,
): Value {
  const m = shape[0], per = w.length / m, out = new Float32Array(w.length);
  for (let o = 0; o < m; o++) {
    const s = affine.scale[o];
    for (let i = o * per; i < (o + 1) * per; i++) out[i] = w[i] * s;
  }
  return constant(cx, out, shape);
}

/**
 * A `vm.op.conv2d` call's bias and epilogue arguments: the bias (`bias ·
 * scale + shift` where per-channel steps were folded, conv_fusion.ts), and
 * the node's folded epilogue after it (a zero bias holding the place where
 * there is none).
 */
function pushBiasAndEpilogue(
  cx: NodeContext,
  args: CallArg[],
  bias: Value | undefined,
  m: number,
  affine: ChannelAffine | undefined,
): void {
  const epilogue = convEpilogues.get(cx.node);
  if (affine !== undefined) {
    const b = bias === undefined ? null : bias.tensor!.dataSync() as Float32Array;
    const folded = Float32Array.from(
      { length: m },
      (_, o) => (b === null ? 0 : b[o] * affine.scale[o]) + affine.shift[o],
    );
    args.push(cx.em.reg(constant(cx, folded, [m])));
  } else if (bias !== undefined) args.push(cx.em.reg(bias));
  else if (epilogue !== undefined) {
    // The epilogue comes after the bias argument: a zero bias holds its place.
    args.push(cx.em.reg(constant(cx, new Float32Array(m), [m])));
  }
  if (epilogue !== undefined) args.push(formatConvEpilogue(epilogue));
}

/**
 * `ConvTranspose` of images `[N, C, H, W]` by weights known at import, as
 * one `vm.op.conv2d` over the input spaced out by the strides: kernel
 * element `k` of a transposed convolution adds input `i` into output
 * `i·s − begin + k·d`, which is an ordinary convolution of the spaced-out
 * input padded by `(K − 1)·d − begin` with the kernel flipped and its two
 * channel axes swapped per group. Null when that padding would be negative
 * (pads wider than the kernel), which the index path still takes.
 */
function convTranspose2d(
  cx: NodeContext,
  x: Value,
  weight: Value,
  bias: Value | undefined,
): Value | null {
  const [c, mg, kh, kw] = weight.shape as number[];
  const g = cx.int("group", 1), m = mg * g, cg = c / g;
  if (c % g !== 0 || (typeof x.shape[1] === "number" && x.shape[1] !== c)) {
    throw new Unsupported(`group ${g} of ${x.shape[1]} channels`);
  }
  const kernel = [kh, kw];
  const strides = cx.ints("strides") ?? [1, 1], dilations = cx.ints("dilations") ?? [1, 1];
  const outPad = cx.ints("output_padding") ?? [0, 0];
  const autoPad = cx.string("auto_pad", "NOTSET");
  const size = x.shape.slice(2);
  const known = size.every((d) => typeof d === "number");
  const sizes = size as number[];
  const full = (d: number) =>
    strides[d] * (sizes[d] - 1) + outPad[d] + (kernel[d] - 1) * dilations[d] + 1;
  let pads = cx.ints("pads");
  let outShape = cx.ints("output_shape");
  if ((outShape !== undefined || (pads === undefined && autoPad.startsWith("SAME"))) && !known) {
    throw new Unsupported("output_shape or auto_pad over an image of size not known at import");
  }
  if (pads === undefined && (autoPad === "SAME_UPPER" || autoPad === "SAME_LOWER")) {
    // As ONNX's reference: the output is the input times the strides unless given.
    const target = outShape ?? sizes.map((s, d) => s * strides[d]);
    const total = target.map((o, d) => full(d) - o);
    const first = total.map((t) =>
      autoPad === "SAME_UPPER" ? Math.floor(t / 2) : t - Math.floor(t / 2)
    );
    pads = [...first, ...total.map((t, d) => t - first[d])];
    outShape = target;
  }
  const p = pads ?? [0, 0, 0, 0];
  const out: Dim[] = known
    ? outShape ?? sizes.map((_, d) => full(d) - p[d] - p[d + 2])
    : [null, null];
  const before = kernel.map((k, d) => (k - 1) * dilations[d] - p[d]);
  const after = kernel.map((k, d) =>
    known
      ? (out[d] as number) - (sizes[d] - 1) * strides[d] - 1 - before[d] + (k - 1) * dilations[d]
      : (k - 1) * dilations[d] - p[d + 2] + outPad[d]
  );
  if ([...before, ...after].some((v) => v < 0)) return null;
  // Conv weights [M, C/G, KH, KW]: w'[g·M/G + o, i, y, x] = w[g·C/G + i, o, KH−1−y, KW−1−x].
  const w = weight.tensor!.dataSync() as Float32Array;
  const flipped = new Float32Array(w.length);
  for (let gi = 0; gi < g; gi++) {
    for (let o = 0; o < mg; o++) {
      for (let i = 0; i < cg; i++) {
        for (let y = 0; y < kh; y++) {
          for (let xx = 0; xx < kw; xx++) {
            flipped[(((gi * mg + o) * cg + i) * kh + y) * kw + xx] =
              w[(((gi * cg + i) * mg + o) * kh + (kh - 1 - y)) * kw + (kw - 1 - xx)];
          }
        }
      }
    }
  }
  const affine = convChannelAffines.get(cx.node);
  if (affine !== undefined) {
    const per = cg * kh * kw;
    for (let o = 0; o < m; o++) {
      for (let i = o * per; i < (o + 1) * per; i++) flipped[i] *= affine.scale[o];
    }
  }
  const args: CallArg[] = [
    cx.em.reg(x),
    cx.em.reg(constant(cx, flipped, [m, cg, kh, kw])),
    [1, 1],
    [before[0], before[1], after[0], after[1]],
    dilations,
    cx.em.imm(g),
    strides,
  ];
  pushBiasAndEpilogue(cx, args, bias, m, affine);
  return cx.em.call("vm.op.conv2d", args, "float32", [x.shape[0], m, ...out]);
}

/**
 * `AveragePool` of images whose size is known only at run time, without
 * padding: a depthwise `vm.op.conv2d` by weights of 1 / window size (every
 * window lies inside, so the divisor is the same everywhere). Null when the
 * index path applies (a known size) or cannot be replaced (padding,
 * `ceil_mode`, channels unknown).
 */
function averageByConv(cx: NodeContext, x: Value): Value | null {
  const [, c, ...size] = x.shape;
  if (x.shape.length !== 4 || size.every((d) => typeof d === "number")) return null;
  const pads = cx.ints("pads") ?? [0, 0, 0, 0];
  const autoPad = cx.string("auto_pad", "NOTSET");
  if (
    typeof c !== "number" || pads.some((p) => p !== 0) || cx.int("ceil_mode", 0) !== 0 ||
    (autoPad !== "NOTSET" && autoPad !== "VALID")
  ) return null;
  cx.dtype(x, FLOAT);
  const [kh, kw] = kernelShape(cx);
  const wt = tensor(new Float32Array(c * kh * kw).fill(1 / (kh * kw)), { shape: [c, 1, kh, kw] });
  cx.made.push(wt);
  const strides = cx.ints("strides") ?? [1, 1], dilations = cx.ints("dilations") ?? [1, 1];
  const args = [cx.em.reg(x), cx.em.reg(cx.fromTensor(wt)), strides, [0, 0, 0, 0], dilations];
  args.push(cx.em.imm(c));
  const out = size.map((d, i) =>
    typeof d === "number"
      ? Math.floor((d - ([kh, kw][i] - 1) * dilations[i] - 1) / strides[i]) + 1
      : null
  );
  return cx.em.call("vm.op.conv2d", args, "float32", [x.shape[0], c, ...out]);
}

const POOL_ATTRS = ["auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides"];

/** Convolution and pooling by ONNX name. */
export const CONV_OPS: Record<string, OpSpec> = {
  Conv: {
    attrs: ["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"],
    convert(cx) {
      const x = cx.input(0), weight = cx.input(1), bias = cx.optional(2);
      cx.dtype(weight, FLOAT);
      if (!weight.shape.every((d) => typeof d === "number")) {
        throw new Unsupported("weights of a shape not known at import");
      }
      if (x.shape.length === 4) return [conv2d(cx, x, weight, bias)];
      if (x.shape.length === 3 && weight.shape.length === 3) {
        const y = conv1dByLinear(cx, x, weight, bias);
        if (y !== null) return [y];
      }
      const [m, cg, ...kernel] = weight.shape as number[];
      const g = cx.int("group", 1);
      const { cols, w } = gatherWindows(cx, x, cx.ints("kernel_shape") ?? kernel, false, 0);
      const [n, c, kk, oo] = cols.shape as number[];
      if (c !== cg * g || m % g !== 0) throw new Unsupported(`group ${g} of ${c} channels`);
      // [N, G, C/G·K, O] = the windows of each group; weights [G, M/G, C/G·K]; one batched matmul.
      const grouped = reshapeTo(cx, cols, [n, g, cg * kk, oo]);
      const wg = reshapeTo(cx, weight, [g, m / g, cg * kk]);
      const y = cx.em.call("vm.op.matmul", [cx.em.reg(wg), cx.em.reg(grouped)], "float32", [
        n,
        g,
        m / g,
        oo,
      ]);
      let out = reshapeTo(cx, y, [n, m, ...w.out]);
      if (bias !== undefined) {
        out = binary(cx, "add", out, reshapeTo(cx, bias, [m, ...w.out.map(() => 1)]), FLOAT);
      }
      return [out];
    },
  },
  ConvTranspose: {
    attrs: [
      "auto_pad",
      "dilations",
      "group",
      "kernel_shape",
      "output_padding",
      "output_shape",
      "pads",
      "strides",
    ],
    convert(cx) {
      const x = cx.input(0), weight = cx.input(1), bias = cx.optional(2);
      cx.dtype(x, FLOAT);
      cx.dtype(weight, FLOAT);
      if (x.shape.length === 4 && weight.tensor !== undefined) {
        const y = convTranspose2d(cx, x, weight, bias);
        if (y !== null) return [y];
      }
      if (
        !x.shape.every((d) => typeof d === "number") ||
        !weight.shape.every((d) => typeof d === "number")
      ) {
        throw new Unsupported("ConvTranspose of shapes not known at import");
      }
      const [n, c, ...size] = x.shape as number[];
      const [wc, mg, ...kernel] = weight.shape as number[];
      const g = cx.int("group", 1), m = mg * g, nd = size.length;
      if (wc !== c || c % g !== 0) throw new Unsupported(`group ${g} of ${c} channels`);
      const strides = cx.ints("strides") ?? new Array(nd).fill(1);
      const dilations = cx.ints("dilations") ?? new Array(nd).fill(1);
      const outPad = cx.ints("output_padding") ?? new Array(nd).fill(0);
      const autoPad = cx.string("auto_pad", "NOTSET");
      let outShape = cx.ints("output_shape");
      let pads = cx.ints("pads");
      const full = (d: number) =>
        strides[d] * (size[d] - 1) + outPad[d] + (kernel[d] - 1) * dilations[d] + 1;
      if (pads === undefined && (autoPad === "SAME_UPPER" || autoPad === "SAME_LOWER")) {
        // As ONNX's reference: the output is the input times the strides unless given.
        const target = outShape ?? size.map((s, d) => s * strides[d]);
        const total = target.map((o, d) => full(d) - o);
        const first = total.map((t) =>
          autoPad === "SAME_UPPER" ? Math.floor(t / 2) : t - Math.floor(t / 2)
        );
        pads = [...first, ...total.map((t, d) => t - first[d])];
        outShape = target;
      }
      pads ??= new Array(2 * nd).fill(0);
      const out = outShape ?? size.map((_, d) => full(d) - pads![d] - pads![d + nd]);
      const kk = product(kernel), oo = product(out);
      const index = transposedIndex(size, kernel, out, strides, dilations, pads.slice(0, nd));
      const cols = gatherByIndex(cx, x, index, kk, oo, 0);
      // Σ over (input channel, kernel element) of each group: weights [G, M/G, C/G·K] times
      // windows [N, G, C/G·K, O].
      const cg = c / g;
      const grouped = reshapeTo(cx, cols, [n, g, cg * kk, oo]);
      const w4 = reshapeTo(cx, weight, [g, cg, mg, kk]);
      const wt = cx.em.call("vm.op.transpose", [cx.em.reg(w4), [0, 2, 1, 3]], "float32", [
        g,
        mg,
        cg,
        kk,
      ]);
      const wg = reshapeTo(cx, wt, [g, mg, cg * kk]);
      const y = cx.em.call("vm.op.matmul", [cx.em.reg(wg), cx.em.reg(grouped)], "float32", [
        n,
        g,
        mg,
        oo,
      ]);
      let result = reshapeTo(cx, y, [n, m, ...out]);
      if (bias !== undefined) {
        result = binary(cx, "add", result, reshapeTo(cx, bias, [m, ...out.map(() => 1)]), FLOAT);
      }
      return [result];
    },
  },
  MaxPool: {
    attrs: [...POOL_ATTRS, "storage_order"],
    convert(cx) {
      if (cx.node.outputs.length > 1 && cx.node.outputs[1] !== "") {
        throw new Unsupported("the Indices output");
      }
      const { cols, w } = gatherWindows(cx, cx.input(0), kernelShape(cx), true, -Infinity);
      return [pool(cx, "max", cols, w.out)];
    },
  },
  AveragePool: {
    attrs: [...POOL_ATTRS, "count_include_pad"],
    convert(cx) {
      const x = cx.input(0), dynamic = averageByConv(cx, x);
      if (dynamic !== null) return [dynamic];
      const { cols, w, inside, padded } = gatherWindows(cx, x, kernelShape(cx), true, 0);
      const sum = pool(cx, "sum", cols, w.out);
      // The divisor per output position: the window's elements in the input (and its padding).
      const counts = cx.int("count_include_pad", 0) === 1 ? padded : inside;
      return [binary(cx, "divide", sum, constant(cx, counts, w.out), FLOAT)];
    },
  },
  LpPool: {
    attrs: [...POOL_ATTRS, "p"],
    convert(cx) {
      // (Σ |x|^p)^(1/p): |x|^p by repeated products, the root as exp(log(s) / p).
      const p = cx.int("p", 2);
      if (!Number.isInteger(p) || p < 1 || p > 8) throw new Unsupported(`p=${p}`);
      const { cols, w } = gatherWindows(cx, cx.input(0), kernelShape(cx), true, 0);
      const abs = unary(cx, "abs", cols);
      let powered = abs;
      for (let i = 1; i < p; i++) powered = binary(cx, "multiply", powered, abs, FLOAT);
      const sum = pool(cx, "sum", powered, w.out);
      if (p === 1) return [sum];
      if (p === 2) return [unary(cx, "sqrt", sum)];
      const root = binary(cx, "divide", unary(cx, "log", sum), cx.scalar(p), FLOAT);
      return [unary(cx, "exp", root)];
    },
  },
};
