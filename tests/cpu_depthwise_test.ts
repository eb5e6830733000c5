/**
 * The WebAssembly depthwise convolution (kernels/cpu/wasm/depthwise.ts), 1×1,
 * 3×3 and 5×5: against the definition at shapes that are not multiples of its vectors
 * (widths and heights of 1, odd strides and paddings, channel multipliers,
 * two images, bias or none, epilogues), and, split over the worker pool,
 * bit for bit the values one thread computes.
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";
import type { Conv2dEpilogueStep } from "../kernels/kernel_backend.ts";
import { cpu, cpuThreadSetting } from "../devices/cpu_device.ts";
import {
  cpuKernelMode,
  cpuPoolWorkerBlocks,
  cpuThreadsReady,
  setCpuKernelMode,
} from "../kernels/cpu/wasm/runtime.ts";
import {
  type DepthwiseCall,
  depthwiseThreading,
  wasmDepthwise,
} from "../kernels/cpu/wasm/depthwise.ts";
import { applyConvEpilogue } from "../kernels/cpu/conv_epilogue.ts";
import { randomValues } from "../bench/_random.ts";

interface Case {
  /** `[N, C, H, W]`, output channels, window, strides, padding above and to the left. */
  x: [number, number, number, number];
  M: number;
  K: number;
  s: [number, number];
  p: [number, number];
  /** Padding below and to the right (the output size follows). */
  end: [number, number];
  bias: boolean;
  steps?: Conv2dEpilogueStep[];
}

const cases: Case[] = [
  { x: [1, 3, 7, 9], M: 3, K: 3, s: [1, 1], p: [1, 1], end: [1, 1], bias: true },
  { x: [2, 5, 6, 13], M: 10, K: 3, s: [1, 2], p: [0, 1], end: [2, 0], bias: false },
  { x: [1, 4, 11, 10], M: 4, K: 5, s: [2, 2], p: [2, 1], end: [1, 2], bias: true },
  { x: [2, 3, 9, 17], M: 3, K: 5, s: [3, 1], p: [2, 2], end: [2, 2], bias: true },
  // 1×1: a per-channel scale and shift (inference batch normalization), strided and padded too.
  { x: [2, 5, 7, 9], M: 5, K: 1, s: [1, 1], p: [0, 0], end: [0, 0], bias: true },
  {
    x: [1, 3, 6, 11],
    M: 6,
    K: 1,
    s: [2, 2],
    p: [1, 0],
    end: [0, 1],
    bias: false,
    steps: [{ op: "relu", a: 0, b: 0 }],
  },
  // Width 1, height 1, one channel; an image narrower than the window.
  { x: [1, 2, 5, 1], M: 2, K: 3, s: [1, 1], p: [1, 1], end: [1, 1], bias: true },
  { x: [1, 1, 1, 6], M: 1, K: 5, s: [1, 1], p: [2, 2], end: [2, 2], bias: false },
  { x: [2, 1, 4, 3], M: 2, K: 5, s: [1, 2], p: [2, 2], end: [2, 1], bias: true },
  { x: [1, 2, 5, 1], M: 2, K: 3, s: [2, 2], p: [1, 1], end: [1, 1], bias: true },
  // Horizontal stride 2 with each parity of left padding: the row's halves start differently.
  { x: [1, 3, 6, 19], M: 3, K: 5, s: [1, 2], p: [1, 1], end: [2, 3], bias: false },
  { x: [1, 3, 5, 22], M: 6, K: 3, s: [2, 2], p: [0, 0], end: [1, 1], bias: true },
  // An odd number of output rows at stride 1 (the last row without its pair).
  { x: [1, 6, 7, 21], M: 6, K: 5, s: [1, 1], p: [2, 2], end: [2, 2], bias: true },
  {
    x: [2, 7, 8, 15],
    M: 7,
    K: 3,
    s: [2, 1],
    p: [1, 1],
    end: [0, 1],
    bias: true,
    steps: [{ op: "hardswish", a: 3, b: 6 }],
  },
  {
    x: [1, 9, 10, 23],
    M: 18,
    K: 5,
    s: [1, 1],
    p: [2, 2],
    end: [2, 2],
    bias: false,
    steps: [{ op: "affine", a: 0.5, b: -0.25 }, { op: "clip", a: -0.3, b: 0.4 }, {
      op: "relu",
      a: 0,
      b: 0,
    }],
  },
  {
    x: [2, 13, 6, 6],
    M: 13,
    K: 3,
    s: [1, 2],
    p: [1, 0],
    end: [1, 1],
    bias: true,
    steps: [{ op: "hardsigmoid", a: 0.2, b: 0.5 }],
  },
];

function geometry(c: Case): DepthwiseCall {
  const [N, C, H, W] = c.x;
  const OH = Math.floor((H + c.p[0] + c.end[0] - c.K) / c.s[0]) + 1;
  const OW = Math.floor((W + c.p[1] + c.end[1] - c.K) / c.s[1]) + 1;
  return { N, C, H, W, M: c.M, K: c.K, OH, OW, sh: c.s[0], sw: c.s[1], ph: c.p[0], pw: c.p[1] };
}

/** The definition, summed in float64, then the epilogue. */
function reference(
  x: Float32Array,
  w: Float32Array,
  b: Float32Array | null,
  g: DepthwiseCall,
  steps: readonly Conv2dEpilogueStep[],
): Float32Array {
  const { N, C, H, W, M, K, OH, OW, sh, sw, ph, pw } = g;
  const out = new Float32Array(N * M * OH * OW);
  for (let n = 0; n < N; n++) {
    for (let m = 0; m < M; m++) {
      const xc = (n * C + Math.floor(m / (M / C))) * H * W;
      for (let oy = 0; oy < OH; oy++) {
        for (let ox = 0; ox < OW; ox++) {
          let sum = b === null ? 0 : b[m];
          for (let ky = 0; ky < K; ky++) {
            for (let kx = 0; kx < K; kx++) {
              const iy = oy * sh - ph + ky, ix = ox * sw - pw + kx;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              sum += w[(m * K + ky) * K + kx] * x[xc + iy * W + ix];
            }
          }
          out[((n * M + m) * OH + oy) * OW + ox] = sum;
        }
      }
    }
  }
  applyConvEpilogue(out, 0, out.length, steps);
  return out;
}

/** Runs `body` with the kernels in `"wasm"` mode (every size taken) on `threads` threads. */
async function withKernels(threads: number, body: () => void): Promise<void> {
  const mode = cpuKernelMode(), before = cpuThreadSetting();
  const setting = { ...depthwiseThreading };
  try {
    setCpuKernelMode("wasm");
    cpu(0, { threads });
    assertEquals(await cpuThreadsReady(), threads);
    body();
  } finally {
    Object.assign(depthwiseThreading, setting);
    cpu(0, { threads: before });
    setCpuKernelMode(mode);
  }
}

Deno.test("the WebAssembly depthwise convolution matches the definition at uneven shapes", async () => {
  await withKernels(1, () => {
    for (const [i, c] of cases.entries()) {
      const g = geometry(c);
      const x = randomValues(g.N * g.C * g.H * g.W, 10 + i),
        w = randomValues(g.M * g.K * g.K, 50 + i);
      const b = c.bias ? randomValues(g.M, 90 + i) : null;
      const o = new Float32Array(g.N * g.M * g.OH * g.OW).fill(NaN);
      assert(wasmDepthwise(x, w, b, o, g, c.steps), `case ${i} not taken`);
      const want = reference(x, w, b, g, c.steps ?? []);
      for (let j = 0; j < o.length; j++) {
        const tol = 1e-5 * (1 + Math.abs(want[j]));
        assert(
          Math.abs(o[j] - want[j]) <= tol,
          `case ${i} (${JSON.stringify(c.x)}), [${j}]: ${o[j]} against ${want[j]}`,
        );
      }
    }
  });
});

/** The cases, and planes large enough that both threads run blocks at the same time. */
const poolCases: Case[] = [
  ...cases,
  { x: [2, 48, 30, 45], M: 48, K: 5, s: [1, 1], p: [2, 2], end: [2, 2], bias: true },
  {
    x: [1, 40, 33, 50],
    M: 40,
    K: 3,
    s: [2, 2],
    p: [1, 1],
    end: [1, 1],
    bias: true,
    steps: [{ op: "hardswish", a: 3, b: 6 }],
  },
];

Deno.test("a depthwise convolution split over the pool gives one thread's bits", async () => {
  const cases = poolCases, single: Float32Array[] = [];
  const run = () =>
    cases.map((c, i) => {
      const g = geometry(c);
      const x = randomValues(g.N * g.C * g.H * g.W, 10 + i),
        w = randomValues(g.M * g.K * g.K, 50 + i);
      const b = c.bias ? randomValues(g.M, 90 + i) : null;
      const o = new Float32Array(g.N * g.M * g.OH * g.OW);
      assert(wasmDepthwise(x, w, b, o, g, c.steps), `case ${i} not taken`);
      return o;
    });
  await withKernels(1, () => single.push(...run()));
  await withKernels(2, () => {
    // One plane a block: the most blocks there can be, so that the worker takes some.
    depthwiseThreading.blocksPerThread = 1e6;
    const from = cpuPoolWorkerBlocks();
    let pooled: Float32Array[] = [];
    for (let r = 0; r < 20; r++) pooled = run();
    assert(cpuPoolWorkerBlocks() > from, "the pool's worker took no block");
    for (const [i, o] of pooled.entries()) {
      assertEquals(
        new Uint32Array(o.buffer),
        new Uint32Array(single[i].buffer),
        `case ${i} (${JSON.stringify(cases[i].x)})`,
      );
    }
  });
});
