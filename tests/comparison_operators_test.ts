/** The comparison operators' suite (tests/comparison_suite.ts) on the CPU. */

import { cpu } from "../devices/cpu_device.ts";
import { defineComparisonTests } from "./comparison_suite.ts";

defineComparisonTests("cpu", () => Promise.resolve(cpu()));
