/**
 * `Executable`: what the builder produces and the VM runs (seed 002's
 * layout). A function table (VM functions and the packed functions they
 * call, in one index space, as TVM has it), a constant pool, and the code as
 * `instr_data` words indexed by `instr_offset`. Immutable once built.
 *
 * @module
 */

import type { DataType } from "../ground/dtype.ts";
import type { NDArray } from "../devices/ndarray.ts";
import type { ShapeTuple } from "../ground/shape_tuple.ts";
import { formatStats, formatText, type TextOptions } from "./text_format.ts";
import { formatTypeScript, type TypeScriptOptions } from "./typescript_format.ts";
import { loadExecutable, saveExecutable } from "./serialize.ts";

/** A value in the constant pool. */
export type ConstantValue = number | string | ShapeTuple | DataType | NDArray;

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
}

/** The parts an executable is made of. @internal */
export interface ExecutableParts {
  functions: readonly FunctionInfo[];
  constants: readonly ConstantValue[];
  instrOffset: Uint32Array;
  instrData: Float64Array;
  liveness: boolean;
  warnings?: readonly string[];
}

/**
 * A checked, formalized program. Build one with `ExecBuilder.get()` or
 * `Executable.load(bytes)`.
 *
 * @example Inspect, save and load
 * ```ts
 * import { Executable, ExecBuilder } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("main", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
 * const ex = ib.get();
 * assertEquals(ex.function_names, ["main"]);
 * assertEquals(Executable.load(ex.save()).as_text(), ex.as_text());
 * ```
 */
export class Executable {
  /** The function table: VM functions and packed functions, in index order. */
  readonly functions: readonly FunctionInfo[];
  /** The constant pool. */
  readonly constants: readonly ConstantValue[];
  /** Where each instruction starts in `instrData`. */
  readonly instrOffset: Uint32Array;
  /** The code words (see vm/bytecode.ts for the layout). */
  readonly instrData: Float64Array;
  /** Whether the VM releases each register's value after its last use. */
  readonly liveness: boolean;
  /** Checker warnings (unused inputs, …). */
  readonly warnings: readonly string[];
  readonly #funcIndex: Map<string, number>;

  /** Assembles an executable from checked parts; use the builder or `load`. @internal */
  constructor(parts: ExecutableParts) {
    this.functions = Object.freeze([...parts.functions]);
    this.constants = Object.freeze([...parts.constants]);
    this.instrOffset = parts.instrOffset;
    this.instrData = parts.instrData;
    this.liveness = parts.liveness;
    this.warnings = Object.freeze([...(parts.warnings ?? [])]);
    this.#funcIndex = new Map(this.functions.map((f, i) => [f.name, i]));
  }

  /** Reads an executable saved with `save()`; malformed bytes throw `LoadError`. */
  static load(bytes: Uint8Array): Executable {
    return loadExecutable(bytes);
  }

  /** The binary form: magic, version, then the function, constant and code sections. */
  save(): Uint8Array {
    return saveExecutable(this);
  }

  /** Names of the VM functions, in table order. */
  get function_names(): string[] {
    return this.functions.filter((f) => f.kind === "vm").map((f) => f.name);
  }

  /** Whether `name` is a VM function of this executable. */
  has_function(name: string): boolean {
    return this.vmFunction(name) !== undefined;
  }

  /** Index of `name` in the function table, or -1. @internal */
  functionIndex(name: string): number {
    return this.#funcIndex.get(name) ?? -1;
  }

  /** The VM function called `name`, if any. @internal */
  vmFunction(name: string): FunctionInfo | undefined {
    const i = this.#funcIndex.get(name);
    const f = i === undefined ? undefined : this.functions[i];
    return f?.kind === "vm" ? f : undefined;
  }

  /** Number of instructions. */
  get instructionCount(): number {
    return this.instrOffset.length;
  }

  /** TVM's statistics: the constant pool and the globals. */
  stats(): string {
    return formatStats(this);
  }

  /**
   * The instruction listing in TVM's layout. `{ releases: true }` adds the
   * points where the VM releases values (liveness).
   */
  as_text(options: TextOptions = {}): string {
    return formatText(this, options);
  }

  /** A TypeScript module that rebuilds this executable with `ExecBuilder` and exports it as `ex`. */
  as_typescript(options: TypeScriptOptions = {}): string {
    return formatTypeScript(this, options);
  }
}
