/**
 * `vm.op.conv2d` against a plain float64 loop written from the operator's
 * definition (output `o` reads input position `o·stride − pad + k·dilation`
 * of the input spaced out by `input_dilation`), at odd sizes: groups,
 * depthwise, strides, dilations, asymmetric padding, transposed
 * (input-dilated) convolutions, with and without a bias, with and without
 * an epilogue (activation and scaling steps after the bias). Shared by
 * tests/conv2d_test.ts (CPU, both kernel paths) and
 * tests/webgpu/conv2d_suite.ts.
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";
import { type Device, getGlobalFunc, type NDArray, tensor } from "../mod.ts";

/** One convolution to check. */
export interface ConvCase {
  name: string;
  x: [number, number, number, number];
  /** `[M, C/groups, KH, KW]`. */
  w: [number, number, number, number];
  strides?: [number, number];
  padding?: [number, number, number, number];
  dilation?: [number, number];
  groups?: number;
  inputDilation?: [number, number];
  bias?: boolean;
  /** `vm.op.conv2d`'s epilogue text and what it computes of each output, written out. */
  epilogue?: [string, (v: number) => number];
  /** Weight element `k` (row-major), where a path depends on their values; random otherwise. */
  weights?: (k: number) => number;
}

const clamp = (v: number, lo: number, hi: number) => Math.min(Math.max(v, lo), hi);

/** The cases: each path of the CPU kernel and the WebGPU template's every branch. */
export const CONV_CASES: readonly ConvCase[] = [
  {
    name: "3×3, padded, bias",
    x: [2, 5, 9, 7],
    w: [6, 5, 3, 3],
    padding: [1, 1, 1, 1],
    bias: true,
  },
  {
    // At least MR = 6 output channels: windows packed straight into the product's panels
    // (kernels/cpu/conv_panels.ts), 247 outputs a plane (a ragged last panel, runs and edges).
    name: "3×3 into panels, odd plane, two images, bias, hard-swish",
    x: [2, 11, 13, 19],
    w: [13, 11, 3, 3],
    padding: [1, 1, 1, 1],
    bias: true,
    epilogue: ["hardswish(3, 6)", (v) => v * clamp(v + 3, 0, 6) / 6],
  },
  {
    name: "3×3 into panels, grouped, stride (2, 1), dilation 2, asymmetric padding",
    x: [1, 12, 17, 15],
    w: [14, 6, 3, 3],
    groups: 2,
    strides: [2, 1],
    dilation: [2, 2],
    padding: [2, 1, 0, 2],
  },
  { name: "1×1 stride 2 into panels", x: [1, 9, 11, 9], w: [7, 9, 1, 1], strides: [2, 2] },
  {
    // Sigmoid in WebAssembly (conv_epilogue: e^−|v| by the vector exponential) on the product's
    // rows; an affine first so that outputs reach ±20, where 1 − s and s underflow apart.
    name: "1×1, bias, affine then sigmoid epilogue on the product's rows",
    x: [2, 5, 7, 8],
    w: [8, 5, 1, 1],
    bias: true,
    epilogue: ["affine(12, 0) sigmoid", (v) => 1 / (1 + Math.exp(-12 * v))],
  },
  {
    // The same through the direct loop's TypeScript epilogue (a transposed 3×3 of stride 2).
    name: "transposed 3×3 stride 2, sigmoid epilogue (TypeScript)",
    x: [1, 3, 4, 5],
    w: [4, 3, 3, 3],
    inputDilation: [2, 2],
    padding: [1, 1, 1, 1],
    epilogue: ["sigmoid", (v) => 1 / (1 + Math.exp(-v))],
  },
  {
    // The bias and every epilogue step on the product's C in WebAssembly (epilogue_module.ts).
    name: "1×1, bias, clip hard-sigmoid affine epilogue on the product's rows",
    x: [2, 5, 7, 9],
    w: [8, 5, 1, 1],
    bias: true,
    epilogue: [
      "clip(-0.5, 0.75) hardsigmoid(0.2, 0.5) affine(2, -1)",
      (v) => 2 * clamp(0.2 * clamp(v, -0.5, 0.75) + 0.5, 0, 1) - 1,
    ],
  },
  {
    // Rows a whole number of panels wide: the product reads its B in place from a zero-padded
    // copy (gemm_windows, kernels/cpu/wasm/gemm_module.ts; pack_windows packed it before).
    name: "3×3 into panels from a padded copy, rows of 16, vertical stride 2, relu",
    x: [2, 7, 11, 16],
    w: [10, 7, 3, 3],
    strides: [2, 1],
    padding: [1, 1, 1, 1],
    bias: true,
    epilogue: ["relu", (v) => Math.max(v, 0)],
  },
  {
    name: "3×3 stride 2 into panels from a padded copy split in column phases, rows of 16",
    x: [1, 5, 9, 31],
    w: [6, 5, 3, 3],
    strides: [2, 2],
    padding: [1, 1, 1, 1],
    bias: true,
  },
  {
    name: "2×3 stride (1, 3) dilation (1, 2) into panels from three column phases, rows of 16",
    x: [1, 4, 6, 47],
    w: [7, 4, 2, 3],
    strides: [1, 3],
    dilation: [1, 2],
    padding: [0, 2, 1, 1],
  },
  {
    // K = 360 passes one block of k (gemm.ts's kc): gemm_windows reads the offset table from
    // each block's first row on; 7 output channels, a tile and a tail of one row.
    name: "3×3 of 40 channels read in place from a padded copy over two blocks of k, rows of 16",
    x: [1, 40, 5, 16],
    w: [7, 40, 3, 3],
    padding: [1, 1, 1, 1],
    bias: true,
  },
  {
    name: "3×3 dilated (1, 2) into panels from a padded copy, grouped, rows of 8",
    x: [1, 8, 9, 12],
    w: [12, 4, 3, 3],
    groups: 2,
    dilation: [1, 2],
    padding: [0, 0, 2, 0],
  },
  {
    // 256 input rows and more: x copied in as one block and padded by the pool (pad_planes,
    // kernels/cpu/wasm/windows_module.ts); rows of 14 (a vector and two floats), padded planes
    // of 270 floats (not a whole number of vectors), two images.
    name: "3×3 from a copy padded by the pool, two images, rows of 14, bias, hard-swish",
    x: [2, 23, 13, 14],
    w: [7, 23, 3, 3],
    padding: [2, 2, 0, 2],
    bias: true,
    epilogue: ["hardswish(3, 6)", (v) => v * clamp(v + 3, 0, 6) / 6],
  },
  {
    name: "3×1 over a column of width 1 padded by the pool to rows of 8",
    x: [1, 2, 140, 1],
    w: [6, 2, 3, 1],
    padding: [1, 3, 1, 4],
  },
  {
    // The last input row lands past the padded plane (cropped); each group's channels padded.
    name: "3×3 padded by the pool, grouped, vertical stride 2, the last row cropped",
    x: [1, 20, 29, 8],
    w: [12, 10, 3, 3],
    groups: 2,
    strides: [2, 1],
    padding: [1, 1, 0, 1],
  },
  {
    // Column phases padded by the pool: one run of pad_planes a phase, every second value.
    name: "3×3 stride 2 from two column phases padded by the pool, three channels, rows of 16",
    x: [1, 3, 100, 31],
    w: [6, 3, 3, 3],
    strides: [2, 2],
    padding: [1, 1, 1, 1],
    bias: true,
  },
  {
    name: "2×3 stride (1, 3) dilation (1, 2) from three column phases padded by the pool",
    x: [1, 9, 30, 47],
    w: [7, 9, 2, 3],
    strides: [1, 3],
    dilation: [1, 2],
    padding: [0, 2, 1, 1],
  },
  {
    // Width 1 at horizontal stride 2: phase 1 gets no input column, only its zeros.
    name: "3×1 of horizontal stride 2 over a column of width 1 padded by the pool",
    x: [1, 2, 150, 1],
    w: [6, 2, 3, 1],
    strides: [1, 2],
    padding: [1, 8, 1, 7],
  },
  {
    // 50 output channels: eight full tiles and a tail of two, so the pool's blocks are of tile
    // rows (Job.gemm), over two blocks of k (K = 270); 63 outputs a plane (a ragged last panel).
    name: "3×3 of 50 output channels in blocks of tile rows, bias and hard-swish",
    x: [1, 30, 7, 9],
    w: [50, 30, 3, 3],
    padding: [1, 1, 1, 1],
    bias: true,
    epilogue: ["hardswish(3, 6)", (v) => v * clamp(v + 3, 0, 6) / 6],
  },
  {
    name: "3×3 of 50 output channels read in place, rows of 16, bias and relu",
    x: [2, 30, 5, 16],
    w: [50, 30, 3, 3],
    padding: [1, 1, 1, 1],
    bias: true,
    epilogue: ["relu", (v) => Math.max(v, 0)],
  },
  {
    // Neither padded nor cropped: the padded copy is x as it is, copied in as one block.
    name: "1×1 of vertical stride 2 read in place from x as it is, rows of 16",
    x: [1, 9, 11, 16],
    w: [7, 9, 1, 1],
    strides: [2, 1],
    bias: true,
  },
  { name: "1×1 pointwise", x: [1, 17, 6, 5], w: [9, 17, 1, 1], bias: true },
  {
    // A plane of 24 (three panels, over two rows of x): x's copy read in place by gemm_windows,
    // over two blocks of k (K = 300), 13 output channels (two tiles and a tail of one row).
    name: "1×1 of 300 channels read in place, two blocks of k, bias, hard-swish",
    x: [1, 300, 2, 12],
    w: [13, 300, 1, 1],
    bias: true,
    epilogue: ["hardswish(3, 6)", (v) => v * clamp(v + 3, 0, 6) / 6],
  },
  { name: "1×1 pointwise, two images, vec4-aligned", x: [2, 16, 5, 8], w: [12, 16, 1, 1] },
  {
    name: "stride 2, asymmetric padding",
    x: [1, 4, 11, 10],
    w: [7, 4, 3, 3],
    strides: [2, 2],
    padding: [0, 1, 2, 1],
  },
  {
    name: "dilation 2, stride (1, 3)",
    x: [1, 6, 13, 12],
    w: [5, 6, 3, 2],
    dilation: [2, 2],
    strides: [1, 3],
    padding: [2, 0, 1, 2],
    bias: true,
  },
  {
    name: "groups 3",
    x: [2, 9, 7, 8],
    w: [6, 3, 3, 3],
    groups: 3,
    padding: [1, 1, 1, 1],
    bias: true,
  },
  {
    name: "depthwise 5×5, stride 2",
    x: [1, 8, 15, 13],
    w: [8, 1, 5, 5],
    groups: 8,
    strides: [2, 2],
    padding: [2, 2, 2, 2],
    bias: true,
  },
  {
    name: "depthwise ×2 channels",
    x: [1, 3, 6, 7],
    w: [6, 1, 3, 3],
    groups: 3,
    padding: [0, 1, 1, 0],
  },
  {
    name: "transposed 2×2 stride 2",
    x: [1, 5, 4, 6],
    w: [3, 5, 2, 2],
    inputDilation: [2, 2],
    padding: [1, 1, 1, 1],
    bias: true,
  },
  {
    // Every phase in one WebAssembly product (12 rows), bias and epilogue on its C.
    name: "transposed 2×2 stride 2, two images, all phases in one product, hard-swish",
    x: [2, 6, 5, 7],
    w: [3, 6, 2, 2],
    inputDilation: [2, 2],
    padding: [1, 1, 1, 1],
    bias: true,
    epilogue: ["hardswish(3, 6)", (v) => v * clamp(v + 3, 0, 6) / 6],
  },
  {
    name: "depthwise 5×5 stride 1, two images, one image narrower than the kernel",
    x: [2, 3, 7, 4],
    w: [3, 1, 5, 5],
    groups: 3,
    padding: [2, 2, 2, 1],
    bias: true,
  },
  {
    name: "depthwise 3×3 stride (1, 1), wide rows",
    x: [1, 2, 5, 37],
    w: [2, 1, 3, 3],
    groups: 2,
    padding: [1, 1, 1, 1],
  },
  {
    // One output channel (a detector's last upsampling): four phase rows, zero-padded to the
    // product's MR so that it runs in WebAssembly, their rows' outputs dropped.
    name: "transposed 2×2 stride 2 to one channel, two images, bias, affine epilogue",
    x: [2, 7, 5, 9],
    w: [1, 7, 2, 2],
    inputDilation: [2, 2],
    padding: [1, 1, 1, 1],
    bias: true,
    epilogue: ["affine(1.5, 0.25)", (v) => 1.5 * v + 0.25],
  },
  {
    name: "transposed 3×3 stride 3, two images (by phase)",
    x: [2, 6, 3, 4],
    w: [5, 6, 3, 3],
    inputDilation: [3, 3],
    padding: [2, 2, 2, 2],
    bias: true,
  },
  {
    name: "transposed depthwise ×2, 2×2 stride 2 (by phase)",
    x: [1, 4, 3, 5],
    w: [8, 1, 2, 2],
    groups: 4,
    inputDilation: [2, 2],
    padding: [1, 1, 1, 1],
  },
  {
    // A Resize by nearest ×3 as the importer writes it: every weight 1, so each output row is
    // computed once and copied to the two below it (the general width, not 2).
    name: "transposed depthwise 3×3 stride 3 of all-one weights (nearest ×3), two images",
    x: [2, 3, 4, 5],
    w: [3, 1, 3, 3],
    groups: 3,
    inputDilation: [3, 3],
    padding: [2, 2, 2, 2],
    weights: () => 1,
  },
  {
    // Channel multiplier 2; even output channels repeat their kernel rows (copied), odd ones
    // do not (computed).
    name: "transposed depthwise 2×2 stride 2, repeated and distinct kernel rows, bias",
    x: [1, 2, 3, 4],
    w: [4, 1, 2, 2],
    groups: 2,
    inputDilation: [2, 2],
    padding: [1, 1, 1, 1],
    bias: true,
    weights: (k) => ((k >> 2) % 2 === 0 ? [0.5, -2][k % 2] : (k % 4) + 1),
  },
  {
    name: "transposed 3×3 stride (2, 3), grouped",
    x: [1, 4, 5, 4],
    w: [6, 2, 3, 3],
    groups: 2,
    inputDilation: [2, 3],
    padding: [2, 1, 2, 2],
    dilation: [1, 1],
  },
  {
    name: "3×3 with bias, affine hard-swish affine epilogue (matrix product path)",
    x: [1, 3, 5, 7],
    w: [5, 3, 3, 3],
    padding: [1, 1, 1, 1],
    bias: true,
    epilogue: [
      "affine(2.5, 0.75) hardswish(3, 6) affine(0.5, -0.25)",
      (v) => {
        const y = 2.5 * v + 0.75;
        return 0.5 * (y * clamp(y + 3, 0, 6) / 6) - 0.25;
      },
    ],
  },
  {
    name: "1×1 pointwise, relu epilogue",
    x: [2, 6, 3, 5],
    w: [7, 6, 1, 1],
    bias: true,
    epilogue: ["relu", (v) => Math.max(v, 0)],
  },
  {
    name: "depthwise 5×5 stride 1, hardsigmoid epilogue",
    x: [1, 3, 9, 11],
    w: [3, 1, 5, 5],
    groups: 3,
    padding: [2, 2, 2, 2],
    bias: true,
    epilogue: ["hardsigmoid(0.2, 0.5)", (v) => clamp(0.2 * v + 0.5, 0, 1)],
  },
  {
    name: "depthwise 3×3 stride 2, no bias, clip and affine epilogue",
    x: [1, 4, 9, 7],
    w: [4, 1, 3, 3],
    groups: 4,
    strides: [2, 2],
    padding: [1, 1, 1, 1],
    epilogue: ["clip(-0.5, 0.5) affine(-2, 1)", (v) => -2 * clamp(v, -0.5, 0.5) + 1],
  },
  {
    name: "transposed 3×3 stride (2, 3), grouped, relu and hard-swish epilogue",
    x: [1, 4, 5, 4],
    w: [6, 2, 3, 3],
    groups: 2,
    inputDilation: [2, 3],
    padding: [2, 1, 2, 2],
    epilogue: ["relu hardswish(3, 6)", (v) => Math.max(v, 0) * clamp(Math.max(v, 0) + 3, 0, 6) / 6],
  },
  {
    name: "depthwise 3×3 stride (2, 1), odd width, hard-swish epilogue",
    x: [1, 5, 10, 9],
    w: [5, 1, 3, 3],
    groups: 5,
    strides: [2, 1],
    padding: [1, 1, 1, 1],
    bias: true,
    epilogue: ["hardswish(3, 6)", (v) => v * clamp(v + 3, 0, 6) / 6],
  },
  {
    name: "depthwise 5×5 stride (2, 1), ×2 channels, uneven padding, two images",
    x: [2, 2, 11, 6],
    w: [4, 1, 5, 5],
    groups: 2,
    strides: [2, 1],
    padding: [2, 0, 1, 3],
  },
  {
    name: "kernel larger than input with padding",
    x: [1, 2, 2, 3],
    w: [3, 2, 4, 4],
    padding: [2, 2, 2, 2],
  },
  // A per-channel scale and shift (the ONNX importer's inference batch normalization).
  {
    name: "depthwise 1×1, two images, bias",
    x: [2, 5, 3, 7],
    w: [5, 1, 1, 1],
    groups: 5,
    bias: true,
  },
  { name: "depthwise 1×1 ×2 channels, no bias", x: [1, 3, 4, 5], w: [6, 1, 1, 1], groups: 3 },
];

/** A reproducible ramp of pseudo-random values in [-1, 1). */
function randoms(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}

/** The definition, in float64: returns the output and its shape. */
export function referenceConv(
  c: ConvCase,
  x: Float32Array,
  w: Float32Array,
  b: Float32Array | null,
): { out: Float64Array; shape: number[] } {
  const [N, C, H, W] = c.x, [M, Cg, KH, KW] = c.w;
  const [sh, sw] = c.strides ?? [1, 1], [pt, pl, pb, pr] = c.padding ?? [0, 0, 0, 0];
  const [dh, dw] = c.dilation ?? [1, 1], [ih, iw] = c.inputDilation ?? [1, 1];
  const G = c.groups ?? 1, Mg = M / G;
  const OH = Math.floor(((H - 1) * ih + 1 + pt + pb - (KH - 1) * dh - 1) / sh) + 1;
  const OW = Math.floor(((W - 1) * iw + 1 + pl + pr - (KW - 1) * dw - 1) / sw) + 1;
  const out = new Float64Array(N * M * OH * OW);
  for (let n = 0; n < N; n++) {
    for (let m = 0; m < M; m++) {
      const g = Math.floor(m / Mg);
      for (let oy = 0; oy < OH; oy++) {
        for (let ox = 0; ox < OW; ox++) {
          let sum = b === null ? 0 : b[m];
          for (let cc = 0; cc < Cg; cc++) {
            for (let ky = 0; ky < KH; ky++) {
              for (let kx = 0; kx < KW; kx++) {
                const py = oy * sh - pt + ky * dh, px = ox * sw - pl + kx * dw;
                if (py < 0 || px < 0 || py % ih !== 0 || px % iw !== 0) continue;
                const iy = py / ih, ix = px / iw;
                if (iy >= H || ix >= W) continue;
                sum += w[((m * Cg + cc) * KH + ky) * KW + kx] *
                  x[((n * C + g * Cg + cc) * H + iy) * W + ix];
              }
            }
          }
          out[((n * M + m) * OH + oy) * OW + ox] = c.epilogue === undefined
            ? sum
            : c.epilogue[1](sum);
        }
      }
    }
  }
  return { out, shape: [N, M, OH, OW] };
}

/** Runs every case through `vm.op.conv2d` on `device` (default: the CPU). */
export async function checkConv2d(device?: Device): Promise<void> {
  const conv2d = getGlobalFunc("vm.op.conv2d")!;
  for (const [i, c] of CONV_CASES.entries()) {
    const xs = randoms(c.x.reduce((a, b) => a * b), 7 + i);
    const wn = c.w.reduce((a, b) => a * b);
    const ws = c.weights === undefined
      ? randoms(wn, 101 + i)
      : Float32Array.from({ length: wn }, (_, k) => c.weights!(k));
    const bs = c.bias ? randoms(c.w[0], 211 + i) : null;
    const want = referenceConv(c, xs, ws, bs);
    using x = tensor(xs, { shape: c.x, device });
    using w = tensor(ws, { shape: c.w, device });
    using b = bs === null ? null : tensor(bs, { device });
    using y = conv2d(
      x,
      w,
      c.strides ?? null,
      c.padding ?? null,
      c.dilation ?? null,
      c.groups ?? null,
      c.inputDilation ?? null,
      b,
      c.epilogue?.[0] ?? null,
    ) as NDArray;
    assertEquals(y.shape, want.shape, c.name);
    const got = await y.data() as Float32Array;
    for (let k = 0; k < got.length; k++) {
      assert(
        Math.abs(got[k] - want.out[k]) <= 1e-5 * (1 + Math.abs(want.out[k])),
        `${c.name}: element ${k} is ${got[k]}, expected ${want.out[k]}`,
      );
    }
  }
}
