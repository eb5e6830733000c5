/**
 * Signal operators computed on the host (host_tensors.ts), as ONNX's
 * reference computes them: `window` (ONNX's `HannWindow`, `HammingWindow`,
 * `BlackmanWindow`), `dft` (ONNX's `DFT`: forward and inverse, one-sided,
 * any length, real or complex input as a trailing axis of 1 or 2) and `stft`
 * (ONNX's `STFT`: windowed frames, each a `dft`), in float64 and rounded once
 * to the result's dtype.
 *
 * @example A periodic Hann window of 4
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const window = getGlobalFunc("vm.op.window")!;
 * using size = tensor(new BigInt64Array([4n]), { shape: [] });
 * using w = window(size, "hann", 1, "float32") as NDArray;
 * assertEquals([...(w.dataSync() as Float32Array)].map((v) => Math.round(v * 1e6) / 1e6), [0, 0.5, 1, 0.5]);
 * ```
 *
 * @module
 */

import { formatShape } from "../../kernels/broadcast.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { dtypeArg, tensorArg } from "../validate.ts";
import {
  axisOf,
  choiceArg,
  integersOf,
  numbersOf,
  onHost,
  put,
  sizeOf,
  stridesOf,
} from "../host_operators/host_tensors.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const hostSignalBuiltins = new BuiltinTable("Host signal operators", import.meta.url);

const WINDOWS = ["hann", "hamming", "blackman"] as const;

hostSignalBuiltins.add(
  "vm.op.window",
  (size: unknown, kind: unknown, periodic: unknown, dtype: unknown) => {
    const who = "window";
    const st = tensorArg(size, "size", who);
    const k = choiceArg(who, kind, "kind", WINDOWS);
    const dt = dtypeArg(dtype, who);
    return onHost(who, [st], ([sv]) => {
      const n = integersOf(sv!, "size", who)[0];
      if (!(n >= 0)) throw new RangeError(`${who}: size ${n} is negative`);
      const denominator = periodic ? n : n - 1;
      return {
        shape: [n],
        dtype: dt,
        fill(out) {
          for (let i = 0; i < n; i++) {
            const t = (2 * Math.PI * i) / denominator;
            const v = k === "hann"
              ? Math.sin((Math.PI * i) / denominator) ** 2
              : k === "hamming"
              ? 25 / 46 - (1 - 25 / 46) * Math.cos(t)
              : 0.42 - 0.5 * Math.cos(t) + 0.08 * Math.cos(2 * t);
            put(out, i, v);
          }
        },
      };
    });
  },
  {
    signature: "(size, kind, periodic, dtype) → tensor",
    summary:
      'A window of `size` (a scalar integer tensor read when it runs) of `kind` `"hann"` (sin²(πn/N)), `"hamming"` (α − β·cos(2πn/N), α = 25/46) or `"blackman"` (0.42 − 0.5·cos(2πn/N) + 0.08·cos(4πn/N)), with N the size when `periodic`, else the size − 1 (ONNX\'s `HannWindow`, `HammingWindow`, `BlackmanWindow`). Computed on the host in float64.',
    dtypes: ["float32", "float64", "int32", "int64"],
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not a tensor, an unknown kind or dtype), `RangeError` (a negative size).",
    tvm: null,
  },
);

hostSignalBuiltins.add(
  "vm.op.dft",
  (x: unknown, length: unknown, axis: unknown, inverse: unknown, onesided: unknown) => {
    const who = "dft";
    const t = tensorArg(x, "x", who);
    const lt = length === undefined || length === null
      ? undefined
      : tensorArg(length, "length", who);
    const parts = t.shape[t.shape.length - 1];
    if (t.shape.length < 2 || (parts !== 1 && parts !== 2)) {
      throw new RangeError(`${who}: x ${formatShape(t.shape)} must end in an axis of 1 or 2`);
    }
    // The axis: an integer, or a scalar integer tensor read when it runs.
    const at = typeof axis === "object" && axis !== null ? tensorArg(axis, "axis", who) : undefined;
    return onHost(who, [t, lt, at], ([xv, lv, av]) => {
      const a = axisOf(
        who,
        av === undefined ? axis : integersOf(av, "axis", who)[0],
        t.shape.length - 1,
      );
      const n = t.shape[a], len = lv === undefined ? n : integersOf(lv, "length", who)[0];
      if (!(len >= 1)) throw new RangeError(`${who}: length ${len} must be at least 1`);
      const kept = onesided ? Math.floor(len / 2) + 1 : len;
      const shape = [...t.shape];
      shape[a] = kept;
      shape[shape.length - 1] = 2;
      const values = numbersOf(xv!);
      const inner = sizeOf(t.shape.slice(a + 1, -1)), outer = sizeOf(t.shape.slice(0, a));
      const sign = inverse ? 1 : -1;
      return {
        shape,
        dtype: t.dtype,
        fill(out) {
          const inStrides = stridesOf(t.shape), outStrides = stridesOf(shape);
          for (let o = 0; o < outer; o++) {
            for (let i = 0; i < inner; i++) {
              const at = (s: readonly number[], k: number) =>
                o * (a > 0 ? s[a - 1] : 0) + k * s[a] + i * s[s.length - 2];
              for (let f = 0; f < kept; f++) {
                let re = 0, im = 0;
                // The signal padded with zeros or cut to the length.
                for (let k = 0; k < Math.min(n, len); k++) {
                  const p = at(inStrides, k);
                  const xr = values[p], xi = parts === 2 ? values[p + 1] : 0;
                  const angle = (sign * 2 * Math.PI * ((f * k) % len)) / len;
                  const c = Math.cos(angle), s = Math.sin(angle);
                  re += xr * c - xi * s;
                  im += xr * s + xi * c;
                }
                const q = at(outStrides, f);
                put(out, q, inverse ? re / len : re);
                put(out, q + 1, inverse ? im / len : im);
              }
            }
          }
        },
      };
    });
  },
  {
    signature: "(x, length?, axis, inverse, onesided) → tensor",
    summary:
      "The discrete Fourier transform of `x` along `axis` (an integer, or a scalar tensor read when it runs), ONNX's `DFT`: `x`'s last axis holds a real signal (1) or real and imaginary parts (2); the signal is padded with zeros or cut to `length` (a scalar tensor read when it runs; default the axis' size); `inverse` takes the inverse transform (divided by the length), `onesided` keeps the first `length / 2 + 1` frequencies. The result's last axis holds real and imaginary parts. Computed on the host in float64 (a direct sum, no FFT).",
    dtypes: ["float32", "float64"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not tensors), `RangeError` (a last axis other than 1 or 2, an axis out of range, a length below 1).",
    tvm: null,
  },
);

hostSignalBuiltins.add(
  "vm.op.stft",
  (
    signal: unknown,
    frameStep: unknown,
    window: unknown,
    frameLength: unknown,
    onesided: unknown,
  ) => {
    const who = "stft";
    const t = tensorArg(signal, "signal", who);
    const st = tensorArg(frameStep, "frame_step", who);
    const wt = window === undefined || window === null
      ? undefined
      : tensorArg(window, "window", who);
    const lt = frameLength === undefined || frameLength === null
      ? undefined
      : tensorArg(frameLength, "frame_length", who);
    const [batch, length, parts] = t.shape;
    if (t.shape.length !== 3 || (parts !== 1 && parts !== 2)) {
      throw new RangeError(
        `${who}: signal ${formatShape(t.shape)} must be [batch, length, 1 or 2]`,
      );
    }
    return onHost(who, [t, st, wt, lt], ([xv, sv, wv, lv]) => {
      const step = integersOf(sv!, "frame_step", who)[0];
      const w = wv === undefined ? undefined : numbersOf(wv);
      // The reference: the frame's length, else the window's, else the signal's.
      const n = lv !== undefined ? integersOf(lv, "frame_length", who)[0] : w?.length ?? length;
      if (!(step >= 1) || !(n >= 1) || n > length) {
        throw new RangeError(
          `${who}: frame_step ${step} and frame_length ${n} for a signal of ${length}`,
        );
      }
      const weights = w ?? new Array<number>(n).fill(1);
      const frames = 1 + Math.floor((length - n) / step);
      const bins = onesided ? Math.floor(n / 2) + 1 : n;
      const values = numbersOf(xv!);
      return {
        shape: [batch, frames, bins, 2],
        dtype: t.dtype,
        fill(out) {
          // Each frame: window.length samples from f·step (zeros past the end), weighed by the
          // window, then a DFT of length n (cut or padded with zeros), in float64.
          const taps = Math.min(weights.length, n);
          for (let b = 0; b < batch; b++) {
            for (let f = 0; f < frames; f++) {
              for (let k = 0; k < bins; k++) {
                let re = 0, im = 0;
                for (let j = 0; j < taps; j++) {
                  const at = f * step + j;
                  if (at >= length) break;
                  const p = (b * length + at) * parts;
                  const xr = values[p] * weights[j],
                    xi = parts === 2 ? values[p + 1] * weights[j] : 0;
                  const angle = (-2 * Math.PI * ((k * j) % n)) / n;
                  const c = Math.cos(angle), s = Math.sin(angle);
                  re += xr * c - xi * s;
                  im += xr * s + xi * c;
                }
                const q = ((b * frames + f) * bins + k) * 2;
                put(out, q, re);
                put(out, q + 1, im);
              }
            }
          }
        },
      };
    });
  },
  {
    signature: "(signal, frame_step, window?, frame_length?, onesided) → tensor",
    summary:
      "ONNX's `STFT`: of `signal [batch, length, 1 or 2]` (real, or real and imaginary parts), frames of `frame_length` (a scalar tensor; default the window's length, else the signal's) every `frame_step` samples (a scalar tensor), each weighed by `window` (default ones) and transformed as `dft` does; `onesided` keeps the first `frame_length / 2 + 1` frequencies. The result is `[batch, frames, frequencies, 2]`. Computed on the host in float64 (a direct sum, no FFT).",
    dtypes: ["float32", "float64"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not tensors), `RangeError` (a signal not `[batch, length, 1 or 2]`, a step or frame length below 1 or a frame longer than the signal).",
    tvm: null,
  },
);

hostSignalBuiltins.add(
  "vm.op.mel_weight_matrix",
  (
    bins: unknown,
    length: unknown,
    rate: unknown,
    lower: unknown,
    upper: unknown,
    dtype: unknown,
  ) => {
    const who = "mel_weight_matrix";
    const ts = [[bins, "num_mel_bins"], [length, "dft_length"], [rate, "sample_rate"], [
      lower,
      "lower_edge_hertz",
    ], [upper, "upper_edge_hertz"]].map(([v, what]) => tensorArg(v, what as string, who));
    const dt = dtypeArg(dtype, who);
    return onHost(who, ts, (views) => {
      const [n, len, sr] = views.slice(0, 3).map((v) => integersOf(v!, "a size", who)[0]);
      const [lo, hi] = views.slice(3).map((v) => numbersOf(v!)[0]);
      if (!(n >= 1 && len >= 1 && sr >= 1)) {
        throw new RangeError(`${who}: ${n} bins, length ${len}, rate ${sr}`);
      }
      // As ONNX's reference computes it: the edges' mels in float32, the bins in float64.
      const f = Math.fround;
      const mel = (hz: number) => f(2595 * f(Math.log10(f(1 + f(hz / 700)))));
      const low = mel(lo), step = f(f(mel(hi) - low) / (n + 2));
      const edges = Array.from({ length: n + 2 }, (_, i) => {
        const hz = 700 * (10 ** ((i * step + low) / 2595) - 1);
        return Math.trunc(Math.floor(((len + 1) * hz) / sr));
      });
      const rows = Math.floor(len / 2) + 1;
      return {
        shape: [rows, n],
        dtype: dt,
        fill(out) {
          const w = new Float64Array(rows * n);
          for (let i = 0; i < n; i++) {
            const [left, centre, right] = [edges[i], edges[i + 1], edges[i + 2]];
            if (centre === left) w[centre * n + i] = 1;
            else for (let j = left; j <= centre; j++) w[j * n + i] = (j - left) / (centre - left);
            for (let j = centre; j < right; j++) w[j * n + i] = (right - j) / (right - centre);
          }
          w.forEach((v, i) => put(out, i, v));
        },
      };
    });
  },
  {
    signature:
      "(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz, dtype) → tensor",
    summary:
      "ONNX's `MelWeightMatrix`: the `[dft_length / 2 + 1, num_mel_bins]` matrix of triangular filters, evenly spaced on the mel scale between the two edges, that turns a one-sided spectrum into mel bins (scalar tensors read when it runs), computed as ONNX's reference does. Computed on the host.",
    dtypes: ["float32", "float64"],
    devices: ["cpu", "webgpu"],
    errors: "`TypeError` (not tensors, an unknown dtype), `RangeError` (sizes below 1).",
    tvm: null,
  },
);
