/**
 * PP-OCRv4's slowest convolution layers (bench/ppocr_profile.ts finds
 * them), each `vm.op.conv2d` alone on the CPU: median ms of `ROUNDS`
 * calls and the multiply-adds a second that makes, with the layers
 * interleaved round by round so a change of load hits all alike.
 *
 * ```sh
 * deno run -A bench/conv_layers_bench.ts [rounds = 15] [--settings '[{"kc": 128}, {}]']
 * ```
 *
 * @module
 */

import { getGlobalFunc, type NDArray, tensor } from "../mod.ts";
import { cpuThreadsReady } from "../kernels/cpu/wasm/runtime.ts";
import { median } from "./_stats.ts";
import { gemmBlocking } from "../kernels/cpu/wasm/gemm.ts";

const ROUNDS = Number(Deno.args[0] ?? 15);
/** Settings of `gemmBlocking` compared, each layer under each in turn (`--settings '[{"kc": 128}, {}]'`). */
const settingsArg = Deno.args.indexOf("--settings");
const SETTINGS: Partial<typeof gemmBlocking>[] = settingsArg < 0
  ? [{}]
  : JSON.parse(Deno.args[settingsArg + 1]);

interface Layer {
  name: string;
  x: number[];
  w: number[];
  strides?: number[];
  padding?: number[];
  groups?: number;
  inputDilation?: number[];
  bias?: boolean;
  epilogue?: string;
  /** Weights all 1 (a `Resize` by an integer `nearest` scale, as the importer writes it). */
  ones?: boolean;
}
const HS = "affine(0.9, 0.1) hardswish(3, 6) affine(1.1, 0)";
const LAYERS: Layer[] = [
  { name: "det 96→24 3×3 @48×160", x: [1, 96, 48, 160], w: [24, 96, 3, 3], padding: [1, 1, 1, 1] },
  { name: "det 96→24 3×3 @24×80", x: [1, 96, 24, 80], w: [24, 96, 3, 3], padding: [1, 1, 1, 1] },
  { name: "det 96→24 3×3 @6×20", x: [1, 96, 6, 20], w: [24, 96, 3, 3], padding: [1, 1, 1, 1] },
  {
    name: "det 192→192 1×1 @12×40",
    x: [1, 192, 12, 40],
    w: [192, 192, 1, 1],
    bias: true,
    epilogue: HS,
  },
  { name: "det 384→360 1×1 @6×20", x: [1, 384, 6, 20], w: [360, 384, 1, 1], bias: true },
  {
    name: "det 384→384 1×1 @6×20",
    x: [1, 384, 6, 20],
    w: [384, 384, 1, 1],
    bias: true,
    epilogue: HS,
  },
  {
    name: "det 16→32 1×1 @96×320",
    x: [1, 16, 96, 320],
    w: [32, 16, 1, 1],
    bias: true,
    epilogue: HS,
  },
  {
    name: "det 48→48 1×1 @48×160",
    x: [1, 48, 48, 160],
    w: [48, 48, 1, 1],
    bias: true,
    epilogue: HS,
  },
  {
    name: "det 96→96 1×1 @24×80",
    x: [1, 96, 24, 80],
    w: [96, 96, 1, 1],
    bias: true,
    epilogue: HS,
  },
  {
    name: "det 3→16 3×3 s2 @192×640",
    x: [1, 3, 192, 640],
    w: [16, 3, 3, 3],
    strides: [2, 2],
    padding: [1, 1, 1, 1],
  },
  {
    name: "det 24→24 up 2×2 @48×160",
    x: [1, 24, 48, 160],
    w: [24, 24, 2, 2],
    padding: [1, 1, 1, 1],
    inputDilation: [2, 2],
  },
  {
    name: "det nearest ×2 96 @24×80",
    x: [1, 96, 24, 80],
    w: [96, 1, 2, 2],
    groups: 96,
    padding: [1, 1, 1, 1],
    inputDilation: [2, 2],
    ones: true,
  },
  {
    name: "det nearest ×8 24 @6×20",
    x: [1, 24, 6, 20],
    w: [24, 1, 8, 8],
    groups: 24,
    padding: [7, 7, 7, 7],
    inputDilation: [8, 8],
    ones: true,
  },
  {
    name: "det 24→1 up 2×2 @96×320",
    x: [1, 24, 96, 320],
    w: [1, 24, 2, 2],
    padding: [1, 1, 1, 1],
    inputDilation: [2, 2],
  },
];

const conv2d = getGlobalFunc("vm.op.conv2d")!;
let seed = 1;
const randoms = (n: number) =>
  Float32Array.from({ length: n }, () => ((seed = (seed * 16807) % 2147483647) / 2147483647) - 0.5);
const prepared = LAYERS.map((l) => {
  const x = tensor(randoms(l.x.reduce((a, b) => a * b)), { shape: l.x });
  const wn = l.w.reduce((a, b) => a * b);
  const w = tensor(l.ones ? new Float32Array(wn).fill(1) : randoms(wn), { shape: l.w });
  const b = l.bias ? tensor(randoms(l.w[0])) : null;
  const call = () =>
    conv2d(
      x,
      w,
      l.strides ?? null,
      l.padding ?? null,
      null,
      l.groups ?? null,
      l.inputDilation ?? null,
      b,
      l.epilogue ?? null,
    ) as NDArray;
  return { l, call };
});
await cpuThreadsReady();
const defaults = { ...gemmBlocking };
const times = SETTINGS.map(() => prepared.map(() => [] as number[]));
const macs: number[] = [];
for (let round = 0; round <= ROUNDS; round++) {
  for (const [i, { call }] of prepared.entries()) {
    for (const [s, setting] of SETTINGS.entries()) {
      Object.assign(gemmBlocking, defaults, setting);
      const t0 = performance.now();
      const y = call();
      const ms = performance.now() - t0;
      if (round === 0) {
        const [, M, OH, OW] = y.shape, [, Cg, KH, KW] = prepared[i].l.w;
        const [ih, iw] = prepared[i].l.inputDilation ?? [1, 1];
        macs[i] = M * OH * OW * Cg * KH * KW / (ih * iw);
      } else times[s][i].push(ms);
      y.dispose();
    }
  }
}
console.log(`${ROUNDS} rounds, median/min ms per call (GMAC/s at the min)\n`);
console.log(`${"".padEnd(28)} ${SETTINGS.map((s) => JSON.stringify(s).padStart(22)).join(" ")}`);
for (const [i, { l }] of prepared.entries()) {
  const cells = SETTINGS.map((_, s) => {
    const ms = median(times[s][i]), best = Math.min(...times[s][i]);
    return `${ms.toFixed(2)}/${best.toFixed(2)} (${(macs[i] / best / 1e6).toFixed(1)})`.padStart(
      22,
    );
  });
  console.log(`${l.name.padEnd(28)} ${cells.join(" ")}`);
}
Deno.exit(0);
