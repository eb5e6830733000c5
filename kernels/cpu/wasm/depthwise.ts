/**
 * The call into depthwise_module.ts: a float32 depthwise convolution (one
 * input channel per output channel) of a 1×1, 3×3 or 5×5 window (a 1×1 is
 * a per-channel scale and shift: inference batch normalization), horizontal
 * stride 1 or 2, both dilations 1, any vertical stride and padding, on the
 * kernels' threads. At a horizontal stride of 2 each padded input row is
 * stored as its even columns, then its odd ones, so the kernel computes
 * only the outputs kept (it computed every column at stride 1 and kept
 * every second: twice the arithmetic).
 *
 * The input, weights, biases and epilogue steps are copied into the
 * kernels' memory once; the channel planes (image × output channel) are
 * then split in blocks over the worker pool (`Job.depthwise`), each block
 * with a scratch of its own where each of its planes is copied into a
 * zero-padded plane (rows rounded up to whole vectors of outputs),
 * convolved, given its epilogue (`conv_epilogue`, while in cache) and
 * copied to its place in the output; the output is copied out once. A
 * plane's values do not depend on the block or thread that computes it, so
 * one thread and several give the same bits. Convolutions of fewer than
 * `depthwiseThreading.poolMinMacs` multiply-adds run on the calling thread,
 * alone, in its own memory, through the same blocks.
 *
 * @module
 */

import type { Conv2dEpilogueStep } from "../../kernel_backend.ts";
import { DEPTHWISE_WASM_SIZES, DW_DESC, DW_DESC_INTS } from "./depthwise_module.ts";
import { EPILOGUE_OPS } from "./epilogue_module.ts";
import {
  cpuKernelMode,
  poolFor,
  SCRATCH_BASE_BYTES,
  scratchFor,
  wasmKernelsFor,
} from "./runtime.ts";
import { Job, jobArgs, runAlone } from "./thread_pool.ts";

/**
 * Below this many multiply-adds a depthwise convolution stays in TypeScript
 * in `"auto"` mode (the copies and calls would cost more).
 */
export const DEPTHWISE_WASM_MIN_MACS = 16384;

/**
 * Below this many multiply-adds (computed ones: rows rounded up to whole
 * vectors) a depthwise convolution stays on the calling thread in
 * `"auto"` mode, where handing blocks to the pool costs about what the
 * second thread saves (bench/depthwise_bench.ts; in `"wasm"` mode every
 * size goes to the pool). A mutable object so that the bench can compare
 * settings in one process; nothing else changes it.
 */
export const depthwiseThreading = {
  /** The least multiply-adds split over the pool. */
  poolMinMacs: 2 ** 20,
  /** Blocks of planes per thread: more of them balance better when a thread stalls. */
  blocksPerThread: 4,
};

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

const roundUp4 = (n: number) => Math.ceil(n / 4) * 4;

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
  if (!DEPTHWISE_WASM_SIZES.includes(K) || N * M * OH * OW === 0 || sw > 2) return false;
  const k = wasmKernelsFor(N * M * OH * OW * K * K, DEPTHWISE_WASM_MIN_MACS);
  if (k === null) return false;
  // Outputs a row, rounded to whole vectors; the padded plane holds every window they read. At
  // horizontal stride 2 a padded row is its even columns, then its odd ones, each half `Wp / 2`
  // long (depthwise_module.ts).
  const OWv = roundUp4(OW);
  const Wp = sw === 1 ? OWv + K - 1 : 2 * (OWv + (K - 1) / 2), Hp = (OH - 1) * sh + K;
  const planes = N * M, macs = planes * OH * OWv * K * K;
  const pool = macs >= depthwiseThreading.poolMinMacs || cpuKernelMode() === "wasm"
    ? poolFor(k)
    : null;
  const space = pool === null ? k.local : k;
  const threads = pool === null ? 1 : pool.threads;
  const blocks = Math.min(
    planes,
    threads * (threads === 1 ? 1 : depthwiseThreading.blocksPerThread),
  );
  const per = Math.ceil(planes / blocks);
  const nSteps = steps?.length ?? 0;
  // Scratch, in floats: [control | geometry | weights | biases | a zero vector | step table |
  // input | output | a block's padded plane and outputs, per block].
  const descAt = SCRATCH_BASE_BYTES / 4, wAt = descAt + roundUp4(DW_DESC_INTS);
  const bAt = wAt + roundUp4(M * K * K), zeroAt = bAt + roundUp4(M), tAt = zeroAt + 4;
  const xAt = tAt + 4 * nSteps, oAt = xAt + roundUp4(N * C * H * W);
  const sAt = oAt + roundUp4(planes * OH * OW);
  const padFloats = roundUp4(Hp * Wp + 4), blockFloats = padFloats + OH * OWv;
  const end = sAt + Math.ceil(planes / per) * blockFloats;
  const view = scratchFor(space, end * 4);
  if (view === null) return false;
  const ints = new Int32Array(view.buffer, 0, end);
  // Input rows that land in the padded plane, and the columns of each.
  const y0 = Math.max(0, -ph), y1 = Math.min(H, Hp - ph);
  const x0 = Math.max(0, -pw), x1 = Math.min(W, Wp - pw);
  const D = DW_DESC, at = (field: number) => descAt + field / 4;
  ints[at(D.xp)] = xAt * 4;
  ints[at(D.planeBytes)] = H * W * 4;
  ints[at(D.srcOff)] = (y0 * W + x0) * 4;
  ints[at(D.wBytes)] = W * 4;
  ints[at(D.dstOff)] = ((y0 + ph) * Wp + (sw === 1 ? pw + x0 : 0)) * 4;
  ints[at(D.col0)] = pw + x0;
  ints[at(D.padRows)] = Math.max(0, y1 - y0);
  ints[at(D.padBytes)] = Math.max(0, x1 - x0) * 4;
  ints[at(D.wpBytes)] = Wp * 4;
  ints[at(D.wp)] = wAt * 4;
  ints[at(D.kkBytes)] = K * K * 4;
  ints[at(D.bp)] = bAt * 4;
  ints[at(D.outOff)] = padFloats * 4;
  ints[at(D.oh)] = OH;
  ints[at(D.owvBytes)] = OWv * 4;
  ints[at(D.stepBytes)] = sh * Wp * 4;
  ints[at(D.op)] = oAt * 4;
  ints[at(D.oPlaneBytes)] = OH * OW * 4;
  ints[at(D.owBytes)] = OW * 4;
  ints[at(D.sw)] = sw;
  view.set(wv.subarray(0, M * K * K), wAt);
  if (bv === null) view.fill(0, bAt, bAt + M);
  else view.set(bv.subarray(0, M), bAt);
  view.fill(0, zeroAt, zeroAt + 4);
  for (let i = 0; i < nSteps; i++) {
    const { op, a, b } = steps![i];
    ints[tAt + 4 * i] = EPILOGUE_OPS[op];
    view[tAt + 4 * i + 1] = a;
    view[tAt + 4 * i + 2] = b;
  }
  view.set(xv.subarray(0, N * C * H * W), xAt);
  const args = jobArgs("depthwise", {
    desc: descAt * 4,
    scr: sAt * 4,
    scrBytes: blockFloats * 4,
    planes,
    per,
    M,
    C,
    K,
    outOff: padFloats * 4,
    outBytes: OH * OWv * 4,
    zero: zeroAt * 4,
    steps: tAt * 4,
    nSteps,
  });
  const nBlocks = Math.ceil(planes / per);
  if (pool !== null) pool.run(space.exports, Job.depthwise, args, nBlocks);
  else runAlone(space.exports, Job.depthwise, args, nBlocks);
  ov.set(view.subarray(oAt, oAt + planes * OH * OW));
  return true;
}
