/**
 * `installBuiltins()`: puts the builtin library into the global registry —
 * every `vm.builtin.*`, `vm.prim.*` and `vm.op.*` packed function — and installs the
 * operator kernels of every device kind (kernels/install.ts). The entry
 * points (mod.ts, runtime.ts) call it once; calling it again does nothing.
 *
 * @module
 */

import { installKernels } from "../kernels/install.ts";
import { attentionBuiltins } from "./attention_operator.ts";
import { callBuiltins } from "./calls.ts";
import { indexingBuiltins } from "./indexing_operators.ts";
import { kvCacheBuiltins } from "./kv_cache.ts";
import { memoryBuiltins } from "./memory.ts";
import { operatorBuiltins } from "./operators.ts";
import { primArithmeticBuiltins } from "./prim_arithmetic.ts";
import { primValueBuiltins } from "./prim_values.ts";
import { runtimeCheckBuiltins } from "./runtime_checks.ts";
import { samplingBuiltins } from "./sampling.ts";
import { samplingOperatorBuiltins } from "./sampling_operators.ts";
import { shapeHeapBuiltins } from "./shape_heap.ts";
import { tensorCacheBuiltins } from "./tensor_cache.ts";
import { valueBuiltins } from "./value_builtins.ts";

/** Every builtin table, in registration order. */
export const BUILTIN_TABLES = [
  valueBuiltins,
  shapeHeapBuiltins,
  primValueBuiltins,
  primArithmeticBuiltins,
  runtimeCheckBuiltins,
  memoryBuiltins,
  callBuiltins,
  kvCacheBuiltins,
  samplingBuiltins,
  tensorCacheBuiltins,
  operatorBuiltins,
  indexingBuiltins,
  attentionBuiltins,
  samplingOperatorBuiltins,
];

let installed = false;

/** Registers the builtin library and the kernels; idempotent. */
export function installBuiltins(): void {
  if (installed) return;
  installed = true;
  for (const table of BUILTIN_TABLES) table.install();
  installKernels();
}
