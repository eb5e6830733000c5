/**
 * `ExecBuilder`: the DSL that writes Relax VM bytecode, mirroring TVM's
 * Python `relax.ExecBuilder` so scripts port line by line (keyword
 * arguments become an options object). It appends straight into the growing
 * typed arrays of a `CodeWriter`, so a million instructions build in a
 * fraction of a second.
 * Scope state lives on the builder instance, never shared between builders.
 *
 * Every method checks its arguments at run time before it changes anything
 * (plain JavaScript and the REPL have no type checks): a wrong argument is a
 * `TypeError` (a `RangeError` for a number out of range) that leaves the
 * builder exactly as it was. A `function()` body that throws takes back
 * everything it added.
 *
 * @module
 */

import { CheckError, type CheckProblem, formatProblem } from "../ground/errors.ts";
import { getGlobalFunc, listGlobalFuncNames } from "../ground/registry.ts";
import { suggestName } from "../ground/suggest.ts";
import { printable } from "../ground/printable.ts";
import { INSPECT } from "../ground/inspect.ts";
import type { BuiltinName } from "../ground/builtin_names.ts";
import {
  ArgKind,
  encodeArg,
  MAX_OPERAND_VALUE,
  VM_REGISTER,
  VOID_REGISTER,
} from "../program/bytecode.ts";
import { CodeWriter } from "../program/code_writer.ts";
import { InstructionCursor } from "../program/decoder.ts";
import { type Executable, executableFromVerified } from "../program/executable.ts";
import { formalizeProgram } from "../program/formalize.ts";
import type { FunctionInfo, ProgramData } from "../program/program_data.ts";
import { verifyProgram } from "../program/verifier.ts";
import { checkConstant, type ConstantInput, ConstantPool, describe } from "./constant_pool.ts";
import { Operand } from "./operand.ts";

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

interface FunctionEntry {
  kind: "vm" | "packed";
  name: string;
  start: number;
  end: number;
  numArgs: number;
  paramNames: string[];
  /** Whether a `function()` scope defined its body. */
  defined: boolean;
  /** Whether only `f(name)` has mentioned it (then it must become a VM function). */
  onlyReferenced: boolean;
  /** Labels jumped to but never placed in its body (see `label()`); `get()` reports them. */
  unplacedLabels?: string[];
}

/**
 * A `TypeError` unless `name` can be a label: a non-empty string that does not look like a
 * number (`emit_goto("2")` is far likelier an offset passed as a string than a label).
 */
function checkLabel(name: unknown, what: string): asserts name is string {
  if (typeof name !== "string" || name === "" || /^\s*[-+]?\d/.test(name)) {
    throw new TypeError(
      `${what}: expected an integer offset or a label name (a string not starting with a digit), got ${
        describe(name)
      }`,
    );
  }
}

/** The labels of the function being written: where each is, and the jumps waiting for one. */
interface LabelScope {
  /** Label name -> the index (global) of the instruction it marks. */
  placed: Map<string, number>;
  /** Jumps to labels not placed yet: the jump's instruction index and the label. */
  pending: { index: number; label: string }[];
}

/** What a `function()` body may change, so that a body that throws can take it back. */
interface UndoMark {
  functions: number;
  code: number;
  constants: number;
  duplicates: number;
  /** The fields of entries that existed before the body, as they were. */
  saved: Map<FunctionEntry, FunctionEntry>;
}

/** How to close a scope that `using` left open, shown wherever an open scope is reported. */
const CLOSE_HINT =
  "close it with the scope's [Symbol.dispose]() (at the REPL's top level `using _ = ib.function(...)` never closes: call _[Symbol.dispose]()), or use the callback form ib.function(name, opts, () => { ... })";

/** A `TypeError` unless `name` is a non-empty string. */
function checkName(name: unknown, what: string): asserts name is string {
  if (typeof name !== "string" || name === "") {
    throw new TypeError(`${what}: name must be a non-empty string, got ${describe(name)}`);
  }
}

/**
 * A `TypeError` unless `opts` is undefined or a plain options object whose
 * keys are all in `allowed` (a misspelt option would otherwise be ignored
 * without a word).
 */
function checkOptions(
  opts: unknown,
  allowed: readonly string[],
  what: string,
): asserts opts is Record<string, unknown> | undefined {
  if (opts === undefined) return;
  if (typeof opts !== "object" || opts === null || Array.isArray(opts) || opts instanceof Operand) {
    throw new TypeError(
      `${what}: options must be an object { ${allowed.join(", ")} }, got ${describeArg(opts)}`,
    );
  }
  for (const key in opts) {
    if (!allowed.includes(key)) {
      throw new TypeError(
        `${what}: unknown option "${key}"; the options are ${
          allowed.map((k) => `"${k}"`).join(", ")
        }`,
      );
    }
  }
}

/** An argument as a message names it: operands as the builder call that makes them. */
function describeArg(v: unknown): string {
  if (v instanceof Operand) return operandText(v);
  return describe(v);
}

function operandText(op: Operand): string {
  return op[INSPECT]();
}

/**
 * A `TypeError` for a non-number, a `RangeError` for a number that is not a
 * safe integer within `limit` (`min` and up).
 */
function checkInteger(v: unknown, min: number, limit: number, what: string): asserts v is number {
  if (typeof v !== "number") {
    throw new TypeError(`${what}: expected an integer, got ${describe(v)}`);
  }
  if (!Number.isSafeInteger(v) || v < min || v > limit) {
    throw new RangeError(
      `${what}: ${v} is not ${
        min === 0 ? "a non-negative integer" : "an integer"
      } of magnitude at most ${limit}`,
    );
  }
}

/**
 * A warning per packed function `code` uses that the registry does not
 * hold now, naming its first use and the registered name it most likely
 * misspells. A warning, not an error: the function may be registered later,
 * before a VM calls it (a VM loads the executable anyway and fails at that call if not).
 */
function unregisteredWarnings(code: ProgramData): string[] {
  const warnings: string[] = [];
  let names: string[] | undefined;
  code.functions.forEach((f, index) => {
    if (f.kind !== "packed" || getGlobalFunc(f.name) !== undefined) return;
    names ??= listGlobalFuncNames();
    const guess = suggestName(f.name, names);
    const hint = guess === undefined ? "" : `; did you mean ${guess}?`;
    const where = firstUse(code, index);
    warnings.push(
      `${where}packed function ${
        printable(f.name)
      } is not registered${hint} (register it before a VM calls it)`,
    );
  });
  return warnings;
}

/** `@func[pc]: ` of the first instruction that refers to function `index`, or "" for none. */
function firstUse(code: ProgramData, index: number): string {
  const cursor = new InstructionCursor(code);
  for (const owner of code.functions) {
    if (owner.kind !== "vm") continue;
    for (let i = owner.start; i < owner.end; i++) {
      if (cursor.seek(i).refersToFunction(index)) {
        return `${formatProblem({ functionName: owner.name, pc: i - owner.start, message: "" })}`;
      }
    }
  }
  return "";
}

/**
 * Builds an `Executable`.
 *
 * @example Two functions, both scope forms
 * ```ts
 * import { ExecBuilder, tensor, VirtualMachine } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * {
 *   using _ = ib.function("func0", { num_inputs: 2 });
 *   ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
 *   ib.emit_ret(ib.r(2));
 * }
 * ib.function("func1", { num_inputs: 1 }, () => {
 *   ib.emit_ret(ib.r(0));
 * });
 * const vm = new VirtualMachine(ib.get());
 * using out = await vm.invoke("func0", tensor([1, 2]), tensor([10, 20])) as import("@relaxvm/relaxvm").NDArray;
 * assertEquals([...out.dataSync()], [11, 22]);
 * ```
 *
 * @example A wrong argument throws and changes nothing
 * ```ts
 * import { ExecBuilder } from "@relaxvm/relaxvm";
 * import { assertThrows } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("main", { num_inputs: 1 }, () => {
 *   // deno-lint-ignore no-explicit-any
 *   assertThrows(() => ib.emit_call("vm.builtin.copy", ib.r(0) as any), TypeError, "args");
 *   ib.emit_ret(ib.r(0));
 * });
 * ib.get(); // the bad call left no trace
 * ```
 */
export class ExecBuilder {
  #functions: FunctionEntry[] = [];
  #byName = new Map<string, number>();
  #pool = new ConstantPool();
  #code = new CodeWriter();
  #open: FunctionEntry | null = null;
  /** Whether the open scope is a callback's (then nesting is a plain mistake, not a forgotten close). */
  #openByCallback = false;
  /** Second and later definitions of a name, built detached (see `function()`) for `get()` to report. */
  #duplicates: FunctionEntry[] = [];
  #argScratch = new Float64Array(8);
  /** Set while a `function()` body runs: what to restore if it throws. */
  #undo: UndoMark | null = null;
  /** The open function's labels. */
  #labels: LabelScope = { placed: new Map(), pending: [] };

  /**
   * Opens VM function `name`. `opts` is `{ num_inputs, param_names }` or a
   * bare `num_inputs`. Returns a `Disposable` scope (`using _ = ...`); with
   * `body`, the scope is entered, `body` runs and the scope closes. If `body`
   * throws, the builder is restored to its state before this call and the
   * error propagates, so the function can be written again.
   *
   * Only one scope is open at a time. At the REPL's top level
   * `using _ = ib.function(...)` is never disposed: close it with
   * `_[Symbol.dispose]()`, or use the callback form there.
   */
  function(name: string, opts: FunctionOptions | number = {}, body?: () => void): Disposable {
    checkName(name, "function");
    if (this.#open !== null) {
      throw new Error(
        this.#openByCallback
          ? `Cannot open function "${name}" inside the body of function "${this.#open.name}": scopes do not nest`
          : `Cannot open function "${name}": function "${this.#open.name}" is still open (scopes do not nest); ${CLOSE_HINT}`,
      );
    }
    if (typeof opts === "function") {
      throw new TypeError(
        `function "${name}": the body goes third, after the options: ib.function("${name}", { num_inputs: 0 }, () => { ... })`,
      );
    }
    if (typeof opts !== "number") {
      checkOptions(opts, ["num_inputs", "param_names", "replace"], `function "${name}"`);
    }
    const options: FunctionOptions = typeof opts === "number" ? { num_inputs: opts } : opts ?? {};
    const numInputs = options.num_inputs ?? 0;
    checkInteger(numInputs, 0, MAX_OPERAND_VALUE, `function "${name}": num_inputs`);
    const names: unknown = options.param_names ?? [];
    if (!Array.isArray(names) || !names.every((p) => typeof p === "string")) {
      throw new TypeError(
        `function "${name}": param_names must be an array of strings, got ${describe(names)}`,
      );
    }
    const paramNames = [...names] as string[];
    if (paramNames.length > 0 && paramNames.length !== numInputs) {
      throw new RangeError(
        `function "${name}": ${paramNames.length} param_names for ${numInputs} inputs`,
      );
    }
    const replace: unknown = options.replace ?? false;
    if (typeof replace !== "boolean") {
      throw new TypeError(
        `function "${name}": replace must be true or false, got ${describe(replace)}`,
      );
    }
    if (body !== undefined && typeof body !== "function") {
      throw new TypeError(`function "${name}": body must be a function, got ${describe(body)}`);
    }
    // Nothing has changed yet; from here on, a body that throws is taken back.
    const undo = body === undefined ? null : this.#mark();
    const entry = this.#entry(name);
    // A duplicate is built into a detached entry, so the rest of the program still checks; so is
    // a replacement, which takes the old definition's place only once it closes (a body that
    // throws leaves the old one in place).
    let scope: FunctionEntry;
    if (entry?.defined) {
      scope = { ...entry };
      if (!replace) this.#duplicates.push(scope);
    } else if (entry !== undefined) {
      this.#touch(entry);
      scope = entry;
    } else {
      scope = this.#add(name, "vm");
    }
    Object.assign(scope, {
      kind: "vm",
      start: this.#code.count,
      end: this.#code.count,
      numArgs: numInputs,
      paramNames,
      defined: true,
      onlyReferenced: false,
      unplacedLabels: undefined,
    });
    this.#open = scope;
    this.#openByCallback = undo !== null;
    this.#labels = { placed: new Map(), pending: [] };
    const close = () => {
      if (this.#open === scope) {
        scope.end = this.#code.count;
        this.#open = null;
        this.#resolveLabels(scope);
        if (replace && entry?.defined && scope !== entry) this.#replace(entry, scope);
      }
    };
    if (undo !== null) {
      this.#undo = undo;
      try {
        body!();
      } catch (error) {
        this.#rollback(undo);
        throw error;
      } finally {
        this.#undo = null;
        close();
      }
    }
    return {
      [Symbol.dispose]: close,
      // What the REPL shows for `ib.function(...)`: whether the scope is still open.
      [INSPECT]: () =>
        `FunctionScope(${printable(name)}, ${this.#open === scope ? "open" : "closed"})`,
    } as Disposable;
  }

  /**
   * Shown by `console.log` and `deno repl`: the functions defined so far, the
   * one still open (the REPL's `using` never closes one: see `function()`),
   * and how much code and how many constants there are.
   *
   * @example
   * ```ts
   * import { ExecBuilder } from "@relaxvm/relaxvm";
   *
   * const ib = new ExecBuilder();
   * ib.function("main", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
   * using _ = ib.function("next", { num_inputs: 2 });
   * console.log(ib); // ExecBuilder(main(1 input); open: next(2 inputs); 1 instruction, 0 constants)
   * ```
   */
  [INSPECT](): string {
    const describe = (e: FunctionEntry) =>
      `${printable(e.name)}(${
        e.paramNames.length > 0
          ? e.paramNames.map(printable).join(", ")
          : `${e.numArgs} input${e.numArgs === 1 ? "" : "s"}`
      })`;
    const done = this.#functions.filter((e) => e.kind === "vm" && e.defined && e !== this.#open);
    const twice = this.#duplicates.filter((e) => e !== this.#open);
    const parts = [done.length === 0 ? "no functions" : done.map(describe).join(", ")];
    if (twice.length > 0) {
      parts.push(
        `defined twice: ${
          twice.map(describe).join(", ")
        } (remove_function(name) or function(name, { replace: true }))`,
      );
    }
    if (this.#open !== null) parts.push(`open: ${describe(this.#open)}`);
    const n = this.#code.count, c = this.#pool.length;
    parts.push(`${n} instruction${n === 1 ? "" : "s"}, ${c} constant${c === 1 ? "" : "s"}`);
    return `ExecBuilder(${parts.join("; ")})`;
  }

  /** Declares `name` before use: `"packed"` (default) or `"vm"` (defined later in this builder). */
  declare_function(name: string, kind: "packed" | "vm" = "packed"): void {
    checkName(name, "declare_function");
    if (kind !== "packed" && kind !== "vm") {
      throw new TypeError(
        `declare_function("${name}"): kind must be "packed" or "vm", got ${describe(kind)}`,
      );
    }
    const entry = this.#entry(name);
    if (entry === undefined) {
      this.#add(name, kind);
      return;
    }
    this.#touch(entry);
    entry.onlyReferenced = false;
    if (kind === "vm" && !entry.defined) entry.kind = "vm";
  }

  /**
   * Removes VM function `name` (every definition of it, duplicates included) so that it can be
   * defined again: the way to fix, at the REPL, a function that `get()` rejected. Other
   * functions are unchanged. If other code still calls it or passes `f(name)`, or it was
   * declared, it stays in the function table as declared but undefined (and `get()` asks for a
   * definition); otherwise it is gone. `function(name, { replace: true, ... })` does both steps
   * at once, and keeps the old definition if the new body throws.
   *
   * Throws an `Error` while a scope is open, or when this builder defines no VM function `name`.
   *
   * @example Fixing a rejected function
   * ```ts
   * import { CheckError, ExecBuilder } from "@relaxvm/relaxvm";
   * import { assertEquals, assertThrows } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("main", { num_inputs: 1 }, () => {
   *   ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) }); // r(1) is never written
   *   ib.emit_ret(ib.r(2));
   * });
   * assertThrows(() => ib.get(), CheckError, "before any write");
   * ib.remove_function("main");
   * ib.function("main", { num_inputs: 1 }, () => {
   *   ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
   *   ib.emit_ret(ib.r(1));
   * });
   * assertEquals(ib.get().function_names, ["main"]);
   * ```
   */
  remove_function(name: string): void {
    checkName(name, "remove_function");
    if (this.#open !== null) {
      throw new Error(
        `remove_function("${name}"): function "${this.#open.name}" is still open; close it first`,
      );
    }
    const index = this.#byName.get(name);
    const entry = index === undefined ? undefined : this.#functions[index];
    if (entry === undefined || entry.kind !== "vm" || !entry.defined) {
      const defined = this.#functions.filter((e) => e.kind === "vm" && e.defined)
        .map((e) => printable(e.name));
      throw new Error(
        `remove_function("${name}"): this builder defines no VM function of that name (${
          defined.length === 0 ? "it defines none" : `it defines ${defined.join(", ")}`
        })`,
      );
    }
    this.#removeDefinitions(entry);
    Object.assign(entry, {
      start: 0,
      end: 0,
      numArgs: 0,
      paramNames: [],
      defined: false,
      unplacedLabels: undefined,
    });
    if (!this.#code.refersToFunction(index!)) {
      this.#code.dropFunction(index!);
      this.#functions.splice(index!, 1);
      this.#byName.clear();
      this.#functions.forEach((e, i) => this.#byName.set(e.name, i));
    }
  }

  /**
   * The same text as the REPL shows (see `[INSPECT]`), so `String(ib)` and template strings say
   * what the builder holds.
   *
   * @example
   * ```ts
   * import { ExecBuilder } from "@relaxvm/relaxvm";
   * import { assertEquals } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("main", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
   * assertEquals(String(ib), "ExecBuilder(main(1 input); 1 instruction, 0 constants)");
   * ```
   */
  toString(): string {
    return this[INSPECT]();
  }

  /** Register `i` of the current frame. */
  r(i: number): Operand {
    checkInteger(i, 0, MAX_OPERAND_VALUE, "r()");
    return new Operand("register", i);
  }

  /** Constant-pool entry `i`. */
  c(i: number): Operand {
    checkInteger(i, 0, MAX_OPERAND_VALUE, "c()");
    return new Operand("constant", i);
  }

  /** An integer immediate (negative allowed, |v| < 2^51). */
  imm(v: number): Operand {
    if (typeof v !== "number") {
      throw new TypeError(`imm(): expected an integer, got ${describe(v)}`);
    }
    if (!Number.isSafeInteger(v) || Math.abs(v) > MAX_OPERAND_VALUE) {
      throw new RangeError(
        `imm(${v}): an immediate is an integer of magnitude below 2^51; use convert_constant for other numbers`,
      );
    }
    return new Operand("immediate", v);
  }

  /** A reference to function `name` (a VM function of this builder, or a declared packed function). */
  f(name: string): Operand {
    checkName(name, "f()");
    return new Operand("function", name);
  }

  /** `%vm`: passes the VM itself (for builtins such as `alloc_storage`). */
  vm_state(): Operand {
    return new Operand("register", VM_REGISTER);
  }

  /** `%void`: no value (as an argument) or discard (as a destination). */
  void_arg(): Operand {
    return new Operand("register", VOID_REGISTER);
  }

  /**
   * Puts `value` in the constant pool; equal values share one entry. A
   * `bigint` is an integer, as a Python `int` is to TVM's builder: small
   * enough (|v| < 2^51), it becomes an immediate, as TVM makes it; larger
   * than TVM's immediates (|v| >= 2^55) it is an `Int` constant, kept exact
   * (a JS number is a `Float` constant). Between the two, TVM would make an
   * immediate that relaxvm's code words cannot hold: a `RangeError`.
   */
  convert_constant(value: ConstantInput): Operand {
    if (typeof value === "bigint") {
      const small = immediateOf(value);
      if (small !== null) return new Operand("immediate", small);
    }
    return new Operand("constant", this.#pool.intern(value));
  }

  /**
   * `Call`: invokes `name` with `args`; the result goes to `opts.dst` (omitted: discarded).
   * `name` is a builtin (an editor completes them: see `Builtins`), a VM function of this
   * builder, or any packed function registered with `registerFunc`.
   */
  emit_call(
    name: BuiltinName | (string & Record<never, never>),
    args: readonly CallArg[] = [],
    opts: CallOptions = {},
  ): void {
    this.#scope("emit_call");
    checkName(name, "emit_call");
    if (!Array.isArray(args)) {
      throw new TypeError(
        `emit_call("${name}"): args must be an array, got ${
          describeArg(args)
        }; write ib.emit_call("${name}", [${args instanceof Operand ? operandText(args) : "..."}])`,
      );
    }
    if (opts instanceof Operand) {
      throw new TypeError(
        `emit_call("${name}"): the destination goes in an options object: { dst: ${
          operandText(opts)
        } }`,
      );
    }
    let dst = VOID_REGISTER;
    if (typeof opts === "object" && opts !== null && opts.dst !== undefined) {
      dst = this.#register(opts.dst, "emit_call", name);
    } else {
      // Without a destination, a misspelt one ({ dest: … }) would discard the result unseen.
      checkOptions(opts, ["dst"], `emit_call("${name}")`);
    }
    if (dst === VM_REGISTER) throw new TypeError(`emit_call("${name}"): cannot write to %vm`);
    // Check every argument before anything changes, so a bad one leaves no trace. Registers,
    // immediates and constant indices are encoded at once; function references and plain
    // values (which may add a table entry or a constant) only once all are checked.
    const n = args.length;
    const words = n <= this.#argScratch.length ? this.#argScratch : new Float64Array(n);
    let pending = false;
    for (let k = 0; k < n; k++) {
      const word = this.#checkedWord(args[k], k, name);
      if (Number.isNaN(word)) pending = true;
      words[k] = word;
    }
    if (pending) {
      for (let k = 0; k < n; k++) if (Number.isNaN(words[k])) words[k] = this.#argWord(args[k]);
    }
    let index = this.#byName.get(name);
    if (index === undefined) {
      this.#add(name, "packed");
      index = this.#functions.length - 1;
    } else if (this.#functions[index].onlyReferenced) {
      this.#touch(this.#functions[index]);
      this.#functions[index].onlyReferenced = false;
    }
    this.#code.call(dst, index, words, n);
  }

  /** `Ret`: returns the value in register `reg`. */
  emit_ret(reg: Operand): void {
    this.#scope("emit_ret");
    this.#code.ret(this.#register(reg, "emit_ret"));
  }

  /**
   * `Goto`: jumps by `pc_offset` instructions, counted from this `Goto` itself (as in TVM:
   * `pc += pc_offset`): 1 is the next instruction, -3 the third before this one. The target
   * must be inside the same function.
   *
   * @example A loop counting `r(1)` up to the input `r(0)`, with `vm.prim.*` scalars
   * ```ts
   * import { ExecBuilder, VirtualMachine } from "@relaxvm/relaxvm";
   * import { assertEquals } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("count", { num_inputs: 1 }, () => {
   *   ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(1) }); // 0: i = 0
   *   ib.emit_call("vm.prim.lt", [ib.r(1), ib.r(0)], { dst: ib.r(2) }); // 1: i < n?
   *   ib.emit_if(ib.r(2), 3); //                                         2: no: to 2 + 3 = 5
   *   ib.emit_call("vm.prim.add", [ib.r(1), ib.imm(1)], { dst: ib.r(1) }); // 3: i += 1
   *   ib.emit_goto(-3); //                                                4: to 4 - 3 = 1
   *   ib.emit_ret(ib.r(1)); //                                            5
   * });
   * assertEquals(await new VirtualMachine(ib.get()).invoke("count", 4), 4);
   * ```
   */
  emit_goto(pc_offset: number | string): void {
    this.#scope("emit_goto");
    this.#code.goto(this.#jump(pc_offset, "emit_goto"));
  }

  /**
   * `If`: when register `cond` is nonzero (or `true`) falls through to the next instruction,
   * else jumps by `false_offset`, counted from this `If` itself (`pc += false_offset`, as in
   * TVM): `ib.emit_if(c, 3)` skips the two instructions after it. `vm.prim.lt` and the other
   * `vm.prim.*` comparisons make the condition; see `emit_goto` for a loop.
   */
  emit_if(cond: Operand, false_offset: number | string): void {
    this.#scope("emit_if");
    const register = this.#register(cond, "emit_if");
    this.#code.if(register, this.#jump(false_offset, "emit_if"));
  }

  /**
   * Places label `name` at the next instruction of the open function, so that `emit_goto` and
   * `emit_if` can jump to it by name instead of counting instructions: before the label is
   * placed (forward, resolved when the function closes) or after (backward). Labels belong to
   * one function; `get()` reports a label jumped to but never placed. TVM has no labels: the
   * executable holds the offsets, as if you had counted them.
   *
   * Throws an `Error` outside a function or for a label placed twice in it.
   *
   * @example The loop of `emit_goto`'s example, with labels
   * ```ts
   * import { ExecBuilder, VirtualMachine } from "@relaxvm/relaxvm";
   * import { assertEquals } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("count", { num_inputs: 1 }, () => {
   *   ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(1) });
   *   ib.label("loop");
   *   ib.emit_call("vm.prim.lt", [ib.r(1), ib.r(0)], { dst: ib.r(2) });
   *   ib.emit_if(ib.r(2), "done");
   *   ib.emit_call("vm.prim.add", [ib.r(1), ib.imm(1)], { dst: ib.r(1) });
   *   ib.emit_goto("loop");
   *   ib.label("done");
   *   ib.emit_ret(ib.r(1));
   * });
   * const ex = ib.get();
   * assertEquals(ex.as_text().split("\n")[3], "  If    %2, 3"); // the offsets, as counted
   * assertEquals(await new VirtualMachine(ex).invoke("count", 4), 4);
   * ```
   */
  label(name: string): void {
    this.#scope("label");
    checkLabel(name, "label");
    if (this.#labels.placed.has(name)) {
      throw new Error(`label("${name}"): this function already has a label "${name}"`);
    }
    this.#labels.placed.set(name, this.#code.count);
  }

  /**
   * Finishes: checks the program (throws `CheckError` listing every problem),
   * formalizes it and returns the `Executable`. The builder is unchanged, so
   * calling `get()` again returns an equivalent executable.
   *
   * What is suspicious but not wrong becomes a line of `ex.warnings`: an
   * input never used, or a packed function the registry does not hold yet
   * (with the registered name it most likely misspells, e.g. `vm.op.reluu`:
   * "did you mean vm.op.relu?"). A VM loads such an executable and fails only
   * when a call reaches the name, with a `VMError` naming it, if it is still not registered then.
   *
   * @example A misspelt packed function
   * ```ts
   * import { ExecBuilder, tensor, VirtualMachine, VMError } from "@relaxvm/relaxvm";
   * import { assertRejects, assertStringIncludes } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("main", { num_inputs: 1 }, () => {
   *   ib.emit_call("vm.op.reluu", [ib.r(0)], { dst: ib.r(1) });
   *   ib.emit_ret(ib.r(1));
   * });
   * const ex = ib.get();
   * assertStringIncludes(ex.warnings[0], "did you mean vm.op.relu?");
   * const vm = new VirtualMachine(ex); // loads
   * using x = tensor([1]);
   * await assertRejects(() => vm.invoke("main", x), VMError, "vm.op.reluu"); // fails at the call
   * ```
   */
  get(opts: GetOptions = {}): Executable {
    checkOptions(opts, ["liveness"], "get");
    const liveness = opts?.liveness ?? true;
    if (typeof liveness !== "boolean") {
      throw new TypeError(`get: liveness must be true or false, got ${describe(liveness)}`);
    }
    const problems: CheckProblem[] = this.#duplicates.map((e) => ({
      functionName: e.name,
      pc: -1,
      message:
        `is defined twice (duplicate function name); to define it again, pass { replace: true } or call ib.remove_function("${e.name}") first`,
    }));
    if (this.#open !== null) {
      problems.push({
        functionName: this.#open.name,
        pc: -1,
        message: `scope was never closed; ${CLOSE_HINT}`,
      });
    }
    for (const e of [...this.#functions, ...this.#duplicates]) {
      for (const label of e.unplacedLabels ?? []) {
        problems.push({
          functionName: e.name,
          pc: -1,
          message: `jumps to label "${label}", which it never places (ib.label("${label}"))`,
        });
      }
    }
    const raw = this.#snapshot(liveness);
    this.#functions.forEach((e, index) => {
      if (e.onlyReferenced) {
        problems.push(...this.#unknownReferences(raw, index));
      } else if (e.kind === "vm" && !e.defined) {
        problems.push({
          functionName: e.name,
          pc: -1,
          message: "was declared as a VM function but never defined",
        });
      }
    });
    const { errors, warnings } = verifyProgram(raw);
    for (const { functionName, pc, message } of errors) {
      problems.push({ functionName, pc, message });
    }
    if (problems.length > 0) throw new CheckError(problems);
    const unregistered = unregisteredWarnings(raw);
    // The snapshot is this call's own copy of the code, so formalize may rewrite it.
    return executableFromVerified(formalizeProgram(raw), [...warnings, ...unregistered]);
  }

  /**
   * One problem per instruction that passes `f(name)` for a name no
   * `function()` defined and no `declare_function` declared, naming the
   * function and instruction, as the verifier's problems do.
   */
  #unknownReferences(code: ProgramData, index: number): CheckProblem[] {
    const name = this.#functions[index].name;
    const message =
      `f("${name}") refers to an unknown VM function; define it with ib.function("${name}", ...) or declare it with ib.declare_function("${name}")`;
    const found: CheckProblem[] = [];
    const cursor = new InstructionCursor(code);
    for (const owner of code.functions) {
      if (owner.kind !== "vm") continue;
      for (let i = owner.start; i < owner.end; i++) {
        if (cursor.seek(i).refersToFunction(index)) {
          found.push({ functionName: owner.name, pc: i - owner.start, message });
        }
      }
    }
    // A reference from a duplicate definition (built detached, see function()) has no owner.
    return found.length > 0 ? found : [{ functionName: "", pc: -1, message }];
  }

  #snapshot(liveness: boolean): ProgramData {
    const code = this.#code.snapshot();
    const cursor = new InstructionCursor(code);
    const functions: FunctionInfo[] = this.#functions.map((e) => {
      if (e.kind !== "vm" || !e.defined) {
        return {
          // An undefined VM function is reported by get(); checking it as code would only repeat that.
          kind: "packed",
          name: e.name,
          start: 0,
          end: 0,
          numArgs: e.numArgs,
          registerFileSize: 0,
          paramNames: [],
        };
      }
      // Before formalize, the register file spans the largest register named.
      let maxReg = e.numArgs - 1;
      const widen = (r: number) => {
        if (r > maxReg) maxReg = r;
      };
      // A scope still open (reported by get()) covers what was emitted so far.
      const end = e === this.#open ? this.#code.count : e.end;
      for (let i = e.start; i < end; i++) {
        cursor.seek(i).forEachRead(widen);
        widen(cursor.dst);
      }
      return {
        kind: "vm",
        name: e.name,
        start: e.start,
        end,
        numArgs: e.numArgs,
        registerFileSize: maxReg + 1,
        paramNames: e.paramNames,
      };
    });
    return { ...code, functions, constants: this.#pool.values, liveness };
  }

  #entry(name: string): FunctionEntry | undefined {
    const i = this.#byName.get(name);
    return i === undefined ? undefined : this.#functions[i];
  }

  #add(name: string, kind: "vm" | "packed"): FunctionEntry {
    const entry: FunctionEntry = {
      kind,
      name,
      start: 0,
      end: 0,
      numArgs: 0,
      paramNames: [],
      defined: false,
      onlyReferenced: false,
    };
    this.#byName.set(name, this.#functions.length);
    this.#functions.push(entry);
    return entry;
  }

  /** Closes a `replace: true` scope: `scope`, built detached, takes the place of `entry`. */
  #replace(entry: FunctionEntry, scope: FunctionEntry): void {
    this.#removeDefinitions(entry, scope);
    Object.assign(entry, {
      start: scope.start,
      end: scope.end,
      numArgs: scope.numArgs,
      paramNames: scope.paramNames,
      unplacedLabels: scope.unplacedLabels,
    });
  }

  /**
   * Takes the code of `entry`'s definition and of its duplicates out of the builder and forgets
   * the duplicates; the code of every other function (and of `also`, a detached scope) moves down.
   */
  #removeDefinitions(entry: FunctionEntry, also?: FunctionEntry): void {
    const old = [entry, ...this.#duplicates.filter((d) => d.name === entry.name)];
    this.#duplicates = this.#duplicates.filter((d) => d.name !== entry.name);
    // From the last range to the first, so the ranges still to remove do not move.
    old.sort((a, b) => b.start - a.start);
    const moved = [...this.#functions, ...this.#duplicates];
    if (also !== undefined) moved.push(also);
    for (const { start, end } of old) {
      this.#code.remove(start, end);
      for (const e of moved) {
        if (e.kind === "vm" && e.defined && !old.includes(e) && e.start >= end) {
          e.start -= end - start;
          e.end -= end - start;
        }
      }
    }
  }

  /** Where a `function()` body starts: what a body that throws is rolled back to. */
  #mark(): UndoMark {
    return {
      functions: this.#functions.length,
      code: this.#code.count,
      constants: this.#pool.length,
      duplicates: this.#duplicates.length,
      saved: new Map(),
    };
  }

  /** Records `entry`'s fields before a change, while a body runs (once per entry). */
  #touch(entry: FunctionEntry): void {
    const undo = this.#undo;
    if (undo !== null && !undo.saved.has(entry)) {
      undo.saved.set(entry, { ...entry, paramNames: [...entry.paramNames] });
    }
  }

  /** Takes back everything done since `mark`. */
  #rollback(mark: UndoMark): void {
    for (const [entry, before] of mark.saved) Object.assign(entry, before);
    for (const entry of this.#functions.splice(mark.functions)) this.#byName.delete(entry.name);
    this.#code.truncate(mark.code);
    this.#pool.truncate(mark.constants);
    this.#duplicates.length = mark.duplicates;
    this.#open = null;
  }

  #scope(what: string): FunctionEntry {
    if (this.#open === null) {
      throw new Error(`${what}: no function is open; call it inside ib.function(...)`);
    }
    return this.#open;
  }

  /** The register `op` names; a `TypeError` naming `what` (and `callee`) for anything else. */
  #register(op: unknown, what: string, callee?: string): number {
    if (!(op instanceof Operand) || op.kind !== "register") {
      const where = callee === undefined ? what : `${what}("${callee}") dst`;
      throw new TypeError(`${where}: expected a register (ib.r(i)), got ${describeArg(op)}`);
    }
    return op.value as number;
  }

  #offset(v: unknown, what: string): number {
    checkInteger(v, -(2 ** 31), 2 ** 31, `${what}: offset`);
    return v;
  }

  /** The offset of a jump to `target` (an offset, or a label: 0 until a forward one is placed). */
  #jump(target: unknown, what: string): number {
    if (typeof target !== "string") return this.#offset(target, what);
    checkLabel(target, what);
    const at = this.#labels.placed.get(target);
    if (at !== undefined) return at - this.#code.count;
    this.#labels.pending.push({ index: this.#code.count, label: target });
    return 1; // until the label is placed: the next instruction (a valid jump, if never placed)
  }

  /** Closing `scope`: patches the jumps to labels placed after them; notes any never placed. */
  #resolveLabels(scope: FunctionEntry): void {
    const { placed, pending } = this.#labels;
    const unplaced = new Set<string>();
    for (const { index, label } of pending) {
      const at = placed.get(label);
      if (at === undefined) unplaced.add(label);
      else this.#code.setJump(index, at - index);
    }
    scope.unplacedLabels = unplaced.size === 0 ? undefined : [...unplaced];
    this.#labels = { placed: new Map(), pending: [] };
  }

  /**
   * The operand word of argument `k` when encoding it changes nothing
   * (a register, immediate or constant index), NaN when it is a function
   * reference or a plain value that `#argWord` encodes later. Throws a
   * `TypeError` for anything that cannot be an argument; changes nothing.
   */
  #checkedWord(a: unknown, k: number, callee: string): number {
    if (a instanceof Operand) {
      // Operands come checked from r(), c(), imm(), f(); their fields are not writable.
      switch (a.kind) {
        case "register":
          return encodeArg(ArgKind.Register, a.value as number);
        case "immediate":
          return encodeArg(ArgKind.Immediate, a.value as number);
        case "constant":
          return encodeArg(ArgKind.ConstIdx, a.value as number);
        case "function":
          return NaN;
      }
      throw new TypeError(
        `emit_call("${callee}"): argument ${k} is a malformed operand; make operands with ib.r(), ib.c(), ib.imm(), ib.f()`,
      );
    }
    if (typeof a === "bigint") {
      immediateOf(a); // the RangeError, before anything changes
      return NaN;
    }
    if (typeof a === "number") {
      throw new TypeError(
        `emit_call("${callee}"): a bare number (${a}) is ambiguous; write ib.imm(${a}) for an integer immediate or ib.convert_constant(${a}) for a numeric constant`,
      );
    }
    try {
      checkConstant(a as ConstantInput);
    } catch (error) {
      if (!(error instanceof TypeError)) throw error;
      throw new TypeError(
        `emit_call("${callee}"): argument ${k} is neither an operand (ib.r(i), ib.c(i), ib.imm(v), ib.f(name)) nor a constant: ${
          error.message.replace(/^convert_constant: /, "")
        }`,
      );
    }
    return NaN;
  }

  /** The operand word of a checked argument (adding a function entry or constant when new). */
  #argWord(a: CallArg): number {
    if (a instanceof Operand) {
      switch (a.kind) {
        case "register":
          return encodeArg(ArgKind.Register, a.value as number);
        case "immediate":
          return encodeArg(ArgKind.Immediate, a.value as number);
        case "constant":
          return encodeArg(ArgKind.ConstIdx, a.value as number);
        case "function": {
          const name = a.value as string;
          if (this.#entry(name) === undefined) this.#add(name, "packed").onlyReferenced = true;
          return encodeArg(ArgKind.FuncIdx, this.#byName.get(name)!);
        }
      }
    }
    if (typeof a === "bigint") {
      const small = immediateOf(a);
      if (small !== null) return encodeArg(ArgKind.Immediate, small);
    }
    return encodeArg(ArgKind.ConstIdx, this.#pool.intern(a));
  }
}

/** TVM's largest immediate, 2^55 - 1: a 56-bit signed value (bytecode.h, kValueMaxLimit). */
const TVM_MAX_IMMEDIATE = 2n ** 55n - 1n;

/**
 * The immediate TVM's builder makes of integer `v` (as a number), or null
 * when TVM makes it a constant; a `RangeError` when TVM's immediate is
 * wider than relaxvm's (ConvertConstant_ in TVM's exec_builder.cc).
 */
function immediateOf(v: bigint): number | null {
  const magnitude = v < 0n ? -v : v;
  if (magnitude > TVM_MAX_IMMEDIATE) return null;
  if (magnitude <= BigInt(MAX_OPERAND_VALUE)) return Number(v);
  throw new RangeError(
    `convert_constant(${v}n): TVM makes an integer below 2^55 an immediate, and relaxvm's immediates hold less than 2^51; use a number (a Float constant) or a value of at least 2^55`,
  );
}
