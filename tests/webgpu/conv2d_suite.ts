/**
 * `vm.op.conv2d` on WebGPU against the float64 definition
 * (tests/_conv2d_checks.ts).
 *
 * @module
 */

import { checkConv2d } from "../_conv2d_checks.ts";
import { gpuTest } from "./suite_registry.ts";

gpuTest(
  "vm.op.conv2d matches the definition at odd sizes, groups, strides and dilations",
  (gpu) => checkConv2d(gpu),
);
