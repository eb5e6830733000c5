/**
 * PP-OCRv4's detector and recognizer on the CPU at three thread settings,
 * interleaved in one process, medians: one thread, two with the pool's
 * default spins (`poolSpin`: a worker spins 1 ms after a job, the calling
 * thread 0.1 ms for the last blocks), and two with short spins (0.1 ms and
 * 0.02 ms). Where another session keeps the second core busy, a spinning
 * worker takes time from the calling thread (docs/onnx.md's PP-OCRv4
 * speed); this measures what each setting costs on the machine it runs on.
 * Each setting's first two calls after the pool changes are untimed (a new
 * pool's first calls are slower: measured right after one, two threads
 * looked worse than they are).
 *
 * ```sh
 * deno run -A bench/ppocr_threads_bench.ts            # 7 rounds
 * deno run -A bench/ppocr_threads_bench.ts --quick    # 3 rounds
 * ```
 *
 * @module
 */

import { cpu } from "../mod.ts";
import { cpuThreadsReady } from "../kernels/cpu/wasm/runtime.ts";
import { poolSpin } from "../kernels/cpu/wasm/thread_pool.ts";
import { PPOCR } from "../models/ppocr/ocr.ts";
import { crop, readPPM, resizeBilinear } from "../models/ppocr/image.ts";
import { detectBoxes, detInput, lineBatch } from "../models/ppocr/pre_post.ts";
import { median } from "./_stats.ts";

const ROUNDS = Deno.args.includes("--quick") ? 3 : 7;
const WEIGHTS = new URL("../.weights/ppocr-v4/", import.meta.url);

const image = readPPM(
  await Deno.readFile(new URL("../testdata/ppocr/two_lines.pgm", import.meta.url)),
);
const big = resizeBilinear(image, image.width * 2, image.height * 2);
const det = detInput(big);
const ocr = await PPOCR.load(WEIGHTS);
await cpuThreadsReady();
const found = await ocr.det.run(det.data, det.shape);
const boxes = detectBoxes(found.data, found.shape[2], found.shape[3], det, big.width, big.height);
const crops = boxes.map((b) => crop(big, b.x0, b.y0, b.x1, b.y1));
const rec = { data: lineBatch(crops, 320), shape: [crops.length, 3, 48, 320] };

const settings = [
  { name: "1 thread", threads: 1, workerUs: poolSpin.workerUs, callerUs: poolSpin.callerUs },
  { name: "2 threads, default spins", threads: 2, ...poolSpin },
  { name: "2 threads, spins 0.1 / 0.02 ms", threads: 2, workerUs: 100, callerUs: 20 },
];
const models = [["det", ocr.det, det], ["rec", ocr.rec, rec]] as const;
const times = new Map<string, number[]>();
let pool = 0;
for (let round = 0; round < ROUNDS; round++) {
  for (const s of settings) {
    cpu(0, { threads: s.threads });
    poolSpin.workerUs = s.workerUs;
    poolSpin.callerUs = s.callerUs;
    await cpuThreadsReady();
    if (s.threads !== pool) {
      for (let i = 0; i < 2; i++) await ocr.det.run(det.data, det.shape);
      pool = s.threads;
    }
    for (const [name, model, input] of models) {
      const t0 = performance.now();
      await model.run(input.data, input.shape);
      const key = `${s.name}|${name}`;
      times.set(key, [...(times.get(key) ?? []), performance.now() - t0]);
    }
  }
}
console.log(`\nPP-OCRv4 on the CPU, ${ROUNDS} rounds, median ms per call:\n`);
console.log("| setting | det ms | rec ms |");
console.log("| --- | ---: | ---: |");
for (const s of settings) {
  const ms = (m: string) => median(times.get(`${s.name}|${m}`)!).toFixed(1);
  console.log(`| ${s.name} | ${ms("det")} | ${ms("rec")} |`);
}
Deno.exit(0); // the pool's idle timer would keep the process a moment longer
