/**
 * CPU 2-D convolution (float32), `OpBackend.conv2d`.
 *
 * Four paths. An ordinary convolution (not transposed) that is not
 * depthwise is one matrix product per image and group:
 * the group's windows are laid out as a `[C/G·KH·KW, OH·OW]` matrix in a
 * scratch buffer reused across calls (a 1×1 convolution of stride 1 reads
 * the input as it is) and multiplied by the group's weights `[M/G,
 * C/G·KH·KW]` with `gemm`, which runs in WebAssembly SIMD
 * (kernels/cpu/wasm/gemm.ts) on its threads. The scratch holds one group's
 * windows of one image, not the model's whole im2col index, so it stays the
 * size of that layer's activations times its kernel. On the WebAssembly
 * path (at least `MR` output channels a group) no such matrix is made: the
 * windows are written straight into the product's B panels, block by block
 * (conv_panels.ts), or, for rows a whole number of panels wide (and 1×1
 * convolutions of many channels), read by the product in place from a
 * zero-padded copy of the input; the bias and epilogue run on each block of
 * C in the product's scratch before it is copied out.
 *
 * A transposed convolution whose kernel equals its stride and that neither
 * overlaps nor crops (ONNX's `ConvTranspose` of kernel = stride, no pads:
 * a detector's 2× upsampling; `Resize` by an integer `nearest` scale) gives
 * each output exactly one kernel element, the same for all outputs of one
 * phase `(oy mod s, ox mod s)`: per phase, one matrix product of that
 * element's weights `[M, C]` by the input `[C, H·W]` (depthwise: a scaled
 * copy), scattered into the output with stride s. (Through the direct loop
 * it was 3/5 of a 640×192 detector's time.)
 *
 * A depthwise convolution (each output reads KH·KW inputs of one channel)
 * of a 3×3 or 5×5 window, horizontal stride 1 or 2, runs in WebAssembly
 * SIMD (wasm/depthwise.ts); any other adds, per kernel element, its weight
 * times shifted input rows to the output rows (`depthwise`).
 *
 * Elsewhere the epilogue (`Conv2dGeometry.epilogue`: the activation an
 * exporter writes after a convolution) runs channel by channel with the bias, while
 * each plane is in cache (conv_epilogue.ts). Everything else (other transposed
 * convolutions, whose spaced-out input makes most kernel elements read
 * zeros) is a direct loop over the kernel elements that read an input
 * element: which they are is worked out once per output row and column, so
 * a transposed convolution of stride s visits 1/s² of its kernel instead of
 * testing every element.
 *
 * @module
 */

import type { NDArray } from "../../devices/ndarray.ts";
import type { Conv2dEpilogueStep, Conv2dGeometry } from "../kernel_backend.ts";
import { gemm } from "./matmul.ts";
import { applyConvEpilogue } from "./conv_epilogue.ts";
import { wasmDepthwise } from "./wasm/depthwise.ts";
import { type PanelPacker, wasmConvGemm } from "./wasm/gemm.ts";
import { MR, NR } from "./wasm/gemm_module.ts";
import { rowEpilogue, type WindowGeometry, windowPanels } from "./conv_panels.ts";

/**
 * Input channels from which a 1×1 convolution's product reads x in place
 * (`pointwisePanels`). PP-OCRv4's detector's 1×1 layers alone
 * (bench/conv_layers_bench.ts, in place against packed, interleaved):
 * 192 and 384 channels 3–10% faster in place, 96 the same, 16 and 48
 * 6–12% slower.
 */
const POINTWISE_IN_PLACE_CHANNELS = 128;

// Reused across calls; JS runs one kernel at a time.
let scratch = new Float32Array(0);

/**
 * For each output position `o < outSize` along one axis, the kernel elements
 * `k` that read an input element and that element's index: `taps[start[o] ..
 * start[o + 1])` as pairs `(k, i)`.
 */
function axisTaps(
  outSize: number,
  inSize: number,
  kernel: number,
  stride: number,
  pad: number,
  dilation: number,
  inputDilation: number,
): { start: Int32Array; taps: Int32Array } {
  const start = new Int32Array(outSize + 1);
  const list: number[] = [];
  for (let o = 0; o < outSize; o++) {
    start[o] = list.length / 2;
    for (let k = 0; k < kernel; k++) {
      const p = o * stride - pad + k * dilation;
      if (p < 0 || p % inputDilation !== 0) continue;
      const i = p / inputDilation;
      if (i < inSize) list.push(k, i);
    }
  }
  start[outSize] = list.length / 2;
  return { start, taps: Int32Array.from(list) };
}

/** `out = epilogue(conv2d(x, w) + bias)`; see `OpBackend.conv2d`. */
export function conv2dKernel(
  x: NDArray,
  w: NDArray,
  bias: NDArray | null,
  geometry: Conv2dGeometry,
  out: NDArray,
): void {
  if (out.size === 0) return;
  const steps = geometry.epilogue;
  if (convolve(x, w, bias, geometry, out) || steps === undefined || steps.length === 0) return;
  applyConvEpilogue(out.cpuView() as Float32Array, 0, out.size, steps);
}

/**
 * `out = conv2d(x, w) + bias`, by the path that fits (the module's four);
 * true where that path applied the epilogue too (channel by channel, while
 * each was in cache).
 */
function convolve(
  x: NDArray,
  w: NDArray,
  bias: NDArray | null,
  geometry: Conv2dGeometry,
  out: NDArray,
): boolean {
  const [N, C, H, W] = x.shape;
  const [M, Cg, KH, KW] = w.shape;
  const [, , OH, OW] = out.shape;
  const G = geometry.groups, Mg = M / G;
  const xv = x.readView() as Float32Array, wv = w.readView() as Float32Array;
  const ov = out.cpuView() as Float32Array;
  const [sh, sw] = geometry.strides, [ph, pw] = geometry.padBegin;
  const [dh, dw] = geometry.dilations, [ih, iw] = geometry.inputDilations;
  const depth = Cg * KH * KW, plane = OH * OW;
  if (
    ih === KH && iw === KW && ih * iw > 1 && sh === 1 && sw === 1 && dh === 1 && dw === 1 &&
    ph === KH - 1 && pw === KW - 1 && OH === H * KH && OW === W * KW && (G === 1 || Cg === 1)
  ) {
    const bv = bias === null ? null : bias.readView() as Float32Array;
    if (G === 1 && allPhases(xv, wv, bv, ov, N, C, H, W, M, KH, KW, geometry.epilogue ?? [])) {
      return true;
    }
    byPhase(xv, wv, ov, N, C, H, W, M, KH, KW, G);
    return finish(ov, bias, N, M, plane, geometry.epilogue);
  }
  if (Cg > 1 && ih === 1 && iw === 1) {
    const direct = KH === 1 && KW === 1 && sh === 1 && sw === 1 && ph === 0 && pw === 0 &&
      OH === H && OW === W;
    const geo = { channels: Cg, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw };
    const bv = bias === null ? null : bias.readView() as Float32Array;
    const steps = geometry.epilogue ?? [];
    for (let n = 0; n < N; n++) {
      for (let g = 0; g < G; g++) {
        const xOff = (n * C + g * Cg) * H * W, oOff = (n * M + g * Mg) * plane;
        // The WebAssembly product, its B packed from the windows (or x as it is), with the
        // bias and epilogue applied to C in its scratch.
        const done = wasmConvGemm(
          wv,
          g * Mg * depth,
          xv,
          xOff,
          ov,
          oOff,
          Mg,
          depth,
          plane,
          direct ? pointwisePanels(xv, xOff, geo) : windowPanels(xv, xOff, geo),
          bv === null && steps.length === 0 ? null : rowEpilogue(bv, g * Mg, Mg, steps),
        );
        if (done) continue;
        if (!direct) {
          if (scratch.length < depth * plane) scratch = new Float32Array(depth * plane);
          im2col(xv, xOff, Cg, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, scratch);
        }
        gemm(
          wv,
          g * Mg * depth,
          direct ? xv : scratch,
          direct ? xOff : 0,
          ov,
          oOff,
          Mg,
          depth,
          plane,
          true,
        );
        finishRows(ov, bv, oOff, g * Mg, Mg, plane, steps);
      }
    }
    return true;
  }
  if (Cg === 1 && ih === 1 && iw === 1) {
    const bv = bias === null ? null : bias.readView() as Float32Array;
    if (
      KH === KW && dh === 1 && dw === 1 &&
      wasmDepthwise(
        xv,
        wv,
        bv,
        ov,
        { N, C, H, W, M, K: KH, OH, OW, sh, sw, ph, pw },
        geometry.epilogue,
      )
    ) return true;
    depthwise(xv, wv, bv, ov, {
      N,
      C,
      H,
      W,
      M,
      KH,
      KW,
      OH,
      OW,
      sh,
      sw,
      ph,
      pw,
      dh,
      dw,
    });
    return false;
  }
  const rows = axisTaps(OH, H, KH, sh, ph, dh, ih), cols = axisTaps(OW, W, KW, sw, pw, dw, iw);
  const bv = bias === null ? null : bias.readView() as Float32Array;
  for (let n = 0; n < N; n++) {
    for (let m = 0; m < M; m++) {
      const g = Math.floor(m / Mg), wBase = m * depth, b = bv === null ? 0 : bv[m];
      const xBase = (n * C + g * Cg) * H * W;
      let o = (n * M + m) * plane;
      for (let oy = 0; oy < OH; oy++) {
        const r0 = rows.start[oy], r1 = rows.start[oy + 1];
        for (let ox = 0; ox < OW; ox++, o++) {
          const c0 = cols.start[ox], c1 = cols.start[ox + 1];
          let sum = 0;
          for (let c = 0; c < Cg; c++) {
            const xc = xBase + c * H * W, wc = wBase + c * KH * KW;
            for (let r = r0; r < r1; r++) {
              const wr = wc + rows.taps[2 * r] * KW, xr = xc + rows.taps[2 * r + 1] * W;
              for (let q = c0; q < c1; q++) {
                sum += wv[wr + cols.taps[2 * q]] * xv[xr + cols.taps[2 * q + 1]];
              }
            }
          }
          ov[o] = sum + b;
        }
      }
    }
  }
  return false;
}

/**
 * The product's B for a 1×1 convolution of stride 1 without padding, whose
 * windows are x's channels as they are: with a plane a whole number of
 * panels wide and many channels, one row of `H·W` outputs that the product
 * reads in place from x's copy (conv_panels.ts), where `wasmConvGemm`
 * would copy x in and pack it (null). Below `POINTWISE_IN_PLACE_CHANNELS`
 * the packed panels were faster: each tile row reads its panel's few
 * channels again from planes far apart.
 */
function pointwisePanels(xv: Float32Array, xOff: number, geo: WindowGeometry): PanelPacker | null {
  const plane = geo.H * geo.W;
  if (plane % NR !== 0 || geo.channels < POINTWISE_IN_PLACE_CHANNELS) return null;
  return windowPanels(xv, xOff, { ...geo, H: 1, W: plane, OH: 1, OW: plane });
}

/**
 * A transposed convolution of kernel = stride `[KH, KW]` without overlap or
 * crop, phase by phase: output `(i·KH + r, j·KW + q)` is kernel element
 * `(KH−1−r, KW−1−q)` (the kernel is flipped in the conv form) times input
 * `(i, j)`, summed over the group's channels. Groups: one, or depthwise.
 */
function byPhase(
  xv: Float32Array,
  wv: Float32Array,
  ov: Float32Array,
  N: number,
  C: number,
  H: number,
  W: number,
  M: number,
  KH: number,
  KW: number,
  G: number,
): void {
  const HW = H * W, OW = W * KW, plane = H * KH * OW;
  if (G > 1) {
    upsampleDepthwise(xv, wv, ov, N, C, H, W, M, KH, KW, G);
    return;
  }
  if (scratch.length < M * C + M * HW) scratch = new Float32Array(M * C + M * HW);
  for (let r = 0; r < KH; r++) {
    for (let q = 0; q < KW; q++) {
      const k = (KH - 1 - r) * KW + (KW - 1 - q);
      for (let n = 0; n < N; n++) {
        // This phase's weights [M, C], then [M, C] @ x[n] [C, H·W] into the scratch after them.
        for (let m = 0; m < M; m++) {
          for (let c = 0; c < C; c++) scratch[m * C + c] = wv[(m * C + c) * KH * KW + k];
        }
        gemm(scratch, 0, xv, n * C * HW, scratch, M * C, M, C, HW, true);
        for (let m = 0; m < M; m++) {
          const o = (n * M + m) * plane + r * OW + q, src = M * C + m * HW;
          for (let i = 0; i < H; i++) {
            for (let j = 0; j < W; j++) ov[o + i * KH * OW + j * KW] = scratch[src + i * W + j];
          }
        }
      }
    }
  }
}

/**
 * `byPhase` for a depthwise convolution (Cg = 1; output channel m reads
 * input channel ⌊m / (M/G)⌋), output row by output row: row `i·KH + r` is
 * input row `i` with each value spread over `KW` outputs times kernel
 * elements `(KH−1−r, KW−1−q)`, written in order, and a row whose `KW`
 * weights repeat an earlier phase row's is a copy of that row (a `Resize`
 * by an integer `nearest` scale: every weight 1, each input row computed
 * once and copied `KH − 1` times). Phase by phase, each of the `KH·KW`
 * passes wrote every `KW`-th output over the whole plane.
 */
function upsampleDepthwise(
  xv: Float32Array,
  wv: Float32Array,
  ov: Float32Array,
  N: number,
  C: number,
  H: number,
  W: number,
  M: number,
  KH: number,
  KW: number,
  G: number,
): void {
  const OW = W * KW, plane = H * KH * OW, K = KH * KW;
  const wr = new Float32Array(K), same = new Int32Array(KH);
  for (let m = 0; m < M; m++) {
    // Phase row r's weights wr[r·KW + q] = w[m, KH−1−r, KW−1−q]; same[r]: an earlier equal row.
    for (let r = 0; r < KH; r++) {
      for (let q = 0; q < KW; q++) wr[r * KW + q] = wv[m * K + (KH - 1 - r) * KW + (KW - 1 - q)];
      same[r] = -1;
      for (let r2 = 0; r2 < r && same[r] < 0; r2++) {
        let eq = true;
        for (let q = 0; q < KW && eq; q++) eq = Object.is(wr[r2 * KW + q], wr[r * KW + q]);
        if (eq) same[r] = r2;
      }
    }
    for (let n = 0; n < N; n++) {
      const src = (n * C + Math.floor(m / (M / G))) * H * W, o = (n * M + m) * plane;
      for (let i = 0; i < H; i++) {
        const xr = src + i * W;
        for (let r = 0; r < KH; r++) {
          const to = o + (i * KH + r) * OW;
          if (same[r] >= 0) {
            const from = o + (i * KH + same[r]) * OW;
            ov.copyWithin(to, from, from + OW);
          } else if (KW === 2) {
            const w0 = wr[r * 2], w1 = wr[r * 2 + 1];
            for (let j = 0; j < W; j++) {
              const v = xv[xr + j];
              ov[to + 2 * j] = w0 * v;
              ov[to + 2 * j + 1] = w1 * v;
            }
          } else {
            for (let j = 0, t = to; j < W; j++) {
              const v = xv[xr + j];
              for (let q = 0; q < KW; q++, t++) ov[t] = wr[r * KW + q] * v;
            }
          }
        }
      }
    }
  }
}

/**
 * `byPhase` for one group as one WebAssembly product: every phase's weights
 * stacked (`[KH·KW·M, C]`, phase-major) times x `[C, H·W]`, with the bias
 * and epilogue applied to C in the product's scratch, then scattered. One
 * copy and packing of x instead of one a phase, and no TypeScript pass of
 * bias and epilogue over the output. False (nothing written) where the
 * WebAssembly product does not run.
 */
function allPhases(
  xv: Float32Array,
  wv: Float32Array,
  bv: Float32Array | null,
  ov: Float32Array,
  N: number,
  C: number,
  H: number,
  W: number,
  M: number,
  KH: number,
  KW: number,
  steps: readonly Conv2dEpilogueStep[],
): boolean {
  // Rows past the phases' (a 24 → 1 upsampling has 4) are zero up to the product's MR, so that
  // it takes the WebAssembly product, not byPhase's TypeScript one; their outputs are dropped.
  const P = KH * KW, rows = Math.max(P * M, MR), HW = H * W, OW = W * KW, plane = H * KH * OW;
  if (scratch.length < rows * C + rows * HW) scratch = new Float32Array(rows * C + rows * HW);
  scratch.fill(0, P * M * C, rows * C);
  // Phase (r, q) is kernel element (KH−1−r, KW−1−q): its weights are rows (r·KW + q)·M ...
  for (let r = 0; r < KH; r++) {
    for (let q = 0; q < KW; q++) {
      const k = (KH - 1 - r) * KW + (KW - 1 - q), row0 = (r * KW + q) * M;
      for (let m = 0; m < M; m++) {
        for (let c = 0; c < C; c++) scratch[(row0 + m) * C + c] = wv[(m * C + c) * P + k];
      }
    }
  }
  let biases: Float32Array | null = null;
  if (bv !== null) {
    biases = new Float32Array(rows);
    for (let p = 0; p < P; p++) biases.set(bv.subarray(0, M), p * M);
  }
  const epilogue = biases === null && steps.length === 0
    ? null
    : rowEpilogue(biases, 0, rows, steps);
  for (let n = 0; n < N; n++) {
    if (!wasmConvGemm(scratch, 0, xv, n * C * HW, scratch, rows * C, rows, C, HW, null, epilogue)) {
      return false;
    }
    // Output row i·KH + r of channel m interleaves row i of phases (r, 0 .. KW−1), written in
    // order (a pass a phase, each writing every KW-th output of the plane, cost twice as much).
    for (let m = 0; m < M; m++) {
      for (let i = 0; i < H; i++) {
        for (let r = 0; r < KH; r++) {
          const to = (n * M + m) * plane + (i * KH + r) * OW;
          const from = rows * C + (r * KW * M + m) * HW + i * W, step = M * HW;
          if (KW === 2) {
            for (let j = 0; j < W; j++) {
              ov[to + 2 * j] = scratch[from + j];
              ov[to + 2 * j + 1] = scratch[from + step + j];
            }
          } else {
            for (let j = 0, t = to; j < W; j++) {
              for (let q = 0; q < KW; q++, t++) ov[t] = scratch[from + q * step + j];
            }
          }
        }
      }
    }
  }
  return true;
}

/** The sizes and geometry `depthwise` reads: one channel's windows, and the batch and channel counts. */
interface DepthwiseShape extends Omit<WindowGeometry, "channels"> {
  N: number;
  C: number;
  M: number;
}

/**
 * A depthwise convolution (one input channel per group), kernel element by
 * kernel element: each adds its weight times a shifted row of the input to
 * a row of the output, over the outputs whose input lies inside (worked out
 * once per element), so the inner loop is a plain multiply-add along a row.
 * (The tap lists of the general loop cost about 20 ns a multiply-add here.)
 */
function depthwise(
  xv: Float32Array,
  wv: Float32Array,
  bv: Float32Array | null,
  ov: Float32Array,
  s: DepthwiseShape,
): void {
  const { N, C, H, W, M, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw } = s;
  const perGroup = M / C, plane = OH * OW;
  for (let n = 0; n < N; n++) {
    for (let m = 0; m < M; m++) {
      const o = (n * M + m) * plane, xc = (n * C + Math.floor(m / perGroup)) * H * W;
      ov.fill(bv === null ? 0 : bv[m], o, o + plane);
      if (sw === 1 && dw === 1 && (KW === 3 || KW === 5)) {
        rowsUnrolled(xv, wv, ov, m, o, xc, s);
        continue;
      }
      for (let ky = 0; ky < KH; ky++) {
        for (let kx = 0; kx < KW; kx++) {
          const wk = wv[(m * KH + ky) * KW + kx], shift = kx * dw - pw;
          const lo = Math.min(OW, Math.max(0, Math.ceil(-shift / sw)));
          const hi = Math.max(lo, Math.min(OW, Math.floor((W - 1 - shift) / sw) + 1));
          for (let oy = 0; oy < OH; oy++) {
            const iy = oy * sh - ph + ky * dh;
            if (iy < 0 || iy >= H) continue;
            const xr = xc + iy * W + shift, orow = o + oy * OW;
            if (sw === 1) { for (let ox = lo; ox < hi; ox++) ov[orow + ox] += wk * xv[xr + ox]; }
            else for (let ox = lo; ox < hi; ox++) ov[orow + ox] += wk * xv[xr + ox * sw];
          }
        }
      }
    }
  }
}

/**
 * `depthwise`'s rows for the common 3- and 5-wide kernels of stride 1: per
 * kernel row and output row, the outputs whose whole window lies inside
 * take all `KW` products in one sum (one store each instead of `KW`), the
 * edges one product at a time. About twice the speed of a pass per element.
 */
function rowsUnrolled(
  xv: Float32Array,
  wv: Float32Array,
  ov: Float32Array,
  m: number,
  o: number,
  xc: number,
  s: DepthwiseShape,
): void {
  const { H, W, KH, KW, OH, OW, sh, ph, pw, dh } = s;
  // Outputs whose every tap ox − pw + kx lies in [0, W).
  const a = Math.min(OW, Math.max(0, pw)), b = Math.max(a, Math.min(OW, W + pw - KW + 1));
  for (let ky = 0; ky < KH; ky++) {
    const wr = (m * KH + ky) * KW;
    const w0 = wv[wr], w1 = wv[wr + 1], w2 = wv[wr + 2];
    const w3 = KW === 5 ? wv[wr + 3] : 0, w4 = KW === 5 ? wv[wr + 4] : 0;
    for (let oy = 0; oy < OH; oy++) {
      const iy = oy * sh - ph + ky * dh;
      if (iy < 0 || iy >= H) continue;
      const xr = xc + iy * W - pw, orow = o + oy * OW;
      if (KW === 3) {
        for (let ox = a; ox < b; ox++) {
          const i = xr + ox;
          ov[orow + ox] += w0 * xv[i] + w1 * xv[i + 1] + w2 * xv[i + 2];
        }
      } else {
        for (let ox = a; ox < b; ox++) {
          const i = xr + ox;
          ov[orow + ox] += w0 * xv[i] + w1 * xv[i + 1] + w2 * xv[i + 2] + w3 * xv[i + 3] +
            w4 * xv[i + 4];
        }
      }
      for (let ox = 0; ox < OW; ox++) {
        if (ox === a) ox = b;
        if (ox >= OW) break;
        let sum = 0;
        for (let kx = 0; kx < KW; kx++) {
          const ix = ox - pw + kx;
          if (ix >= 0 && ix < W) sum += wv[wr + kx] * xv[xr + pw + ix];
        }
        ov[orow + ox] += sum;
      }
    }
  }
}

/**
 * Lays the windows of `channels` channels of one image (from `xOff`) out as
 * `cols [channels·KH·KW, OH·OW]`: row `(c, ky, kx)` holds, for every output,
 * the input that kernel element reads (0 in the padding).
 */
function im2col(
  xv: Float32Array,
  xOff: number,
  channels: number,
  H: number,
  W: number,
  KH: number,
  KW: number,
  OH: number,
  OW: number,
  sh: number,
  sw: number,
  ph: number,
  pw: number,
  dh: number,
  dw: number,
  cols: Float32Array,
): void {
  let row = 0;
  for (let c = 0; c < channels; c++) {
    const xc = xOff + c * H * W;
    for (let ky = 0; ky < KH; ky++) {
      for (let kx = 0; kx < KW; kx++, row += OH * OW) {
        // The outputs whose input column lies inside: ix = ox·sw − pw + kx·dw in [0, W).
        const shift = kx * dw - pw;
        const lo = Math.min(OW, Math.max(0, Math.ceil(-shift / sw)));
        const hi = Math.max(lo, Math.min(OW, Math.floor((W - 1 - shift) / sw) + 1));
        for (let oy = 0; oy < OH; oy++) {
          const iy = oy * sh - ph + ky * dh, o = row + oy * OW;
          if (iy < 0 || iy >= H) {
            cols.fill(0, o, o + OW);
            continue;
          }
          const xr = xc + iy * W + shift;
          if (lo > 0) cols.fill(0, o, o + lo);
          if (sw === 1) cols.set(xv.subarray(xr + lo, xr + hi), o + lo);
          else for (let ox = lo; ox < hi; ox++) cols[o + ox] = xv[xr + ox * sw];
          if (hi < OW) cols.fill(0, o + hi, o + OW);
        }
      }
    }
  }
}

/**
 * `out[n, m, :] += bias[m]`, then the epilogue's `steps`, channel by
 * channel so each plane is read from memory once for both; true where
 * there were steps (applied).
 */
function finish(
  ov: Float32Array,
  bias: NDArray | null,
  N: number,
  M: number,
  plane: number,
  steps: readonly Conv2dEpilogueStep[] | undefined,
): boolean {
  const bv = bias === null ? null : bias.readView() as Float32Array;
  for (let n = 0; n < N; n++) finishRows(ov, bv, n * M * plane, 0, M, plane, steps ?? []);
  return steps !== undefined && steps.length > 0;
}

/** `finish` over the `rows` planes from `ov[o]`, channels `m0 ..` (their biases). */
function finishRows(
  ov: Float32Array,
  bv: Float32Array | null,
  o: number,
  m0: number,
  rows: number,
  plane: number,
  steps: readonly Conv2dEpilogueStep[],
): void {
  if (bv === null && steps.length === 0) return;
  for (let m = m0; m < m0 + rows; m++, o += plane) {
    if (bv !== null) {
      const b = bv[m];
      for (let i = o; i < o + plane; i++) ov[i] += b;
    }
    if (steps.length > 0) applyConvEpilogue(ov, o, o + plane, steps);
  }
}
