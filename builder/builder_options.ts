/**
 * The option and argument types of `ExecBuilder`'s methods (re-exported by
 * builder/exec_builder.ts, where they are documented in use).
 *
 * @module
 */

import type { ConstantInput } from "./constant_pool.ts";
import type { Operand } from "./operand.ts";

/** Options of `ExecBuilder.function`. */
export interface FunctionOptions {
  /** Number of inputs; they arrive in `r(0)`..`r(num_inputs - 1)`. Default 0. */
  num_inputs?: number;
  /** Names of the inputs, for tools and messages. */
  param_names?: string[];
  /**
   * Replace an earlier definition of the same name (and any duplicates of it) once this one
   * closes; without one, define it as usual. Default `false`: defining a name twice is a
   * problem that `get()` reports. The function keeps its place in the function table.
   */
  replace?: boolean;
}

/** Options of `emit_call`. */
export interface CallOptions {
  /** Destination register; omitted, the result is discarded (`%void`). */
  dst?: Operand;
}

/** Options of `get`. */
export interface GetOptions {
  /** Release each register's value right after its last use (default `true`). */
  liveness?: boolean;
}

/** An `emit_call` argument: an operand, or a plain value that becomes a constant. */
export type CallArg = Operand | ConstantInput;
