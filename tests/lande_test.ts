/**
 * lande's trained network (models/lande) on the CPU against lande itself
 * (`_lande_checks.ts`); the WebGPU run is `webgpu/lande_suite.ts`. Ignored
 * with a message when the converted network is absent, failing instead
 * when `RELAXVM_REQUIRE_WEIGHTS=1`.
 *
 * @module
 */

import { cpu } from "../mod.ts";
import { defineLandeTests, ignoreWithoutLande } from "./_lande_checks.ts";

const ignore = ignoreWithoutLande();
defineLandeTests(
  "cpu",
  () => Promise.resolve(cpu()),
  (name, fn) => Deno.test({ name, ignore, fn }),
);
