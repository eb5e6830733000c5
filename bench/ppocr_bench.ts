/**
 * Real ONNX models, imported with `importONNX`, against onnxruntime-web on
 * the same inputs in one process, interleaved, medians: PP-OCRv4's text
 * detector and recognizer (the rapidocr-onnxruntime wheel's,
 * `bash tools/fetch_weights.sh`), issue 31's table in docs/onnx.md.
 *
 * ```sh
 * deno run -A bench/ppocr_bench.ts                 # CPU sides, 7 rounds
 * deno run -A bench/ppocr_bench.ts --webgpu        # and the WebGPU sides
 * deno run -A bench/ppocr_bench.ts --quick         # 3 rounds
 * ```
 *
 * Inputs: the detector on testdata/ppocr/two_lines.pgm scaled to 640×192
 * (`detInput`), the recognizer on that image's two lines (a batch of two,
 * 48×320). Sides: relaxvm on the CPU (WebAssembly SIMD, its default
 * threads) and on WebGPU; onnxruntime-web 1.30.0 on WebAssembly (one
 * thread: two are no faster in Deno; Deno's `Worker` is put back after its
 * sessions are made, as bench/cpu_wasm_bench.ts does) and on its WebGPU
 * backend when that runs here. Each timed call includes reading the
 * output back. Each side's first call is untimed (compilation, pipelines,
 * weight uploads). The table's "vs" columns are onnxruntime-web's time over
 * relaxvm's (above 1: relaxvm is faster), each relaxvm device against the
 * same backend kind.
 *
 * @module
 */

import { cpu, type Device, webgpu } from "../mod.ts";
import { cpuThreadsReady } from "../kernels/cpu/wasm/runtime.ts";
import { PPOCR } from "../models/ppocr/ocr.ts";
import { crop, readPPM, resizeBilinear } from "../models/ppocr/image.ts";
import { detectBoxes, detInput, lineBatch } from "../models/ppocr/pre_post.ts";
import { peer } from "./_peer.ts";
import { median } from "./_stats.ts";

const ROUNDS = Deno.args.includes("--quick") ? 3 : 7;
const WITH_GPU = Deno.args.includes("--webgpu");
const WEIGHTS = new URL("../.weights/ppocr-v4/", import.meta.url);

const image = readPPM(
  await Deno.readFile(new URL("../testdata/ppocr/two_lines.pgm", import.meta.url)),
);
const big = resizeBilinear(image, image.width * 2, image.height * 2);
const det = detInput(big);
const workloads: Record<"det" | "rec", { data: Float32Array; shape: number[] }> = {
  det: { data: det.data, shape: det.shape },
  rec: { data: new Float32Array(0), shape: [] },
};

/** A way of running a model: `run` resolves when the output is read back. */
type Run = (data: Float32Array, shape: number[]) => Promise<unknown>;
interface Side {
  name: string;
  kind: "cpu" | "webgpu";
  runs: Record<"det" | "rec", Run>;
}

const sides: Side[] = [];
const gpu = !WITH_GPU ? null : await webgpu().catch((e) => {
  console.log(`relaxvm webgpu: left out (${(e as Error).message})`);
  return null;
});
for (const [kind, device] of [["cpu", cpu()], ["webgpu", gpu]] as [string, Device | null][]) {
  if (device === null) continue;
  const ocr = await PPOCR.load(WEIGHTS, device);
  if (kind === "cpu") {
    // The recognizer's input: the two lines the detector finds, as the example crops them.
    const out = await ocr.det.run(det.data, det.shape);
    const boxes = detectBoxes(out.data, out.shape[2], out.shape[3], det, big.width, big.height);
    const crops = boxes.map((b) => crop(big, b.x0, b.y0, b.x1, b.y1));
    workloads.rec = { data: lineBatch(crops, 320), shape: [crops.length, 3, 48, 320] };
  }
  sides.push({
    name: `relaxvm ${kind}`,
    kind: kind as "cpu" | "webgpu",
    runs: {
      det: async (x, s) => {
        if (kind === "cpu") await cpuThreadsReady();
        return await ocr.det.run(x, s);
      },
      rec: async (x, s) => {
        if (kind === "cpu") await cpuThreadsReady();
        return await ocr.rec.run(x, s);
      },
    },
  });
}

// deno-lint-ignore no-explicit-any -- the peer is untyped (bench/_peer.ts)
async function ortSide(ort: any, provider: "wasm" | "webgpu"): Promise<Side | null> {
  const runs = {} as Record<"det" | "rec", Run>;
  try {
    for (const m of ["det", "rec"] as const) {
      const worker = globalThis.Worker;
      const session = await ort.InferenceSession.create(
        await Deno.readFile(new URL(`${m}.onnx`, WEIGHTS)),
        { executionProviders: [provider] },
      );
      globalThis.Worker = worker;
      runs[m] = async (x, s) => {
        const out = await session.run({ x: new ort.Tensor("float32", x, s) });
        const y = out[session.outputNames[0]];
        return provider === "webgpu" && y.location === "gpu-buffer" ? await y.getData() : y.data;
      };
      await runs[m](workloads[m].data, workloads[m].shape);
    }
  } catch (e) {
    console.log(`ort-web ${provider}: left out (${(e as Error).message.split("\n")[0]})`);
    return null;
  }
  return { name: `ort-web ${provider}`, kind: provider === "wasm" ? "cpu" : "webgpu", runs };
}

const ortWeb = await peer("npm:onnxruntime-web@1.30.0/webgpu");
ortWeb.env.wasm.numThreads = 1;
for (const provider of WITH_GPU ? ["wasm", "webgpu"] as const : ["wasm"] as const) {
  const side = await ortSide(ortWeb, provider);
  if (side !== null) sides.push(side);
}

const times = new Map<string, number[]>();
for (let round = 0; round <= ROUNDS; round++) { // round 0 warms up
  for (const model of ["det", "rec"] as const) {
    for (const side of sides) {
      const { data, shape } = workloads[model];
      const t0 = performance.now();
      await side.runs[model](data, shape);
      const ms = performance.now() - t0;
      if (round === 0) continue;
      const key = `${side.name}|${model}`;
      times.set(key, [...(times.get(key) ?? []), ms]);
    }
  }
}

const ms = (side: string, model: string) => median(times.get(`${side}|${model}`) ?? [NaN]);
console.log(
  `\nPP-OCRv4, ${ROUNDS} rounds, median ms per call (det ${det.shape.join("×")}, rec ${
    workloads.rec.shape.join("×")
  }):\n`,
);
console.log("| side | det ms | rec ms | det: ort-web / this | rec: ort-web / this |");
console.log("| --- | ---: | ---: | ---: | ---: |");
for (const side of sides) {
  const peerName = side.kind === "cpu" ? "ort-web wasm" : "ort-web webgpu";
  const ratio = (m: string) =>
    side.name.startsWith("relaxvm") && times.has(`${peerName}|${m}`)
      ? `${(ms(peerName, m) / ms(side.name, m)).toFixed(2)}×`
      : "";
  console.log(
    `| ${side.name} | ${ms(side.name, "det").toFixed(1)} | ${ms(side.name, "rec").toFixed(1)} | ${
      ratio("det")
    } | ${ratio("rec")} |`,
  );
}
Deno.exit(0); // onnxruntime-web's threads keep the process alive
