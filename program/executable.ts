/**
 * `Executable`: what the builder produces and the VM runs — the program data
 * of program/program_data.ts, verified, with the dumps and serialization as
 * methods. Immutable once built.
 *
 * @module
 */

import type { ConstantValue, FunctionInfo, ProgramData } from "./program_data.ts";
import { loadProgram, saveProgram } from "./serialize.ts";
import { formatStats, formatText, type TextOptions } from "./text_format.ts";
import { formatTypeScript, type TypeScriptOptions } from "./typescript_format.ts";

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
export class Executable implements ProgramData {
  /** The function table: VM functions and packed functions, in index order. */
  readonly functions: readonly FunctionInfo[];
  /** The constant pool. */
  readonly constants: readonly ConstantValue[];
  /** Where each instruction starts in `instrData`. */
  readonly instrOffset: Uint32Array;
  /** The code words (see program/bytecode.ts for the layout). */
  readonly instrData: Float64Array;
  /** Whether the VM releases each register's value after its last use. */
  readonly liveness: boolean;
  /** Checker warnings (unused inputs, …). */
  readonly warnings: readonly string[];
  readonly #funcIndex: Map<string, number>;

  /** Wraps verified program data; use the builder or `load`. @internal */
  constructor(data: ProgramData, warnings: readonly string[] = []) {
    this.functions = Object.freeze([...data.functions]);
    this.constants = Object.freeze([...data.constants]);
    this.instrOffset = data.instrOffset;
    this.instrData = data.instrData;
    this.liveness = data.liveness;
    this.warnings = Object.freeze([...warnings]);
    this.#funcIndex = new Map(this.functions.map((f, i) => [f.name, i]));
  }

  /** Reads an executable saved with `save()`; malformed bytes throw `LoadError`. */
  static load(bytes: Uint8Array): Executable {
    const { data, warnings } = loadProgram(bytes);
    return new Executable(data, warnings);
  }

  /** The binary form: magic, version, then the function, constant and code sections. */
  save(): Uint8Array {
    return saveProgram(this);
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
