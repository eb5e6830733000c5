/**
 * The operator suite on the WebGPU backend. Ignored without an adapter,
 * failing instead when `RELAXVM_REQUIRE_WEBGPU=1` (see `_webgpu.ts`).
 *
 * No exclusions: every operator case the CPU passes, the GPU passes too.
 *
 * @module
 */

import { getTestGPU, IGNORE_GPU_TESTS } from "./_webgpu.ts";
import { defineOperatorTests } from "./operators_suite.ts";

defineOperatorTests("webgpu", getTestGPU, { ignore: IGNORE_GPU_TESTS });
