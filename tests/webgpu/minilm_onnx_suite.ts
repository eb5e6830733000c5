/**
 * all-MiniLM-L6-v2 as ONNX (`tools/onnx/minilm_onnx.py`'s model), imported,
 * on WebGPU against onnxruntime (`../_minilm_onnx_checks.ts`). Ignored
 * without the weights or the onnx venv, unless CI's RELAXVM_REQUIRE_* make
 * that a failure.
 *
 * @module
 */

import { defineMiniLMOnnxTests, ignoreMiniLMOnnx } from "../_minilm_onnx_checks.ts";
import { getTestGPU, gpuTest } from "./suite_registry.ts";

const ignore = ignoreMiniLMOnnx();
defineMiniLMOnnxTests("webgpu", getTestGPU, (name, fn) => gpuTest(name, fn, { ignore }));
