/**
 * all-MiniLM-L6-v2 exported to ONNX and imported with `importONNX`, on the
 * CPU against onnxruntime (`_minilm_onnx_checks.ts`). The WebGPU run is
 * `webgpu/minilm_onnx_suite.ts`. Ignored with a message without the
 * exported file or the onnx venv.
 *
 * @module
 */

import { cpu } from "../mod.ts";
import { defineMiniLMOnnxTests, ignoreMiniLMOnnx } from "./_minilm_onnx_checks.ts";

const ignore = ignoreMiniLMOnnx();
defineMiniLMOnnxTests(
  "cpu",
  () => Promise.resolve(cpu()),
  (name, fn) => Deno.test({ name, ignore, fn }),
);
