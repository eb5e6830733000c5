/**
 * `Executable`: what the builder produces and the VM runs — the program data
 * of program/program_data.ts, verified, with the dumps and serialization as
 * methods. Immutable once built.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../ground/brand.ts";
import { CheckError } from "../ground/errors.ts";
import { INSPECT } from "../ground/inspect.ts";
import { isVMObject, releaseValue, retainValue } from "../ground/object.ts";
import { printable } from "../ground/printable.ts";
import type { ConstantValue, FunctionInfo, ProgramData } from "./program_data.ts";
import { loadProgram, saveProgram } from "./serialize.ts";
import { isTvmExecutable, loadTvmProgram } from "./tvm_format.ts";
import { saveTvmProgram } from "./tvm_format_save.ts";
import { formatPython, formatStats, formatText, type TextOptions } from "./text_format.ts";
import { formatTypeScript, type TypeScriptOptions } from "./typescript_format.ts";
import { verifyProgram } from "./verifier.ts";

/** Options of `Executable.save()`. */
export interface SaveOptions {
  /**
   * `"relaxvm"` (the default): relaxvm's own format, which keeps the
   * liveness flag. `"tvm"`: Apache TVM 0.27's `VMExecutable` bytes.
   */
  format?: "relaxvm" | "tvm";
}

/** Marks construction from data this layer verified (module-private). */
const TRUSTED: unique symbol = Symbol("verified program data");

/** Set by `Executable`'s static block: wraps data this layer has verified, without copying it. */
let wrapVerified: (data: ProgramData, warnings: readonly string[]) => Executable;

/**
 * An executable from program data that the builder or the loader has just
 * verified and owns: no copy, no second verification.
 *
 * @ignore
 */
export function executableFromVerified(
  data: ProgramData,
  warnings: readonly string[] = [],
): Executable {
  return wrapVerified(data, warnings);
}

const EXECUTABLE_BRAND = brandKey("Executable");

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
  static {
    brand(this, EXECUTABLE_BRAND);
  }

  /**
   * True for an `Executable` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static [Symbol.hasInstance](v: unknown): v is Executable {
    return typeof v === "object" && v !== null && (v as Branded)[EXECUTABLE_BRAND] === true;
  }

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
  #disposed = false;

  /**
   * An executable from program data made anywhere (tools usually use the
   * builder or `load` instead). The data is copied — later changes to the
   * caller's arrays do not reach it — and verified like loaded bytes: a
   * `CheckError` lists every problem, so whatever built the data, the VM
   * only ever sees verified code.
   *
   * @example
   * ```ts
   * import { CheckError, Executable, ExecBuilder } from "@relaxvm/relaxvm";
   * import { assertThrows } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("main", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
   * const ex = ib.get();
   * const copy = new Executable(ex); // fine: the same program
   * const broken = { ...ex, functions: ex.functions, instrData: ex.instrData.map(() => 7) };
   * assertThrows(() => new Executable(broken), CheckError);
   * void copy;
   * ```
   */
  constructor(data: ProgramData, warnings?: readonly string[]);
  constructor(data: ProgramData, warnings: readonly string[] = [], trusted?: typeof TRUSTED) {
    const own: ProgramData = trusted === TRUSTED ? data : {
      functions: data.functions.map((f) => ({ ...f, paramNames: [...f.paramNames] })),
      constants: [...data.constants],
      instrOffset: Uint32Array.from(data.instrOffset),
      instrData: Float64Array.from(data.instrData),
      liveness: Boolean(data.liveness),
    };
    if (trusted !== TRUSTED) {
      const { errors, warnings: found } = verifyProgram(own);
      if (errors.length > 0) {
        throw new CheckError(
          errors.map(({ functionName, pc, message }) => ({ functionName, pc, message })),
        );
      }
      warnings = found;
    }
    this.functions = Object.freeze(own.functions.map((f) => Object.freeze({ ...f })));
    this.constants = Object.freeze([...own.constants]);
    this.instrOffset = own.instrOffset;
    this.instrData = own.instrData;
    this.liveness = own.liveness;
    this.warnings = Object.freeze([...warnings]);
    this.#funcIndex = new Map(this.functions.map((f, i) => [f.name, i]));
    // The constant pool holds its tensors until dispose() (or the garbage collector): a
    // tensor the builder was given stays valid here after its maker disposes it, and no
    // program may free one (pinned: every VM running this executable shares it).
    for (const c of this.constants) {
      if (isVMObject(c)) {
        retainValue(c);
        c.pin();
      }
    }
  }

  /** True once `dispose()` was called. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * Lets go of the constant pool: its tensors are freed now, unless a VM
   * made from this executable still holds them (they are freed when that
   * VM is disposed). Afterwards the executable cannot start a VM, `save()`
   * or `as_typescript()`. Dropping an executable without `dispose()` frees
   * its tensors when the garbage collector finds them: later, and in a
   * process that loads many executables, long after their memory is
   * needed. Calling it twice is harmless.
   *
   * @example Release a loaded program's constants as soon as its VM is done
   * ```ts
   * import { ExecBuilder, Executable, tensor, VirtualMachine } from "@relaxvm/relaxvm";
   * import { assert } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("main", { num_inputs: 0 }, () => {
   *   ib.emit_call("vm.builtin.shape_of", [tensor(new Float32Array(1024))], { dst: ib.r(0) });
   *   ib.emit_ret(ib.r(0));
   * });
   * const bytes = ib.get().save();
   *
   * using ex = Executable.load(bytes);
   * using vm = new VirtualMachine(ex);
   * console.log(await vm.invoke("main")); // ShapeTuple([1024])
   * // Both freed here, at the end of the scope: the VM first, then the constants.
   * assert(!ex.disposed);
   * ```
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    for (const c of this.constants) releaseValue(c);
  }

  /** `using ex = Executable.load(bytes)` disposes at the end of the scope. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** Throws if the constant pool was let go (`dispose()`); `what` names the use. */
  #checkUsable(what: string): void {
    if (this.#disposed) {
      throw new ReferenceError(`${what}: the executable was disposed; its constants are released`);
    }
  }

  static {
    wrapVerified = (data, warnings) =>
      new (Executable as unknown as new (
        d: ProgramData,
        w: readonly string[],
        t: typeof TRUSTED,
      ) => Executable)(data, warnings, TRUSTED);
  }

  /**
   * Reads an executable saved with `save()` — relaxvm's format or Apache
   * TVM's (0.23 to 0.27: the bytes of TVM's `VMExecutable`, told apart by
   * their magic number). Malformed bytes, or a TVM file holding what relaxvm
   * cannot represent exactly, throw `LoadError` naming the section and offset.
   *
   * @example Load what TVM wrote
   * ```ts
   * import { Executable, ExecBuilder } from "@relaxvm/relaxvm";
   * import { assertEquals } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("main", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
   * const tvmBytes = ib.get().save({ format: "tvm" }); // as TVM 0.27 writes it
   * assertEquals(Executable.load(tvmBytes).save({ format: "tvm" }), tvmBytes);
   * ```
   */
  static load(bytes: Uint8Array): Executable {
    const { data, warnings } = isTvmExecutable(bytes) ? loadTvmProgram(bytes) : loadProgram(bytes);
    return executableFromVerified(data, warnings);
  }

  /**
   * The binary form. By default relaxvm's own format (magic, version, then
   * the function, constant and code sections); `{ format: "tvm" }` writes the
   * bytes Apache TVM 0.27 writes for the same program, which TVM loads
   * (`relax.ExecutableLoadFromFile`) and runs. TVM's format has no liveness
   * flag: a program loaded back from it runs with liveness on.
   *
   * @example
   * ```ts
   * import { ExecBuilder } from "@relaxvm/relaxvm";
   * import { assertEquals } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("main", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
   * const bytes = ib.get().save({ format: "tvm" });
   * assertEquals(new DataView(bytes.buffer).getBigUint64(0, true), 0xD225DE2F4214151En);
   * ```
   */
  save(options: SaveOptions = {}): Uint8Array {
    this.#checkUsable("save");
    const format = options.format ?? "relaxvm";
    if (format === "tvm") return saveTvmProgram(this);
    if (format !== "relaxvm") {
      throw new TypeError(`save: format must be "relaxvm" or "tvm", got ${String(format)}`);
    }
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

  /**
   * Index of `name` in the function table, or -1.
   *
   * @ignore
   */
  functionIndex(name: string): number {
    return this.#funcIndex.get(name) ?? -1;
  }

  /**
   * The VM function called `name`, if any.
   *
   * @ignore
   */
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

  /**
   * The listing TVM prints with `ex.as_python()`, byte for byte: Python that
   * rebuilds the VM functions with TVM's `ExecBuilder` (constants appear as
   * `ib.c(i)`, as TVM prints them). `as_typescript()` is relaxvm's runnable
   * counterpart.
   *
   * @example
   * ```ts
   * import { ExecBuilder } from "@relaxvm/relaxvm";
   * import { assertEquals } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("main", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
   * assertEquals(
   *   ib.get().as_python(),
   *   'ib = rx.Builder()\nwith ib.function("main", num_inputs=1):\n    ib.emit_ret(ib.r(0))\n',
   * );
   * ```
   */
  as_python(): string {
    return formatPython(this);
  }

  /**
   * Shown by `console.log` and `deno repl`: what the executable holds, on
   * one line — its VM functions with their inputs, the packed functions it
   * calls, its constants and instructions. `as_text()` lists the code.
   *
   * @example
   * ```ts
   * import { ExecBuilder } from "@relaxvm/relaxvm";
   *
   * const ib = new ExecBuilder();
   * ib.function("main", { num_inputs: 2, param_names: ["x", "y"] }, () => {
   *   ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
   *   ib.emit_ret(ib.r(2));
   * });
   * console.log(ib.get()); // Executable(main(x, y); calls vm.op.add; 0 constants, 2 instructions)
   * ```
   */
  [INSPECT](): string {
    const list = (names: string[]) =>
      names.length <= 6
        ? names.join(", ")
        : `${names.slice(0, 5).join(", ")}, … ${names.length - 5} more`;
    const vm = this.functions.filter((f) => f.kind === "vm").map((f) =>
      `${printable(f.name)}(${
        f.paramNames.length > 0
          ? f.paramNames.map(printable).join(", ")
          : `${f.numArgs} input${f.numArgs === 1 ? "" : "s"}`
      })`
    );
    const packed = this.functions.filter((f) => f.kind === "packed").map((f) => printable(f.name));
    const parts = [vm.length === 0 ? "no functions" : list(vm)];
    if (packed.length > 0) parts.push(`calls ${list(packed)}`);
    const n = this.constants.length, m = this.instructionCount;
    parts.push(`${n} constant${n === 1 ? "" : "s"}, ${m} instruction${m === 1 ? "" : "s"}`);
    return `Executable(${parts.join("; ")})`;
  }

  /** A TypeScript module that rebuilds this executable with `ExecBuilder` and exports it as `ex`. */
  as_typescript(options: TypeScriptOptions = {}): string {
    this.#checkUsable("as_typescript");
    return formatTypeScript(this, options);
  }
}
