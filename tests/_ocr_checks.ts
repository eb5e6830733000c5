/**
 * PP-OCRv4 (tools/fetch_ppocr.ts) imported with `importONNX` and checked
 * against onnxruntime on the same inputs, shared by tests/onnx_ocr_test.ts
 * (CPU; the reference is the pinned Python onnxruntime in tools/onnx/.venv,
 * run as a subprocess) and tests/webgpu/onnx_ocr_suite.ts (WebGPU; the
 * reference is onnxruntime-web's WebAssembly backend in the same process,
 * as the suites' child may not start processes).
 *
 * The image is testdata/ppocr/two_lines.pgm, two lines of DejaVu Sans that
 * ImageMagick rendered (tools/ppocr_test_image.sh). The detector runs on
 * it; the boxes relaxvm's map gives are cropped, and the direction
 * classifier and the recognizer run on those crops, so each model is
 * compared on one input both runtimes see: max |Δ| / max |want| ≤ 1e-4 for
 * each, and the lines read as rendered.
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";
import type { Device } from "../mod.ts";
import { PPOCR, type PPOCRModel } from "../models/ppocr/ocr.ts";
import { crop, readPPM } from "../models/ppocr/image.ts";
import { ctcDecode, detectBoxes, detInput, lineBatch, recWidth } from "../models/ppocr/pre_post.ts";
import { ignoreWithoutWeights, requireWeights, weightsDir } from "./_weights.ts";
import { peer } from "../bench/_peer.ts";

/** Where the models are. */
export const PPOCR_WEIGHTS = weightsDir("ppocr-v4");
const FILES = ["det.onnx", "cls.onnx", "rec.onnx"];

/** What the image says, line by line. */
export const TWO_LINES = ["Hello relaxvm", "PP-OCRv4 2026"];

/** Largest relative difference allowed: max |Δ| / max |want|. */
export const TOLERANCE = 1e-4;

/** Whether the checks are ignored (weights absent and not required). */
export function ignoreWithoutPPOCR(): boolean {
  return ignoreWithoutWeights("PP-OCRv4", PPOCR_WEIGHTS, FILES);
}

/** Runs model `name` (`det`, `cls`, `rec`) on onnxruntime: the output's elements. */
export type Reference = (
  name: "det" | "cls" | "rec",
  data: Float32Array,
  shape: number[],
) => Promise<Float32Array>;

/** max |got − want| / max |want|. */
export function relativeError(got: Float32Array, want: Float32Array): number {
  assertEquals(got.length, want.length, "output sizes differ");
  let diff = 0, scale = 0;
  for (let i = 0; i < want.length; i++) {
    diff = Math.max(diff, Math.abs(got[i] - want[i]));
    scale = Math.max(scale, Math.abs(want[i]));
  }
  return diff / scale;
}

/** The three models on `device` against `reference`; returns each model's relative error. */
export async function checkOCR(
  reference: Reference,
  device?: Device,
): Promise<Record<"det" | "cls" | "rec", number>> {
  requireWeights("PP-OCRv4", PPOCR_WEIGHTS, FILES);
  const image = readPPM(
    await Deno.readFile(new URL("../testdata/ppocr/two_lines.pgm", import.meta.url)),
  );
  using ocr = await PPOCR.load(PPOCR_WEIGHTS, device);
  const errors = { det: 0, cls: 0, rec: 0 };
  const compare = async (
    name: "det" | "cls" | "rec",
    model: PPOCRModel,
    x: Float32Array,
    shape: number[],
  ) => {
    const got = await model.run(x, shape);
    const want = await reference(name, x, shape);
    errors[name] = relativeError(got.data, want);
    assert(
      errors[name] <= TOLERANCE,
      `${name}: max |Δ| / max |want| = ${errors[name].toExponential(2)} > ${TOLERANCE}`,
    );
    return got;
  };
  const input = detInput(image);
  const det = await compare("det", ocr.det, input.data, input.shape);
  const boxes = detectBoxes(det.data, det.shape[2], det.shape[3], input, image.width, image.height);
  assertEquals(boxes.length, TWO_LINES.length, `boxes: ${JSON.stringify(boxes)}`);
  const crops = boxes.map((b) => crop(image, b.x0, b.y0, b.x1, b.y1));
  const cls = await compare("cls", ocr.cls, lineBatch(crops, 192), [crops.length, 3, 48, 192]);
  for (let i = 0; i < crops.length; i++) {
    assert(cls.data[2 * i] > cls.data[2 * i + 1], `line ${i} classified upside down`);
  }
  const width = recWidth(crops);
  const rec = await compare("rec", ocr.rec, lineBatch(crops, width), [crops.length, 3, 48, width]);
  const lines = ctcDecode(rec.data, rec.shape[0], rec.shape[1], rec.shape[2], ocr.characters);
  assertEquals(lines.map((l) => l.text), TWO_LINES);
  return errors;
}

/**
 * The pinned Python onnxruntime (tools/onnx/.venv, tools/onnx/run_onnxruntime.py),
 * one subprocess per run; null when the venv is absent.
 */
export async function pythonReference(): Promise<Reference | null> {
  const python = new URL("../tools/onnx/.venv/bin/python", import.meta.url);
  if (!await Deno.stat(python).then(() => true, () => false)) return null;
  const script = new URL("../tools/onnx/run_onnxruntime.py", import.meta.url);
  return async (name, data, shape) => {
    const dir = await Deno.makeTempDir({ prefix: "relaxvm-ort-" });
    try {
      await Deno.writeFile(
        `${dir}/x.bin`,
        new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
      );
      await Deno.writeTextFile(
        `${dir}/inputs.json`,
        JSON.stringify([{ name: "x", shape, file: "x.bin" }]),
      );
      const out = await new Deno.Command(python, {
        args: [script.pathname, new URL(`${name}.onnx`, PPOCR_WEIGHTS).pathname, dir],
        stdout: "piped",
        stderr: "piped",
      }).output();
      if (!out.success) {
        throw new Error(`onnxruntime failed: ${new TextDecoder().decode(out.stderr)}`);
      }
      const [first] = JSON.parse(await Deno.readTextFile(`${dir}/outputs.json`));
      return new Float32Array((await Deno.readFile(`${dir}/${first.file}`)).buffer);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  };
}

/** onnxruntime-web 1.30.0's WebAssembly backend, in this process (bench/_peer.ts). */
export async function ortWebReference(): Promise<Reference> {
  const ort = await peer("npm:onnxruntime-web@1.30.0");
  ort.env.wasm.numThreads = 1;
  const sessions = new Map<string, unknown>();
  return async (name, data, shape) => {
    let session = sessions.get(name);
    if (session === undefined) {
      const bytes = await Deno.readFile(new URL(`${name}.onnx`, PPOCR_WEIGHTS));
      session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"] });
      sessions.set(name, session);
    }
    // deno-lint-ignore no-explicit-any -- the peer is untyped
    const s = session as any;
    const out = await s.run({ x: new ort.Tensor("float32", data, shape) });
    return out[s.outputNames[0]].data as Float32Array;
  };
}
