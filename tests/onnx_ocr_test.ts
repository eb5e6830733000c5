/**
 * PP-OCRv4's detector, direction classifier and recognizer (the
 * rapidocr-onnxruntime wheel's, tools/fetch_ppocr.ts) imported with
 * `importONNX` and run on the CPU against the pinned Python onnxruntime on
 * the same inputs (tests/_ocr_checks.ts): each within 1e-4 of max |want|,
 * and the rendered lines read exactly.
 *
 * Needs the weights (`bash tools/fetch_weights.sh`) and tools/onnx/.venv
 * (`bash tools/onnx/setup.sh`); ignored without them unless
 * RELAXVM_REQUIRE_WEIGHTS=1 or RELAXVM_REQUIRE_ONNX=1 makes that a failure.
 *
 * @module
 */

import { checkOCR, ignoreWithoutPPOCR, pythonReference } from "./_ocr_checks.ts";

const reference = await pythonReference();
const requireOnnx = Deno.env.get("RELAXVM_REQUIRE_ONNX") === "1";
if (reference === null && !requireOnnx) {
  console.log("onnx_ocr_test: ignored, no tools/onnx/.venv (run `bash tools/onnx/setup.sh`)");
}

Deno.test({
  name: "PP-OCRv4 det, cls and rec on the CPU match onnxruntime within 1e-4 and read the image",
  ignore: ignoreWithoutPPOCR() || (reference === null && !requireOnnx),
  fn: async () => {
    if (reference === null) {
      throw new Error("RELAXVM_REQUIRE_ONNX=1 but tools/onnx/.venv is missing");
    }
    const errors = await checkOCR(reference);
    console.log(
      `max |Δ| / max |want| on the CPU: ${
        Object.entries(errors).map(([m, e]) => `${m} ${e.toExponential(1)}`).join(", ")
      }`,
    );
  },
});
