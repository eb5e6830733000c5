/**
 * A convolution's epilogue on the CPU (`Conv2dGeometry.epilogue`): the
 * activation and scaling steps an exporter writes after a `Conv`, applied to
 * the output in cache-sized chunks, every step over one chunk before the
 * next, so the output is read from memory once instead of once a step (the
 * hard-swish an exporter writes is four passes, with its scalings six to
 * eight).
 *
 * @module
 */

import type { Conv2dEpilogueStep } from "../kernel_backend.ts";

/** Values per chunk: 32 KiB, in L1/L2 while every step runs over it. */
const CHUNK = 8192;

/** `o[from .. to)` through `steps`, in place. */
export function applyConvEpilogue(
  o: Float32Array,
  from: number,
  to: number,
  steps: readonly Conv2dEpilogueStep[],
): void {
  for (let c = from; c < to; c += CHUNK) {
    const end = Math.min(to, c + CHUNK);
    for (const { op, a, b } of steps) {
      switch (op) {
        case "affine":
          for (let i = c; i < end; i++) o[i] = a * o[i] + b;
          break;
        case "relu":
          for (let i = c; i < end; i++) o[i] = o[i] < 0 ? 0 : o[i]; // NaN stays NaN
          break;
        case "clip":
          for (let i = c; i < end; i++) o[i] = Math.min(Math.max(o[i], a), b);
          break;
        case "hardsigmoid":
          for (let i = c; i < end; i++) o[i] = Math.max(0, Math.min(1, a * o[i] + b));
          break;
        case "hardswish":
          for (let i = c; i < end; i++) {
            const v = o[i];
            o[i] = v * Math.min(Math.max(v + a, 0), b) / b;
          }
          break;
        case "sigmoid":
          for (let i = c; i < end; i++) o[i] = 1 / (1 + Math.exp(-o[i]));
          break;
      }
    }
  }
}
