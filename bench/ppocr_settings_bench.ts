/**
 * PP-OCRv4's detector or recognizer on the CPU under settings of
 * `gemmBlocking` (kernels/cpu/wasm/gemm.ts) compared in one process, the
 * settings interleaved run by run so that a change of load hits all alike;
 * medians and minima of the runs. `--peer` runs onnxruntime-web's detector
 * between runs, as bench/ppocr_bench.ts interleaves it. Used for
 * docs/onnx.md's PP-OCRv4 speed (`padOnPool`).
 *
 * ```sh
 * deno run -A bench/ppocr_settings_bench.ts [det|rec] [runs = 30] [--peer] \
 *   [--settings '[{"padOnPool": false}, {}]']
 * ```
 *
 * @module
 */

import { cpu } from "../mod.ts";
import { cpuThreadsReady } from "../kernels/cpu/wasm/runtime.ts";
import { gemmBlocking } from "../kernels/cpu/wasm/gemm.ts";
import { PPOCR } from "../models/ppocr/ocr.ts";
import { crop, readPPM, resizeBilinear } from "../models/ppocr/image.ts";
import { detectBoxes, detInput, lineBatch } from "../models/ppocr/pre_post.ts";
import { peer } from "./_peer.ts";
import { median } from "./_stats.ts";

const args = Deno.args.filter((a, i) => !a.startsWith("--") && Deno.args[i - 1] !== "--settings");
const model = (args[0] ?? "det") as "det" | "rec";
const RUNS = Number(args[1] ?? 30);
const settingsAt = Deno.args.indexOf("--settings");
const SETTINGS: Partial<typeof gemmBlocking>[] = settingsAt < 0
  ? [{ padOnPool: false }, {}]
  : JSON.parse(Deno.args[settingsAt + 1]);
const WEIGHTS = new URL("../.weights/ppocr-v4/", import.meta.url);

const image = readPPM(
  await Deno.readFile(new URL("../testdata/ppocr/two_lines.pgm", import.meta.url)),
);
const big = resizeBilinear(image, image.width * 2, image.height * 2);
const det = detInput(big);
const ocr = await PPOCR.load(WEIGHTS, cpu());
await cpuThreadsReady();
// The recognizer's input: the two lines the detector finds, as the example crops them.
const found = await ocr.det.run(det.data, det.shape);
const boxes = detectBoxes(found.data, found.shape[2], found.shape[3], det, big.width, big.height);
const crops = boxes.map((b) => crop(big, b.x0, b.y0, b.x1, b.y1));
const rec = { data: lineBatch(crops, 320), shape: [crops.length, 3, 48, 320] };

let between = async () => {};
if (Deno.args.includes("--peer")) {
  const ort = await peer("npm:onnxruntime-web@1.30.0/webgpu");
  ort.env.wasm.numThreads = 1;
  const worker = globalThis.Worker;
  const session = await ort.InferenceSession.create(
    await Deno.readFile(new URL("det.onnx", WEIGHTS)),
    { executionProviders: ["wasm"] },
  );
  globalThis.Worker = worker; // as bench/ppocr_bench.ts: Deno's Worker put back
  between = async () => {
    await session.run({ x: new ort.Tensor("float32", det.data, det.shape) });
  };
}

const defaults = { ...gemmBlocking };
const times = SETTINGS.map(() => [] as number[]);
for (let run = 0; run <= RUNS; run++) { // run 0 warms up
  for (const [i, setting] of SETTINGS.entries()) {
    Object.assign(gemmBlocking, defaults, setting);
    await between();
    const t0 = performance.now();
    if (model === "det") await ocr.det.run(det.data, det.shape);
    else await ocr.rec.run(rec.data, rec.shape);
    if (run > 0) times[i].push(performance.now() - t0);
  }
}
Object.assign(gemmBlocking, defaults);
console.log(`PP-OCRv4 ${model} on the CPU, ${RUNS} runs a setting, interleaved (ms):\n`);
for (const [i, setting] of SETTINGS.entries()) {
  const t = times[i];
  console.log(
    `${JSON.stringify(setting).padEnd(40)} median ${median(t).toFixed(2)}  min ${
      Math.min(...t).toFixed(2)
    }`,
  );
}
Deno.exit(0); // onnxruntime-web's threads keep the process alive
