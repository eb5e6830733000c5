/**
 * PP-OCRv4's depthwise convolutions (its detector's at 640×192, its
 * recognizer's on two 48×320 lines) through `wasmDepthwise` alone, on one
 * thread and on the pool, interleaved in one process, medians; and the
 * smallest convolutions worth a hand-off (`depthwiseThreading.poolMinMacs`).
 * `gap` runs about 0.3 ms of other work before each call, as a model's
 * other ops do, so that the pool's workers have gone to sleep.
 *
 * ```sh
 * deno run -A bench/depthwise_bench.ts            # 9 rounds
 * deno run -A bench/depthwise_bench.ts --quick    # 3 rounds
 * ```
 *
 * @module
 */

import { cpu } from "../mod.ts";
import { cpuKernelInfo, cpuThreadsReady } from "../kernels/cpu/wasm/runtime.ts";
import {
  type DepthwiseCall,
  depthwiseThreading,
  wasmDepthwise,
} from "../kernels/cpu/wasm/depthwise.ts";
import { randomValues } from "./_random.ts";
import { median } from "./_stats.ts";

const ROUNDS = Deno.args.includes("--quick") ? 3 : 9;

/** `[N, C, H, W]`, the window, the strides: output sizes and padding follow ("same"). */
const shapes: [number, number, number, number, number, number, number][] = [
  // The recognizer's (two lines).
  [2, 240, 12, 80, 5, 1, 1],
  [2, 240, 12, 80, 5, 2, 1],
  [2, 480, 6, 80, 5, 1, 1],
  [2, 480, 3, 80, 5, 1, 1],
  [2, 128, 12, 160, 3, 1, 2],
  [2, 64, 24, 160, 3, 1, 1],
  [2, 32, 24, 160, 3, 1, 1],
  [2, 16, 24, 160, 3, 1, 1],
  // The detector's.
  [1, 16, 96, 320, 3, 1, 1],
  [1, 32, 96, 320, 3, 2, 2],
  [1, 48, 48, 160, 3, 1, 1],
  [1, 96, 24, 80, 3, 1, 1],
  [1, 192, 12, 40, 5, 1, 1],
  [1, 384, 6, 20, 5, 1, 1],
  // Small ones, around the hand-off threshold.
  [1, 32, 12, 40, 3, 1, 1],
  [1, 16, 12, 24, 3, 1, 1],
];
const settings = [
  { name: "1 thread", poolMinMacs: Infinity, blocksPerThread: 4 },
  { name: "pool", poolMinMacs: 0, blocksPerThread: 4 },
  { name: "pool ×16", poolMinMacs: 0, blocksPerThread: 16 },
];

function busy(ms: number): number {
  const until = performance.now() + ms;
  let x = 0;
  while (performance.now() < until) x += Math.sqrt(x + 1);
  return x;
}

cpu(0, { threads: 2 });
const got = await cpuThreadsReady();
console.log(`${cpuKernelInfo().simd}, ${got} threads, ${ROUNDS} rounds, medians`);
for (const gap of [0, 0.3]) {
  console.log(`\ngap ${gap} ms before each call\n`);
  console.log(
    `| x | K | stride | M MACs | ${
      settings.map((s) => `${s.name} µs`).join(" | ")
    } | 1 thread / pool |`,
  );
  console.log(`| --- | ---: | ---: | ---: | ${settings.map(() => "---: | ").join("")}---: |`);
  for (const [N, C, H, W, K, sh, sw] of shapes) {
    const OH = Math.floor((H - 1) / sh) + 1, OW = Math.floor((W - 1) / sw) + 1;
    const call: DepthwiseCall = {
      N,
      C,
      H,
      W,
      M: C,
      K,
      OH,
      OW,
      sh,
      sw,
      ph: (K - 1) / 2,
      pw: (K - 1) / 2,
    };
    const x = randomValues(N * C * H * W, 1), w = randomValues(C * K * K, 2);
    const b = randomValues(C, 3), o = new Float32Array(N * C * OH * OW);
    const reps = Math.max(1, Math.round(2e7 / (N * C * OH * OW * K * K)));
    const times: number[][] = settings.map(() => []);
    for (let r = 0; r < ROUNDS + 1; r++) {
      for (let j = 0; j < settings.length; j++) {
        const i = (r + j) % settings.length;
        depthwiseThreading.poolMinMacs = settings[i].poolMinMacs;
        depthwiseThreading.blocksPerThread = settings[i].blocksPerThread;
        let t = 0;
        for (let q = 0; q < reps; q++) {
          if (gap > 0) busy(gap);
          const t0 = performance.now();
          if (!wasmDepthwise(x, w, b, o, call, undefined)) throw new Error("not taken");
          t += performance.now() - t0;
        }
        if (r > 0) times[i].push(t / reps * 1000);
      }
    }
    const us = times.map(median);
    console.log(
      `| ${[N, C, H, W].join("×")} | ${K} | ${sh}×${sw} | ${
        (N * C * OH * OW * K * K / 1e6).toFixed(2)
      } | ${us.map((t) => t.toFixed(0)).join(" | ")} | ${(us[0] / us[1]).toFixed(2)} |`,
    );
  }
}
Deno.exit(0);
