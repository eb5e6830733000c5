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

import { CheckError } from "../ground/errors.ts";
import { printable } from "../ground/printable.ts";
import { INSPECT } from "../ground/inspect.ts";
import type { BuiltinName } from "../ground/builtin_names.ts";
import { MAX_OPERAND_VALUE, VM_REGISTER, VOID_REGISTER } from "../program/bytecode.ts";
import { type Executable, executableFromVerified } from "../program/executable.ts";
import { formalizeProgram } from "../program/formalize.ts";
import { verifyProgram } from "../program/verifier.ts";
import { type ConstantInput, describe } from "./constant_pool.ts";
import { Operand } from "./operand.ts";
import { BuilderState } from "./builder_state.ts";
import {
  checkInteger,
  checkLabel,
  checkName,
  checkOptions,
  CLOSE_HINT,
  describeArg,
  type FunctionEntry,
  immediateOf,
  operandText,
  unregisteredWarnings,
} from "./builder_checks.ts";

import type { CallArg, CallOptions, FunctionOptions, GetOptions } from "./builder_options.ts";
export type { CallArg, CallOptions, FunctionOptions, GetOptions } from "./builder_options.ts";

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
  /** The function table, pool, code and scope state (builder/builder_state.ts). */
  readonly #s = new BuilderState();
  /** Set by `[Symbol.dispose]()`: the pool's tensors are released, `get()` refuses. */
  #disposed = false;

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
    if (this.#s.open !== null) {
      throw new Error(
        this.#s.openByCallback
          ? `Cannot open function "${name}" inside the body of function "${this.#s.open.name}": scopes do not nest`
          : `Cannot open function "${name}": function "${this.#s.open.name}" is still open (scopes do not nest); ${CLOSE_HINT}`,
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
    const undo = body === undefined ? null : this.#s.mark();
    const entry = this.#s.entry(name);
    // A duplicate is built into a detached entry, so the rest of the program still checks; so is
    // a replacement, which takes the old definition's place only once it closes (a body that
    // throws leaves the old one in place).
    let scope: FunctionEntry;
    if (entry?.defined) {
      scope = { ...entry };
      if (!replace) this.#s.duplicates.push(scope);
    } else if (entry !== undefined) {
      this.#s.touch(entry);
      scope = entry;
    } else {
      scope = this.#s.add(name, "vm");
    }
    Object.assign(scope, {
      kind: "vm",
      start: this.#s.code.count,
      end: this.#s.code.count,
      numArgs: numInputs,
      paramNames,
      defined: true,
      onlyReferenced: false,
      unplacedLabels: undefined,
    });
    this.#s.open = scope;
    this.#s.openByCallback = undo !== null;
    this.#s.labels = { placed: new Map(), pending: [] };
    const close = () => {
      if (this.#s.open === scope) {
        scope.end = this.#s.code.count;
        this.#s.open = null;
        this.#s.resolveLabels(scope);
        if (replace && entry?.defined && scope !== entry) this.#s.replace(entry, scope);
      }
    };
    if (undo !== null) {
      this.#s.undo = undo;
      try {
        body!();
      } catch (error) {
        this.#s.rollback(undo);
        throw error;
      } finally {
        this.#s.undo = null;
        close();
      }
    }
    return {
      [Symbol.dispose]: close,
      // What the REPL shows for `ib.function(...)`: whether the scope is still open.
      [INSPECT]: () =>
        `FunctionScope(${printable(name)}, ${this.#s.open === scope ? "open" : "closed"})`,
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
    const done = this.#s.functions.filter((e) =>
      e.kind === "vm" && e.defined && e !== this.#s.open
    );
    const twice = this.#s.duplicates.filter((e) => e !== this.#s.open);
    const parts = [done.length === 0 ? "no functions" : done.map(describe).join(", ")];
    if (twice.length > 0) {
      parts.push(
        `defined twice: ${
          twice.map(describe).join(", ")
        } (remove_function(name) or function(name, { replace: true }))`,
      );
    }
    if (this.#s.open !== null) parts.push(`open: ${describe(this.#s.open)}`);
    const n = this.#s.code.count, c = this.#s.pool.length;
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
    const entry = this.#s.entry(name);
    if (entry === undefined) {
      this.#s.add(name, kind);
      return;
    }
    this.#s.touch(entry);
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
    if (this.#s.open !== null) {
      throw new Error(
        `remove_function("${name}"): function "${this.#s.open.name}" is still open; close it first`,
      );
    }
    const index = this.#s.byName.get(name);
    const entry = index === undefined ? undefined : this.#s.functions[index];
    if (entry === undefined || entry.kind !== "vm" || !entry.defined) {
      const defined = this.#s.functions.filter((e) => e.kind === "vm" && e.defined)
        .map((e) => printable(e.name));
      throw new Error(
        `remove_function("${name}"): this builder defines no VM function of that name (${
          defined.length === 0 ? "it defines none" : `it defines ${defined.join(", ")}`
        })`,
      );
    }
    this.#s.removeDefinitions(entry);
    Object.assign(entry, {
      start: 0,
      end: 0,
      numArgs: 0,
      paramNames: [],
      defined: false,
      unplacedLabels: undefined,
    });
    if (!this.#s.code.refersToFunction(index!)) {
      this.#s.code.dropFunction(index!);
      this.#s.functions.splice(index!, 1);
      this.#s.byName.clear();
      this.#s.functions.forEach((e, i) => this.#s.byName.set(e.name, i));
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
    return new Operand("constant", this.#s.pool.intern(value));
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
    this.#s.scope("emit_call");
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
      dst = this.#s.register(opts.dst, "emit_call", name);
    } else {
      // Without a destination, a misspelt one ({ dest: … }) would discard the result unseen.
      checkOptions(opts, ["dst"], `emit_call("${name}")`);
    }
    if (dst === VM_REGISTER) throw new TypeError(`emit_call("${name}"): cannot write to %vm`);
    // Check every argument before anything changes, so a bad one leaves no trace. Registers,
    // immediates and constant indices are encoded at once; function references and plain
    // values (which may add a table entry or a constant) only once all are checked.
    const n = args.length;
    const words = n <= this.#s.argScratch.length ? this.#s.argScratch : new Float64Array(n);
    let pending = false;
    for (let k = 0; k < n; k++) {
      const word = this.#s.checkedWord(args[k], k, name);
      if (Number.isNaN(word)) pending = true;
      words[k] = word;
    }
    if (pending) {
      for (let k = 0; k < n; k++) if (Number.isNaN(words[k])) words[k] = this.#s.argWord(args[k]);
    }
    let index = this.#s.byName.get(name);
    if (index === undefined) {
      this.#s.add(name, "packed");
      index = this.#s.functions.length - 1;
    } else if (this.#s.functions[index].onlyReferenced) {
      this.#s.touch(this.#s.functions[index]);
      this.#s.functions[index].onlyReferenced = false;
    }
    this.#s.code.call(dst, index, words, n);
  }

  /** `Ret`: returns the value in register `reg`. */
  emit_ret(reg: Operand): void {
    this.#s.scope("emit_ret");
    this.#s.code.ret(this.#s.register(reg, "emit_ret"));
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
    this.#s.scope("emit_goto");
    this.#s.code.goto(this.#s.jump(pc_offset, "emit_goto"));
  }

  /**
   * `If`: when register `cond` is nonzero (or `true`) falls through to the next instruction,
   * else jumps by `false_offset`, counted from this `If` itself (`pc += false_offset`, as in
   * TVM): `ib.emit_if(c, 3)` skips the two instructions after it. `vm.prim.lt` and the other
   * `vm.prim.*` comparisons make the condition; see `emit_goto` for a loop.
   */
  emit_if(cond: Operand, false_offset: number | string): void {
    this.#s.scope("emit_if");
    const register = this.#s.register(cond, "emit_if");
    this.#s.code.if(register, this.#s.jump(false_offset, "emit_if"));
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
    this.#s.scope("label");
    checkLabel(name, "label");
    if (this.#s.labels.placed.has(name)) {
      throw new Error(`label("${name}"): this function already has a label "${name}"`);
    }
    this.#s.labels.placed.set(name, this.#s.code.count);
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
    if (this.#disposed) {
      throw new ReferenceError("get: the builder was disposed (its constants are released)");
    }
    checkOptions(opts, ["liveness"], "get");
    const liveness = opts?.liveness ?? true;
    if (typeof liveness !== "boolean") {
      throw new TypeError(`get: liveness must be true or false, got ${describe(liveness)}`);
    }
    const raw = this.#s.snapshot(liveness);
    const problems = this.#s.tableProblems(raw);
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
   * Releases the builder's references to its tensor constants: the pool
   * holds each tensor given to `convert_constant` (or passed to `emit_call`)
   * until then (or until garbage collection reclaims them). Executables
   * already made keep their own references. `get()` refuses afterwards.
   * `using ib = new ExecBuilder()` disposes it at the end of the scope.
   */
  [Symbol.dispose](): void {
    this.#disposed = true;
    this.#s.pool.truncate(0);
  }
}
