/**
 * PP-OCRv4's detector, direction classifier and recognizer on WebGPU
 * against onnxruntime-web's WebAssembly backend on the same inputs
 * (tests/_ocr_checks.ts). Ignored when the weights are absent, failing
 * instead when `RELAXVM_REQUIRE_WEIGHTS=1`.
 *
 * @module
 */

import { checkOCR, ignoreWithoutPPOCR, ortWebReference } from "../_ocr_checks.ts";
import { gpuTest } from "./suite_registry.ts";

gpuTest(
  "PP-OCRv4 det, cls and rec on WebGPU match onnxruntime within 1e-4 and read the image",
  async (gpu) => {
    const errors = await checkOCR(await ortWebReference(), gpu);
    console.log(
      `max |Δ| / max |want| on WebGPU: ${
        Object.entries(errors).map(([m, e]) => `${m} ${e.toExponential(1)}`).join(", ")
      }`,
    );
  },
  { ignore: ignoreWithoutPPOCR() },
);
