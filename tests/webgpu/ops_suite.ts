/**
 * The operator suite on the WebGPU backend. No exclusions: every operator
 * case the CPU passes, the GPU passes too.
 *
 * @module
 */

import { defineOperatorTests } from "../operators_suite.ts";
import { getTestGPU, gpuTest } from "./suite_registry.ts";

defineOperatorTests("webgpu", getTestGPU, (name, fn) => gpuTest(name, fn));
