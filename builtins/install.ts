/**
 * `installBuiltins()`: puts the builtin library into the global registry —
 * every `vm.builtin.*`, `vm.prim.*` and `vm.op.*` packed function — and installs the
 * operator kernels of every device kind (kernels/install.ts). The entry
 * points (mod.ts, runtime.ts) call it once; calling it again does nothing.
 *
 * @module
 */

import { installKernels } from "../kernels/install.ts";
import { attentionBuiltins } from "./operators/attention_operators.ts";
import { callBuiltins } from "./values/function_calls.ts";
import { comparisonBuiltins } from "./predicates/compare_operators.ts";
import { hostIndexBuiltins } from "./host_operators/host_index_operators.ts";
import { lowPrecisionBuiltins } from "./host_operators/low_precision_operators.ts";
import { hostVisionBuiltins } from "./host_nn/host_vision_operators.ts";
import { hostSignalBuiltins } from "./host_nn/host_signal_operators.ts";
import { hostMathBuiltins } from "./host_operators/host_math_operators.ts";
import { hostNormBuiltins } from "./host_nn/host_norm_operators.ts";
import { hostPoolBuiltins } from "./host_nn/host_pool_operators.ts";
import { hostResizeBuiltins } from "./host_nn/host_resize_operators.ts";
import { hostCallBuiltins } from "./values/host_calls.ts";
import { hostShapeBuiltins } from "./host_operators/host_shape_operators.ts";
import { hostTextBuiltins } from "./host_operators/host_text_operators.ts";
import { convBuiltins } from "./operators/conv_operators.ts";
import { indexingBuiltins } from "./operators/indexing_operators.ts";
import { kvCacheBuiltins } from "./lm_support/kv_cache_builtins.ts";
import { kvStateBuiltins } from "./kv_state/kv_state_builtins.ts";
import { memoryBuiltins } from "./memory.ts";
import { operatorBuiltins } from "./operators/tensor_operators.ts";
import { primArithmeticBuiltins } from "./values/prim_arithmetic.ts";
import { primValueBuiltins } from "./shape_lowering/prim_values.ts";
import { runtimeCheckBuiltins } from "./shape_lowering/runtime_checks.ts";
import { samplingBuiltins } from "./lm_support/host_sampling.ts";
import { samplingOperatorBuiltins } from "./lm_support/device_sampling.ts";
import { shapeHeapBuiltins } from "./shape_lowering/shape_heap.ts";
import { tensorCacheBuiltins } from "./tensor_cache/cache_builtins.ts";
import { valueBuiltins } from "./values/runtime_values.ts";

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
  kvStateBuiltins,
  samplingBuiltins,
  tensorCacheBuiltins,
  operatorBuiltins,
  indexingBuiltins,
  comparisonBuiltins,
  attentionBuiltins,
  convBuiltins,
  samplingOperatorBuiltins,
  hostShapeBuiltins,
  hostIndexBuiltins,
  lowPrecisionBuiltins,
  hostVisionBuiltins,
  hostSignalBuiltins,
  hostMathBuiltins,
  hostNormBuiltins,
  hostPoolBuiltins,
  hostResizeBuiltins,
  hostTextBuiltins,
  hostCallBuiltins,
];

let installed = false;

/** Registers the builtin library and the kernels; idempotent. */
export function installBuiltins(): void {
  if (installed) return;
  installed = true;
  for (const table of BUILTIN_TABLES) table.install();
  installKernels();
}
