/**
 * `ExecBuilder`: the DSL that writes Relax VM bytecode, mirroring TVM's
 * Python `relax.ExecBuilder` so scripts port line by line (keyword
 * arguments become an options object). It appends straight into the growing
 * typed arrays of a `CodeWriter`, so a million instructions build in a
 * fraction of a second.
 * Scope state lives on the builder instance, never shared between builders.
 *
 * @module
 */

import { CheckError, type CheckProblem } from "../ground/errors.ts";
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
import { type ConstantInput, ConstantPool } from "./constant_pool.ts";
import { Operand } from "./operand.ts";

/** Options of `ExecBuilder.function`. */
export interface FunctionOptions {
  /** Number of inputs; they arrive in `r(0)`..`r(num_inputs - 1)`. Default 0. */
  num_inputs?: number;
  /** Names of the inputs, for tools and messages. */
  param_names?: string[];
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
 */
export class ExecBuilder {
  #functions: FunctionEntry[] = [];
  #byName = new Map<string, number>();
  #pool = new ConstantPool();
  #code = new CodeWriter();
  #open: FunctionEntry | null = null;
  #problems: CheckProblem[] = [];
  #argScratch = new Float64Array(8);

  /**
   * Opens VM function `name`. `opts` is `{ num_inputs, param_names }` or a
   * bare `num_inputs`. Returns a `Disposable` scope (`using _ = ...`); with
   * `body`, the scope is entered, `body` runs and the scope closes.
   */
  function(name: string, opts: FunctionOptions | number = {}, body?: () => void): Disposable {
    if (typeof name !== "string" || name === "") {
      throw new TypeError("function: name must be a non-empty string");
    }
    if (this.#open !== null) {
      throw new Error(
        `Cannot open function "${name}" inside function "${this.#open.name}": scopes do not nest`,
      );
    }
    const options = typeof opts === "number" ? { num_inputs: opts } : opts;
    const numInputs = options.num_inputs ?? 0;
    if (!Number.isSafeInteger(numInputs) || numInputs < 0) {
      throw new RangeError(
        `function "${name}": num_inputs must be a non-negative integer, got ${numInputs}`,
      );
    }
    const paramNames = [...(options.param_names ?? [])];
    if (paramNames.length > 0 && paramNames.length !== numInputs) {
      throw new RangeError(
        `function "${name}": ${paramNames.length} param_names for ${numInputs} inputs`,
      );
    }
    const entry = this.#entry(name);
    if (entry?.defined) {
      this.#problems.push({
        functionName: name,
        pc: -1,
        message: "is defined twice (duplicate function name)",
      });
    }
    // A duplicate is built into a detached entry, so the rest of the program still checks.
    const scope: FunctionEntry = entry?.defined ? { ...entry } : (entry ?? this.#add(name, "vm"));
    Object.assign(scope, {
      kind: "vm",
      start: this.#code.count,
      end: this.#code.count,
      numArgs: numInputs,
      paramNames,
      defined: true,
      onlyReferenced: false,
    });
    this.#open = scope;
    const close = () => {
      if (this.#open === scope) {
        scope.end = this.#code.count;
        this.#open = null;
      }
    };
    if (body !== undefined) {
      try {
        body();
      } finally {
        close();
      }
    }
    return { [Symbol.dispose]: close };
  }

  /** Declares `name` before use: `"packed"` (default) or `"vm"` (defined later in this builder). */
  declare_function(name: string, kind: "packed" | "vm" = "packed"): void {
    const entry = this.#entry(name) ?? this.#add(name, kind);
    entry.onlyReferenced = false;
    if (kind === "vm" && !entry.defined) entry.kind = "vm";
  }

  /** Register `i` of the current frame. */
  r(i: number): Operand {
    if (!Number.isSafeInteger(i) || i < 0 || i > MAX_OPERAND_VALUE) {
      throw new RangeError(`r(${i}): a register is a non-negative integer`);
    }
    return new Operand("register", i);
  }

  /** Constant-pool entry `i`. */
  c(i: number): Operand {
    if (!Number.isSafeInteger(i) || i < 0 || i > MAX_OPERAND_VALUE) {
      throw new RangeError(`c(${i}): a constant index is a non-negative integer`);
    }
    return new Operand("constant", i);
  }

  /** An integer immediate (negative allowed, |v| < 2^51). */
  imm(v: number): Operand {
    if (!Number.isSafeInteger(v) || Math.abs(v) > MAX_OPERAND_VALUE) {
      throw new RangeError(
        `imm(${v}): an immediate is an integer of magnitude below 2^51; use convert_constant for other numbers`,
      );
    }
    return new Operand("immediate", v);
  }

  /** A reference to function `name` (a VM function of this builder, or a declared packed function). */
  f(name: string): Operand {
    if (typeof name !== "string" || name === "") {
      throw new TypeError("f(): name must be a non-empty string");
    }
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

  /** Puts `value` in the constant pool; equal values share one entry. */
  convert_constant(value: ConstantInput): Operand {
    return new Operand("constant", this.#pool.intern(value));
  }

  /** `Call`: invokes `name` with `args`; the result goes to `opts.dst` (omitted: discarded). */
  emit_call(name: string, args: readonly CallArg[] = [], opts: CallOptions = {}): void {
    const scope = this.#scope("emit_call");
    if (typeof name !== "string" || name === "") {
      throw new TypeError("emit_call: name must be a non-empty string");
    }
    const dst = opts.dst === undefined
      ? VOID_REGISTER
      : this.#register(opts.dst, `emit_call("${name}") dst`);
    if (dst === VM_REGISTER) throw new TypeError(`emit_call("${name}"): cannot write to %vm`);
    // Encode the arguments first, so a bad one leaves no half-written instruction.
    const n = args.length;
    const words = n <= this.#argScratch.length ? this.#argScratch : new Float64Array(n);
    for (let k = 0; k < n; k++) words[k] = this.#argWord(args[k], name);
    let index = this.#byName.get(name);
    if (index === undefined) {
      this.#add(name, "packed");
      index = this.#functions.length - 1;
    } else {
      this.#functions[index].onlyReferenced = false;
    }
    this.#code.call(dst, index, words, n);
    void scope;
  }

  /** `Ret`: returns the value in register `reg`. */
  emit_ret(reg: Operand): void {
    this.#scope("emit_ret");
    this.#code.ret(this.#register(reg, "emit_ret"));
  }

  /** `Goto`: jumps by `pc_offset` instructions. */
  emit_goto(pc_offset: number): void {
    this.#scope("emit_goto");
    this.#code.goto(this.#offset(pc_offset, "emit_goto"));
  }

  /** `If`: when register `cond` is nonzero (or `true`) falls through, else jumps by `false_offset`. */
  emit_if(cond: Operand, false_offset: number): void {
    this.#scope("emit_if");
    this.#code.if(this.#register(cond, "emit_if"), this.#offset(false_offset, "emit_if"));
  }

  /**
   * Finishes: checks the program (throws `CheckError` listing every problem),
   * formalizes it and returns the `Executable`. The builder is unchanged, so
   * calling `get()` again returns an equivalent executable.
   */
  get(opts: GetOptions = {}): Executable {
    const problems = [...this.#problems];
    if (this.#open !== null) {
      problems.push({ functionName: this.#open.name, pc: -1, message: "scope was never closed" });
    }
    const raw = this.#snapshot(opts.liveness ?? true);
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
    // The snapshot is this call's own copy of the code, so formalize may rewrite it.
    return executableFromVerified(formalizeProgram(raw), warnings);
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

  #scope(what: string): FunctionEntry {
    if (this.#open === null) {
      throw new Error(`${what}: no function is open; call it inside ib.function(...)`);
    }
    return this.#open;
  }

  #register(op: Operand, what: string): number {
    if (!(op instanceof Operand) || op.kind !== "register") {
      throw new TypeError(
        `${what}: expected a register (ib.r(i)), got ${
          op instanceof Operand ? op.kind : typeof op
        }`,
      );
    }
    return op.value as number;
  }

  #offset(v: number, what: string): number {
    if (!Number.isSafeInteger(v) || Math.abs(v) > 2 ** 31) {
      throw new RangeError(`${what}: offset ${v} is not an integer`);
    }
    return v;
  }

  #argWord(a: CallArg, callee: string): number {
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
          const entry = this.#entry(name) ??
            Object.assign(this.#add(name, "packed"), { onlyReferenced: true });
          void entry;
          return encodeArg(ArgKind.FuncIdx, this.#byName.get(name)!);
        }
      }
    }
    if (typeof a === "number") {
      throw new TypeError(
        `emit_call("${callee}"): a bare number (${a}) is ambiguous; write ib.imm(${a}) for an integer immediate or ib.convert_constant(${a}) for a numeric constant`,
      );
    }
    return encodeArg(ArgKind.ConstIdx, this.#pool.intern(a));
  }
}
