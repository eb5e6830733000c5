/**
 * The plain data an executable is made of (seed 002's layout): a function
 * table holding VM functions and the packed functions they call in one index
 * space, as TVM has it; a constant pool; and the code as `instrData` words
 * indexed by `instrOffset`. The passes of this layer (decoder, verifier,
 * formalize, liveness, serialization, dumps) work on this data; `Executable`
 * wraps it once it is checked.
 *
 * @module
 */

import type { DataType } from "../ground/dtype.ts";
import type { ShapeTuple } from "../ground/shape_tuple.ts";
import type { NDArray } from "../devices/ndarray.ts";

/**
 * A value in the constant pool. Numbers are TVM's `Float` constants; a
 * `bigint` is TVM's `Int` constant (64-bit, kept exact and apart from
 * floats, so a program moved to and from TVM's format keeps its kind).
 */
export type ConstantValue = number | bigint | string | ShapeTuple | DataType | NDArray;

/** One entry of the function table. */
export interface FunctionInfo {
  /** `"vm"`: bytecode in this executable; `"packed"`: resolved in the registry at load. */
  readonly kind: "vm" | "packed";
  /** The name `emit_call` and `invoke` use. */
  readonly name: string;
  /** First instruction (VM functions; 0 for packed). */
  readonly start: number;
  /** One past the last instruction (VM functions; 0 for packed). */
  readonly end: number;
  /** Number of inputs (VM functions). */
  readonly numArgs: number;
  /** Registers a frame of this function needs (VM functions). */
  readonly registerFileSize: number;
  /** Parameter names, when given (VM functions). */
  readonly paramNames: readonly string[];
  /**
   * The register numbers the builder used, indexed by the formalized register (VM functions
   * that formalize renumbered; absent otherwise, and in a loaded executable): so that a runtime
   * error can quote the instruction as it was written too.
   */
  readonly builtRegisters?: Int32Array;
}

/** The code: where each instruction starts, and the words (program/bytecode.ts). */
export interface Code {
  /** Where each instruction starts in `instrData`. */
  readonly instrOffset: Uint32Array;
  /** The code words. */
  readonly instrData: Float64Array;
}

/** Everything an executable holds. */
export interface ProgramData extends Code {
  /** The function table: VM functions and packed functions, in index order. */
  readonly functions: readonly FunctionInfo[];
  /** The constant pool. */
  readonly constants: readonly ConstantValue[];
  /** Whether the VM releases each register's value after its last use. */
  readonly liveness: boolean;
}
