/**
 * all-MiniLM-L6-v2 with its real weights on WebGPU: the shared reference
 * check (`../_minilm_checks.ts`). Ignored when the weights are absent,
 * failing instead when `RELAXVM_REQUIRE_WEIGHTS=1`.
 *
 * @module
 */

import { defineMiniLMTests, ignoreWithoutWeights } from "../_minilm_checks.ts";
import { getTestGPU, gpuTest } from "./suite_registry.ts";

const ignore = ignoreWithoutWeights();
defineMiniLMTests("webgpu", getTestGPU, (name, fn) => gpuTest(name, fn, { ignore }));
