/**
 * Where PP-OCRv4's detector and recognizer spend their CPU time: each CPU
 * kernel call timed by its op and shapes (summed over the calls of one
 * model run, median of the runs), and `vm.profile`'s by-function table for
 * what runs outside the kernels (host operators, copies). Used to choose
 * which convolution paths to speed up (docs/onnx.md's PP-OCRv4 speed).
 *
 * ```sh
 * deno run -A bench/ppocr_profile.ts [det|rec] [runs = 5]
 * ```
 *
 * @module
 */

import { cpu } from "../mod.ts";
import { cpuThreadsReady } from "../kernels/cpu/wasm/runtime.ts";
import { cpuBackend } from "../kernels/cpu/backend.ts";
import { type KernelName, type OpBackend, registerKernel } from "../kernels/kernel_backend.ts";
import type { NDArray } from "../devices/ndarray.ts";
import { PPOCR } from "../models/ppocr/ocr.ts";
import { crop, readPPM, resizeBilinear } from "../models/ppocr/image.ts";
import { detectBoxes, detInput, lineBatch } from "../models/ppocr/pre_post.ts";
import { median } from "./_stats.ts";

const model = (Deno.args[0] ?? "det") as "det" | "rec";
const RUNS = Number(Deno.args[1] ?? 5);

/** Milliseconds per (op, shapes) key in the current run. */
let current = new Map<string, { ms: number; calls: number }>();
const shapeOf = (v: unknown) =>
  v !== null && typeof v === "object" && "shape" in v ? `[${(v as NDArray).shape.join(",")}]` : "";
for (const [op, kernel] of Object.entries(cpuBackend)) {
  // deno-lint-ignore no-explicit-any -- every kernel's arguments, passed through
  const k = kernel as (...args: any[]) => unknown;
  // deno-lint-ignore no-explicit-any -- as above
  const timed = (...args: any[]) => {
    const t0 = performance.now();
    const r = k(...args);
    const ms = performance.now() - t0;
    let key = `${op} ${args.map(shapeOf).filter((s) => s !== "").join(" ")}`;
    if (op === "conv2d") {
      const g = args[3];
      key += ` s${g.strides} p${g.padBegin} g${g.groups} id${g.inputDilations} e${
        (g.epilogue ?? []).map((s: { op: string }) => s.op).join("+")
      }`;
    }
    const e = current.get(key) ?? { ms: 0, calls: 0 };
    e.ms += ms;
    e.calls++;
    current.set(key, e);
    return r;
  };
  registerKernel("cpu", op as KernelName, timed as OpBackend[KernelName]);
}

const WEIGHTS = new URL("../.weights/ppocr-v4/", import.meta.url);
const image = readPPM(
  await Deno.readFile(new URL("../testdata/ppocr/two_lines.pgm", import.meta.url)),
);
const big = resizeBilinear(image, image.width * 2, image.height * 2);
const det = detInput(big);
const ocr = await PPOCR.load(WEIGHTS, cpu());
let input: { data: Float32Array; shape: number[] } = { data: det.data, shape: det.shape };
if (model === "rec") {
  const out = await ocr.det.run(det.data, det.shape);
  const boxes = detectBoxes(out.data, out.shape[2], out.shape[3], det, big.width, big.height);
  const crops = boxes.map((b) => crop(big, b.x0, b.y0, b.x1, b.y1));
  input = { data: lineBatch(crops, 320), shape: [crops.length, 3, 48, 320] };
}
const m = ocr[model];
await cpuThreadsReady();
await m.run(input.data, input.shape);
const runs: Map<string, { ms: number; calls: number }>[] = [];
const totals: number[] = [];
for (let r = 0; r < RUNS; r++) {
  current = new Map();
  const t0 = performance.now();
  await m.run(input.data, input.shape);
  totals.push(performance.now() - t0);
  runs.push(current);
}
const keys = [...runs[0].keys()];
const rows = keys.map((key) => ({
  key,
  calls: runs[0].get(key)!.calls,
  ms: median(runs.map((r) => r.get(key)?.ms ?? 0)),
})).sort((a, b) => b.ms - a.ms);
const kernelMs = rows.reduce((s, r) => s + r.ms, 0);
console.log(
  `${model} ${input.shape.join("×")}: ${median(totals).toFixed(1)} ms a run (median of ${RUNS}), ` +
    `kernels ${kernelMs.toFixed(1)} ms\n`,
);
for (const r of rows) {
  if (r.ms < 0.05) continue;
  console.log(`${r.ms.toFixed(2).padStart(7)} ms  ${String(r.calls).padStart(3)}×  ${r.key}`);
}
const report = await m.vm.profile(
  "main",
  ...(await (async () => {
    const { tensor } = await import("../mod.ts");
    return [tensor(input.data, { shape: input.shape })];
  })()),
);
const table = report.table().split("\n");
console.log(
  "\n" + table.slice(0, table.findIndex((l) => l.startsWith("By instruction"))).join("\n"),
);
Deno.exit(0);
