/**
 * Silero VAD's ONNX variants on WebGPU against onnxruntime
 * (`../_silero_vad_checks.ts`). Ignored without the model files, the onnx
 * venv or espeak-ng.
 *
 * @module
 */

import { defineSileroTests, ignoreSilero } from "../_silero_vad_checks.ts";
import { getTestGPU, gpuTest } from "./suite_registry.ts";

const ignore = ignoreSilero();
defineSileroTests("webgpu", getTestGPU, (name, fn) => gpuTest(name, fn, { ignore }));
