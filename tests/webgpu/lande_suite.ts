/**
 * lande's trained network on WebGPU against lande itself
 * (`../_lande_checks.ts`). Ignored when the converted network is absent,
 * failing instead when `RELAXVM_REQUIRE_WEIGHTS=1`.
 *
 * @module
 */

import { defineLandeTests, ignoreWithoutLande } from "../_lande_checks.ts";
import { getTestGPU, gpuTest } from "./suite_registry.ts";

const ignore = ignoreWithoutLande();
defineLandeTests("webgpu", getTestGPU, (name, fn) => gpuTest(name, fn, { ignore }));
