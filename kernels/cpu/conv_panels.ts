/**
 * A convolution's windows written straight into the WebAssembly matrix
 * product's B panels (`[K][NR]` per `NR` outputs, K = channels·KH·KW in
 * im2col's row order): the `PanelPacker` conv2d.ts hands `wasmConvGemm`.
 * The im2col matrix `[K, OH·OW]` it replaces was a layer's activations
 * times its kernel (26 MiB for PP-OCRv4's 96→24 3×3 at 48×160), written,
 * then copied into WebAssembly memory and packed there: three passes over
 * memory that did not fit any cache, where this writes one 4 MiB block of
 * panels at a time that the tiles then read from cache.
 *
 * @module
 */

import { NR } from "./wasm/gemm_module.ts";
import type { Conv2dEpilogueStep } from "../kernel_backend.ts";
import { gemmBlocking, type PanelPacker, type RowFinisher } from "./wasm/gemm.ts";
import { EPILOGUE_OPS } from "./wasm/epilogue_module.ts";
import { Job, jobArgs } from "./wasm/thread_pool.ts";

/**
 * Input rows (channels × rows each) from which a convolution's input is
 * padded by the pool (`pad_planes`) after one copy, rather than
 * row by row on the calling thread: below it a hand-off costs about what
 * the rows do (a few microseconds against some 130 ns a row).
 */
const PAD_POOL_MIN_ROWS = 256;

/** The input geometry of one image's group of channels, as conv2d.ts's im2col reads it. */
export interface WindowGeometry {
  channels: number;
  H: number;
  W: number;
  KH: number;
  KW: number;
  OH: number;
  OW: number;
  sh: number;
  sw: number;
  ph: number;
  pw: number;
  dh: number;
  dw: number;
}

/**
 * The packer for the windows of `g.channels` channels of `xv` from `xOff`.
 * Worked out once per call: for each kernel element and output, the input's
 * offset in its channel's plane (−1: padding, and past the last output), and
 * for each kernel element and panel whether its `NR` inputs are one run of a
 * row (then copied without tests: all but the edges at stride 1).
 */
export function windowPanels(xv: Float32Array, xOff: number, g: WindowGeometry): PanelPacker {
  if (g.OW % NR === 0) return paddedPanels(xv, xOff, g);
  const { channels, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw } = g;
  const KK = KH * KW, N = OH * OW, nP = Math.ceil(N / NR), HW = H * W;
  const at = new Int32Array(KK * nP * NR).fill(-1), run = new Int32Array(KK * nP).fill(-1);
  for (let ky = 0; ky < KH; ky++) {
    for (let kx = 0; kx < KW; kx++) {
      const kk = ky * KW + kx, row = kk * nP * NR;
      for (let oy = 0, j = row; oy < OH; oy++) {
        const iy = oy * sh - ph + ky * dh;
        if (iy < 0 || iy >= H) {
          j += OW;
          continue;
        }
        for (let ox = 0, ix = kx * dw - pw; ox < OW; ox++, j++, ix += sw) {
          if (ix >= 0 && ix < W) at[j] = iy * W + ix;
        }
      }
      for (let p = 0; p < nP; p++) {
        const first = at[row + p * NR];
        let ok = first >= 0;
        for (let t = 1; ok && t < NR; t++) ok = at[row + p * NR + t] === first + t;
        if (ok) run[kk * nP + p] = first;
      }
    }
  }
  const K = channels * KK, step = KK * NR;
  const pack = (dst: Float32Array, off: number, col0: number, np: number) => {
    const p0 = col0 / NR;
    for (let p = 0; p < np; p++) {
      const panel = off + p * K * NR;
      for (let kk = 0; kk < KK; kk++) {
        const r = run[kk * nP + p0 + p];
        let o = panel + kk * NR;
        if (r >= 0 && NR === 8) {
          for (let c = 0, s = xOff + r; c < channels; c++, s += HW, o += step) {
            dst[o] = xv[s];
            dst[o + 1] = xv[s + 1];
            dst[o + 2] = xv[s + 2];
            dst[o + 3] = xv[s + 3];
            dst[o + 4] = xv[s + 4];
            dst[o + 5] = xv[s + 5];
            dst[o + 6] = xv[s + 6];
            dst[o + 7] = xv[s + 7];
          }
          continue;
        }
        const idx = (kk * nP + p0 + p) * NR;
        for (let c = 0, base = xOff; c < channels; c++, base += HW, o += step) {
          for (let t = 0; t < NR; t++) {
            const i = at[idx + t];
            dst[o + t] = i < 0 ? 0 : xv[base + i];
          }
        }
      }
    }
  };
  return { floats: 0, place() {}, pack: (ctx, off, col0, np) => pack(ctx.view, off, col0, np) };
}

/**
 * The packer for rows of outputs a whole number of panels wide (PP-OCRv4's
 * every full convolution but the 6 × 20 ones), whose panels the product
 * reads in place (`windows`: `gemm_windows`, wasm/gemm_module.ts) rather
 * than packed: at 48 × 160 the 96 → 24 3 × 3 layer's packing wrote and read
 * 26 MiB, a quarter of its time. The channels are copied once into the scratch,
 * zero-padded so that every window lies inside and split by column into
 * `sw` phases (`[sw, channels, Hp, Wq]`: padded column `sw·i + q` is column
 * `i` of phase `q`), so that the `NR` outputs of a panel read `NR`
 * consecutive floats of one phase per kernel element at any horizontal
 * stride; with a table of each kernel row's byte offset (phase, channel,
 * kernel row and column), `pack_windows` (wasm/windows_module.ts) writes the
 * panels on the product's threads where they are packed, and with a table
 * of each panel's first output's offset the product reads them in place.
 */
function paddedPanels(xv: Float32Array, xOff: number, g: WindowGeometry): PanelPacker {
  const { channels, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw } = g;
  const Wp = (OW - 1) * sw + (KW - 1) * dw + 1, Hp = (OH - 1) * sh + (KH - 1) * dh + 1;
  const Wq = OW + Math.floor((KW - 1) * dw / sw), plane = Hp * Wq;
  const K = channels * KH * KW, inputFloats = sw * channels * plane, nP = OH * OW / NR;
  // Input rows and columns that land in the padded plane.
  const y0 = Math.max(0, -ph), y1 = Math.min(H, Hp - ph);
  const x0 = Math.max(0, -pw), x1 = Math.min(W, Wp - pw);
  // With many rows, x is copied in as one block after the tables and padded by the pool
  // (`pad_planes`, one run a column phase), not row by row here.
  const onPool = gemmBlocking.padOnPool && y1 - y0 > 1 && x1 > x0 &&
    channels * (y1 - y0) >= PAD_POOL_MIN_ROWS;
  // No padding nor crop (a 1×1 layer read in place, conv2d.ts's `pointwisePanels`): the padded
  // copy is x's channels as they are, one copy.
  const asIs = sw === 1 && Wq === W && Hp === H && ph === 0 && pw === 0;
  const rawAt = inputFloats + K + nP, rawFloats = onPool ? channels * H * W : 0;
  return {
    floats: rawAt + rawFloats,
    place({ view, own, threads, run }) {
      if (asIs) view.set(xv.subarray(xOff, xOff + inputFloats), own);
      else if (onPool) {
        view.set(xv.subarray(xOff, xOff + rawFloats), own + rawAt);
        const per = Math.max(1, Math.ceil(channels / (4 * threads)));
        for (let q = 0; q < sw; q++) {
          // Phase q's first input column (padded column ≡ q mod sw), where it lands, how many.
          const ix = x0 + (((q - (x0 + pw)) % sw) + sw) % sw;
          const count = ix < x1 ? Math.ceil((x1 - ix) / sw) : 0;
          const args = jobArgs("padPlanes", {
            src: (own + rawAt + y0 * W + ix) * 4,
            dst: (own + q * channels * plane) * 4,
            planes: channels,
            per,
            rows: y1 - y0,
            rowBytes: count * 4,
            srcStep: sw * 4,
            srcRow: W * 4,
            srcPlane: H * W * 4,
            dstRow: Wq * 4,
            dstPlane: plane * 4,
            dataOff: ((y0 + ph) * Wq + (ix + pw - q) / sw) * 4,
          });
          run(Job.padPlanes, args, Math.ceil(channels / per));
        }
      }
      // Zeros where the padding falls: at stride 1 only there (the rows above and below the
      // input's, and each row's ends), not a pass over the whole copy before it is written.
      if (sw !== 1 && !onPool && !asIs) view.fill(0, own, own + inputFloats);
      for (let c = 0; c < channels && !onPool && !asIs; c++) {
        const at = own + c * plane;
        if (sw === 1) {
          view.fill(0, at, at + Math.min(plane, (y0 + ph) * Wq));
          view.fill(0, at + Math.max(0, Math.min(plane, (y1 + ph) * Wq)), at + plane);
        }
        for (let iy = y0; iy < y1; iy++) {
          const from = xOff + c * H * W + iy * W, to = at + (iy + ph) * Wq;
          if (sw === 1) {
            view.fill(0, to, to + Math.min(Wq, pw + x0));
            view.set(xv.subarray(from + x0, from + x1), to + pw + x0);
            view.fill(0, to + Math.max(0, pw + x1), to + Wq);
          } else {
            // Padded column X = ix + pw is column ⌊X / sw⌋ of phase X mod sw: phase by phase,
            // every sw-th input into consecutive floats (one loop of plain steps each, where
            // stepping the phase per element cost a test and a branch an element).
            const phase = channels * plane;
            for (let q = 0; q < sw; q++) {
              // The first input column of phase q, and where it lands.
              let ix = x0 + (((q - (x0 + pw)) % sw) + sw) % sw;
              for (let t = to + q * phase + (ix + pw - q) / sw; ix < x1; ix += sw, t++) {
                view[t] = xv[from + ix];
              }
            }
          }
        }
      }
      const table = new Int32Array(view.buffer, view.byteOffset + (own + inputFloats) * 4, K);
      for (let c = 0, k = 0; c < channels; c++) {
        for (let ky = 0; ky < KH; ky++) {
          for (let kx = 0; kx < KW; kx++, k++) {
            const q = (kx * dw) % sw, col = (kx * dw - q) / sw;
            table[k] = ((q * channels + c) * plane + ky * dh * Wq + col) * 4;
          }
        }
      }
      // Each panel's first output (oy, ox) reads from column ox of padded row oy·sh.
      const bases = new Int32Array(view.buffer, view.byteOffset + (own + inputFloats + K) * 4, nP);
      for (let p = 0; p < nP; p++) {
        const oy = Math.floor(p * NR / OW), ox = p * NR - oy * OW;
        bases[p] = (oy * sh * Wq + ox) * 4;
      }
    },
    windows: ({ own }) => ({
      src: own * 4,
      table: (own + inputFloats) * 4,
      bases: (own + inputFloats + K) * 4,
    }),
    pack({ own, threads, run }, off, col0, np) {
      const per = Math.max(1, Math.ceil(np / (4 * threads)));
      const args = jobArgs("packWindows", {
        src: own * 4,
        dst: off * 4,
        table: (own + inputFloats) * 4,
        K,
        nPanels: np,
        per,
        col0,
        OW,
        skip: (sh * Wq - OW) * 4,
        NR,
      });
      run(Job.packWindows, args, Math.ceil(np / per));
    },
  };
}

/**
 * The bias (`bias[from ..]`, one a row of the product; none: 0) and
 * epilogue `steps` applied by `conv_epilogue` (wasm/epilogue_module.ts)
 * to each block of the product's C in the scratch, on its threads, before
 * it is copied out: no pass of its own over the output, as conv2d.ts's
 * `finish` made in TypeScript.
 */
export function rowEpilogue(
  bias: Float32Array | null,
  from: number,
  rows: number,
  steps: readonly Conv2dEpilogueStep[],
): RowFinisher {
  const tableAt = Math.ceil(rows / 4) * 4;
  return {
    floats: tableAt + 4 * steps.length,
    place({ view, own }) {
      if (bias === null) view.fill(0, own, own + rows);
      else view.set(bias.subarray(from, from + rows), own);
      const ops = new Int32Array(
        view.buffer,
        view.byteOffset + (own + tableAt) * 4,
        4 * steps.length,
      );
      for (const [i, { op, a, b }] of steps.entries()) {
        ops[4 * i] = EPILOGUE_OPS[op];
        view[own + tableAt + 4 * i + 1] = a;
        view[own + tableAt + 4 * i + 2] = b;
      }
    },
    apply({ own, threads, run }, cOff, ldc, row0, n, width) {
      const per = Math.max(1, Math.ceil(n / (2 * threads)));
      const args = jobArgs("epilogue", {
        cp: cOff * 4,
        rows: n,
        ldc,
        bytes: width * 4,
        bias: (own + row0) * 4,
        steps: (own + tableAt) * 4,
        nSteps: steps.length,
        per,
      });
      run(Job.epilogue, args, Math.ceil(n / per));
    },
  };
}
