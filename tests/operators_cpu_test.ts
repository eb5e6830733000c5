/**
 * The operator suite on the CPU backend.
 *
 * @module
 */

import { cpu } from "../devices/cpu_device.ts";
import { defineOperatorTests } from "./operators_suite.ts";

defineOperatorTests("cpu", () => Promise.resolve(cpu()));
