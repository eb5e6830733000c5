/**
 * The comparison operators' suite (tests/comparison_suite.ts) on WebGPU:
 * bools travel as int32 words there, converted in and out.
 *
 * @module
 */

import { defineComparisonTests } from "../comparison_suite.ts";
import { getTestGPU, gpuTest } from "./suite_registry.ts";

defineComparisonTests("webgpu", getTestGPU, (name, fn) => gpuTest(name, fn));
