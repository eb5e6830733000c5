/**
 * The call into depthwise_module.ts: a float32 depthwise convolution (one
 * input channel per output channel) of a 3×3 or 5×5 window, horizontal
 * stride 1 or 2, both dilations 1, any vertical stride and padding, on the
 * calling thread's WebAssembly scratch. A horizontal stride of 2 computes
 * every column at stride 1 and keeps every second: twice the arithmetic,
 * still several times the TypeScript loop's speed. Each channel's plane is copied into
 * a zero-padded plane there (rows rounded up to whole vectors of outputs),
 * convolved by the kernel, and its rows copied out; the padding is zeroed
 * once per call, since every channel writes the same interior.
 *
 * @module
 */

import type { Conv2dEpilogueStep } from "../../kernel_backend.ts";
import { applyConvEpilogue } from "../conv_epilogue.ts";
import { DEPTHWISE_WASM_SIZES, depthwiseModuleBytes } from "./depthwise_module.ts";
import { kernelModule, SCRATCH_BASE_BYTES, scratchFor, wasmKernelsFor } from "./runtime.ts";

/** The exported functions of depthwise_module.ts (byte addresses). */
interface DepthwiseExports {
  [kernel: `dw${number}`]: (
    xp: number,
    wp: number,
    op: number,
    rows: number,
    wpBytes: number,
    owBytes: number,
    stepBytes: number,
    bias: number,
  ) => void;
}

/**
 * Below this many multiply-adds a depthwise convolution stays in TypeScript
 * in `"auto"` mode (the copies and calls would cost more).
 */
export const DEPTHWISE_WASM_MIN_MACS = 16384;

const depthwiseOn = kernelModule<DepthwiseExports>(depthwiseModuleBytes);

/** What `wasmDepthwise` convolves: `x [N, C, H, W]` by `w [M, 1, K, K]` into `[N, M, OH, OW]`. */
export interface DepthwiseCall {
  N: number;
  C: number;
  H: number;
  W: number;
  M: number;
  K: number;
  OH: number;
  OW: number;
  /** Vertical and horizontal stride (`sw` 1 or 2). */
  sh: number;
  sw: number;
  /** Padding above and to the left. */
  ph: number;
  pw: number;
}

/**
 * `o = depthwise(x, w) + bias`, then `steps` over each channel while it is
 * in cache; false, having written nothing, where the TypeScript loop should
 * run instead (mode, size, window, no WebAssembly, scratch).
 */
export function wasmDepthwise(
  xv: Float32Array,
  wv: Float32Array,
  bv: Float32Array | null,
  ov: Float32Array,
  s: DepthwiseCall,
  steps: readonly Conv2dEpilogueStep[] | undefined,
): boolean {
  const { N, C, H, W, M, K, OH, OW, sh, sw, ph, pw } = s;
  if (!DEPTHWISE_WASM_SIZES.includes(K) || OH === 0 || OW === 0 || sw > 2) return false;
  const k = wasmKernelsFor(N * M * OH * OW * K * K, DEPTHWISE_WASM_MIN_MACS);
  if (k === null) return false;
  const space = k.local, e = depthwiseOn(space);
  if (e === null) return false;
  // Outputs a row, rounded to whole vectors; the padded plane holds every window they read.
  const OWs = (OW - 1) * sw + 1, OWv = Math.ceil(OWs / 4) * 4;
  const Wp = OWv + K - 1, Hp = (OH - 1) * sh + K;
  const wAt = SCRATCH_BASE_BYTES / 4, xAt = wAt + 32, oAt = xAt + Hp * Wp + 4;
  const view = scratchFor(space, (oAt + OH * OWv) * 4);
  if (view === null) return false;
  view.fill(0, xAt, oAt);
  // Input rows that land in the padded plane, and the columns of each.
  const y0 = Math.max(0, -ph), y1 = Math.min(H, Hp - ph);
  const x0 = Math.max(0, -pw), x1 = Math.min(W, Wp - pw);
  const perGroup = M / C, plane = OH * OW, fn = e[`dw${K}`];
  for (let n = 0; n < N; n++) {
    for (let m = 0; m < M; m++) {
      const xc = (n * C + Math.floor(m / perGroup)) * H * W, o = (n * M + m) * plane;
      view.set(wv.subarray(m * K * K, (m + 1) * K * K), wAt);
      for (let iy = y0; iy < y1; iy++) {
        const from = xc + iy * W;
        view.set(xv.subarray(from + x0, from + x1), xAt + (iy + ph) * Wp + pw + x0);
      }
      fn(xAt * 4, wAt * 4, oAt * 4, OH, Wp * 4, OWv * 4, sh * Wp * 4, bv === null ? 0 : bv[m]);
      for (let oy = 0; oy < OH; oy++) {
        const from = oAt + oy * OWv, to = o + oy * OW;
        if (sw === 1) ov.set(view.subarray(from, from + OW), to);
        else for (let j = 0; j < OW; j++) ov[to + j] = view[from + j * sw];
      }
      if (steps !== undefined && steps.length > 0) applyConvEpilogue(ov, o, o + plane, steps);
    }
  }
  return true;
}
