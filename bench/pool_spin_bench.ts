/**
 * The CPU kernels' worker pool's spin (`poolSpin`: how long a worker checks
 * for the next job before it sleeps, how long the calling thread checks for
 * the workers' last blocks) on whole models: PP-OCRv4's detector and
 * recognizer (bench/ppocr_bench.ts's inputs) and MiniLM as ONNX at batch 1
 * (16 sentences, bench/onnx_models_bench.ts's), each setting in turn in one
 * process, round by round; median/min ms of a run. The figures and the
 * choice are in kernels/cpu/wasm/thread_pool.ts and docs/onnx.md.
 *
 * ```sh
 * deno run -A bench/pool_spin_bench.ts [worker/caller µs,... = 1000/100,50/100]
 * ```
 *
 * @module
 */

import { cpu, importONNX, tensor, VirtualMachine } from "../mod.ts";
import { cpuThreadsReady } from "../kernels/cpu/wasm/runtime.ts";
import { poolSpin } from "../kernels/cpu/wasm/thread_pool.ts";
import { PPOCR } from "../models/ppocr/ocr.ts";
import { crop, readPPM, resizeBilinear } from "../models/ppocr/image.ts";
import { detectBoxes, detInput, lineBatch } from "../models/ppocr/pre_post.ts";
import { median } from "./_stats.ts";
const image = readPPM(
  await Deno.readFile(new URL("../testdata/ppocr/two_lines.pgm", import.meta.url)),
);
const big = resizeBilinear(image, image.width * 2, image.height * 2);
const det = detInput(big);
const ocr = await PPOCR.load(new URL("../.weights/ppocr-v4/", import.meta.url), cpu());
const out = await ocr.det.run(det.data, det.shape);
const boxes = detectBoxes(out.data, out.shape[2], out.shape[3], det, big.width, big.height);
const rec = {
  data: lineBatch(boxes.map((b) => crop(big, b.x0, b.y0, b.x1, b.y1)), 320),
  shape: [boxes.length, 3, 48, 320],
};
const MINILM = new URL("../.weights/all-MiniLM-L6-v2/model.onnx", import.meta.url);
const reference = JSON.parse(
  await Deno.readTextFile(new URL("../testdata/minilm/reference.json", import.meta.url)),
);
const ids: number[][] = (reference.ids as number[][]).filter((t) => t.length >= 6).slice(0, 16);
const model = await importONNX(MINILM, {
  inputShapes: { input_ids: [1, 32], attention_mask: [1, 32] },
});
const vm = new VirtualMachine(model.executable, cpu());
const minilm = async () => {
  for (const t of ids) {
    const row = [...t, ...new Array(32 - t.length).fill(0)];
    using x = tensor(BigInt64Array.from(row.map(BigInt)), { shape: [1, 32] });
    using m = tensor(BigInt64Array.from(row.map((_, i) => BigInt(i < t.length ? 1 : 0))), {
      shape: [1, 32],
    });
    using y = await vm.invokeTensor("main", x, m, model.params);
    await y.data();
  }
};
const works: [string, () => Promise<unknown>][] = [
  ["det", () => ocr.det.run(det.data, det.shape)],
  ["rec", () => ocr.rec.run(rec.data, rec.shape)],
  ["minilm b1 ×16", minilm],
];
const V = (Deno.args[0] ?? "1000/100,50/100").split(",").map((s) => s.split("/").map(Number));
const t = works.map(() => V.map(() => [] as number[]));
await cpuThreadsReady();
for (let r = 0; r <= 9; r++) {
  for (const [w, [, run]] of works.entries()) {
    for (const [i, [workerUs, callerUs]] of V.entries()) {
      Object.assign(poolSpin, { workerUs, callerUs });
      await run();
      const t0 = performance.now();
      await run();
      if (r > 0) t[w][i].push(performance.now() - t0);
    }
  }
}
for (const [w, [name]] of works.entries()) {
  console.log(
    name.padEnd(14),
    V.map((v, i) =>
      `${v.join("/")} ${median(t[w][i]).toFixed(1)}/${Math.min(...t[w][i]).toFixed(1)}`
    ).join("   "),
  );
}
Deno.exit(0);
