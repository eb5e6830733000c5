/**
 * `Pad` on ONNX's own node tests with their pads bound at import, on WebGPU
 * (`../_onnx_pad_checks.ts`).
 *
 * @module
 */

import { assertEquals } from "@std/assert";
import { ignorePad, PAD_TESTS, padProblems } from "../_onnx_pad_checks.ts";
import { getTestGPU, gpuTest } from "./suite_registry.ts";

gpuTest(
  `onnx Pad: ONNX's ${PAD_TESTS.length} pad node tests, pads bound at import, on WebGPU`,
  async () => assertEquals(await padProblems(await getTestGPU()), []),
  { ignore: ignorePad },
);
