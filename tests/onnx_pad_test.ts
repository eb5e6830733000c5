/**
 * `Pad` on ONNX's own node tests with their pads bound at import, on the
 * CPU (`_onnx_pad_checks.ts`); the WebGPU run is `webgpu/onnx_pad_suite.ts`.
 *
 * @module
 */

import { assertEquals } from "@std/assert";
import { ignorePad, PAD_TESTS, padProblems } from "./_onnx_pad_checks.ts";

Deno.test({
  name: `onnx Pad: ONNX's ${PAD_TESTS.length} pad node tests, pads bound at import, on the CPU`,
  ignore: ignorePad,
  fn: async () => assertEquals(await padProblems(), []),
});
