/**
 * The benchmarks' ONNX GPT decoder imported and run on WebGPU against the
 * float64 reference (tests/_onnx_gpt_checks.ts).
 *
 * @module
 */

import { checkOnnxGPT } from "../_onnx_gpt_checks.ts";
import { gpuTest } from "./suite_registry.ts";

gpuTest(
  "ONNX GPT decoder: imported, on WebGPU, matches the float64 reference",
  (gpu) => checkOnnxGPT(gpu),
);
