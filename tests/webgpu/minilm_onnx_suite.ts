/**
 * all-MiniLM-L6-v2 exported to ONNX, imported, on WebGPU against onnxruntime
 * (`../_minilm_onnx_checks.ts`). Ignored without the exported file or the
 * onnx venv.
 *
 * @module
 */

import { defineMiniLMOnnxTests, ignoreMiniLMOnnx } from "../_minilm_onnx_checks.ts";
import { getTestGPU, gpuTest } from "./suite_registry.ts";

const ignore = ignoreMiniLMOnnx();
defineMiniLMOnnxTests("webgpu", getTestGPU, (name, fn) => gpuTest(name, fn, { ignore }));
