/**
 * The state behind one `ExecBuilder` (builder/exec_builder.ts): its function
 * table, constant pool, code, open scope, labels and undo mark, and the
 * steps that change them or read them back (entries, undo, label
 * resolution, operand words, the snapshot `get()` checks). `ExecBuilder`
 * checks its public arguments and then works through this; nothing outside
 * builder/ sees it.
 *
 * @module
 */

import type { CheckProblem } from "../ground/errors.ts";
import { ArgKind, encodeArg } from "../program/bytecode.ts";
import { CodeWriter } from "../program/code_writer.ts";
import { InstructionCursor } from "../program/decoder.ts";
import type { FunctionInfo, ProgramData } from "../program/program_data.ts";
import { checkConstant, type ConstantInput, ConstantPool } from "./constant_pool.ts";
import { Operand } from "./operand.ts";
import {
  checkInteger,
  checkLabel,
  CLOSE_HINT,
  describeArg,
  type FunctionEntry,
  immediateOf,
  type LabelScope,
  type UndoMark,
} from "./builder_checks.ts";

/** The state of one builder; see the module comment. */
export class BuilderState {
  functions: FunctionEntry[] = [];
  byName = new Map<string, number>();
  pool = new ConstantPool();
  code = new CodeWriter();
  open: FunctionEntry | null = null;
  /** Whether the open scope is a callback's (then nesting is a plain mistake, not a forgotten close). */
  openByCallback = false;
  /** Second and later definitions of a name, built detached (see `function()`) for `get()` to report. */
  duplicates: FunctionEntry[] = [];
  argScratch = new Float64Array(8);
  /** Set while a `function()` body runs: what to restore if it throws. */
  undo: UndoMark | null = null;
  /** The open function's labels. */
  labels: LabelScope = { placed: new Map(), pending: [] };

  /**
   * What the builder's own state says is wrong with the program `get()` is about to check,
   * before the verifier reads its code (`raw`, this builder's `snapshot()`): a name defined
   * twice, a scope never closed, a label jumped to but never placed, a VM function declared
   * but never defined, an `f(name)` no function answers.
   */
  tableProblems(raw: ProgramData): CheckProblem[] {
    const problems: CheckProblem[] = this.duplicates.map((e) => ({
      functionName: e.name,
      pc: -1,
      message:
        `is defined twice (duplicate function name); to define it again, pass { replace: true } or call ib.remove_function("${e.name}") first`,
    }));
    if (this.open !== null) {
      problems.push({
        functionName: this.open.name,
        pc: -1,
        message: `scope was never closed; ${CLOSE_HINT}`,
      });
    }
    for (const e of [...this.functions, ...this.duplicates]) {
      for (const label of e.unplacedLabels ?? []) {
        problems.push({
          functionName: e.name,
          pc: -1,
          message: `jumps to label "${label}", which it never places (ib.label("${label}"))`,
        });
      }
    }
    this.functions.forEach((e, index) => {
      if (e.onlyReferenced) {
        problems.push(...this.unknownReferences(raw, index));
      } else if (e.kind === "vm" && !e.defined) {
        problems.push({
          functionName: e.name,
          pc: -1,
          message: "was declared as a VM function but never defined",
        });
      }
    });
    return problems;
  }

  /**
   * One problem per instruction that passes `f(name)` for a name no
   * `function()` defined and no `declare_function` declared, naming the
   * function and instruction, as the verifier's problems do.
   */
  unknownReferences(code: ProgramData, index: number): CheckProblem[] {
    const name = this.functions[index].name;
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

  snapshot(liveness: boolean): ProgramData {
    const code = this.code.snapshot();
    const cursor = new InstructionCursor(code);
    const functions: FunctionInfo[] = this.functions.map((e) => {
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
      const end = e === this.open ? this.code.count : e.end;
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
    return { ...code, functions, constants: this.pool.values, liveness };
  }

  entry(name: string): FunctionEntry | undefined {
    const i = this.byName.get(name);
    return i === undefined ? undefined : this.functions[i];
  }

  add(name: string, kind: "vm" | "packed"): FunctionEntry {
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
    this.byName.set(name, this.functions.length);
    this.functions.push(entry);
    return entry;
  }

  /** Closes a `replace: true` scope: `scope`, built detached, takes the place of `entry`. */
  replace(entry: FunctionEntry, scope: FunctionEntry): void {
    this.removeDefinitions(entry, scope);
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
  removeDefinitions(entry: FunctionEntry, also?: FunctionEntry): void {
    const old = [entry, ...this.duplicates.filter((d) => d.name === entry.name)];
    this.duplicates = this.duplicates.filter((d) => d.name !== entry.name);
    // From the last range to the first, so the ranges still to remove do not move.
    old.sort((a, b) => b.start - a.start);
    const moved = [...this.functions, ...this.duplicates];
    if (also !== undefined) moved.push(also);
    for (const { start, end } of old) {
      this.code.remove(start, end);
      for (const e of moved) {
        if (e.kind === "vm" && e.defined && !old.includes(e) && e.start >= end) {
          e.start -= end - start;
          e.end -= end - start;
        }
      }
    }
  }

  /** Where a `function()` body starts: what a body that throws is rolled back to. */
  mark(): UndoMark {
    return {
      functions: this.functions.length,
      code: this.code.count,
      constants: this.pool.length,
      duplicates: this.duplicates.length,
      saved: new Map(),
    };
  }

  /** Records `entry`'s fields before a change, while a body runs (once per entry). */
  touch(entry: FunctionEntry): void {
    const undo = this.undo;
    if (undo !== null && !undo.saved.has(entry)) {
      undo.saved.set(entry, { ...entry, paramNames: [...entry.paramNames] });
    }
  }

  /** Takes back everything done since `mark`. */
  rollback(mark: UndoMark): void {
    for (const [entry, before] of mark.saved) Object.assign(entry, before);
    for (const entry of this.functions.splice(mark.functions)) this.byName.delete(entry.name);
    this.code.truncate(mark.code);
    this.pool.truncate(mark.constants);
    this.duplicates.length = mark.duplicates;
    this.open = null;
  }

  scope(what: string): FunctionEntry {
    if (this.open === null) {
      throw new Error(`${what}: no function is open; call it inside ib.function(...)`);
    }
    return this.open;
  }

  /** The register `op` names; a `TypeError` naming `what` (and `callee`) for anything else. */
  register(op: unknown, what: string, callee?: string): number {
    if (!(op instanceof Operand) || op.kind !== "register") {
      const where = callee === undefined ? what : `${what}("${callee}") dst`;
      throw new TypeError(`${where}: expected a register (ib.r(i)), got ${describeArg(op)}`);
    }
    return op.value as number;
  }

  offset(v: unknown, what: string): number {
    checkInteger(v, -(2 ** 31), 2 ** 31, `${what}: offset`);
    return v;
  }

  /** The offset of a jump to `target` (an offset, or a label: 0 until a forward one is placed). */
  jump(target: unknown, what: string): number {
    if (typeof target !== "string") return this.offset(target, what);
    checkLabel(target, what);
    const at = this.labels.placed.get(target);
    if (at !== undefined) return at - this.code.count;
    this.labels.pending.push({ index: this.code.count, label: target });
    return 1; // until the label is placed: the next instruction (a valid jump, if never placed)
  }

  /** Closing `scope`: patches the jumps to labels placed after them; notes any never placed. */
  resolveLabels(scope: FunctionEntry): void {
    const { placed, pending } = this.labels;
    const unplaced = new Set<string>();
    for (const { index, label } of pending) {
      const at = placed.get(label);
      if (at === undefined) unplaced.add(label);
      else this.code.setJump(index, at - index);
    }
    scope.unplacedLabels = unplaced.size === 0 ? undefined : [...unplaced];
    this.labels = { placed: new Map(), pending: [] };
  }

  /**
   * The operand word of argument `k` when encoding it changes nothing
   * (a register, immediate or constant index), NaN when it is a function
   * reference or a plain value that `#argWord` encodes later. Throws a
   * `TypeError` for anything that cannot be an argument; changes nothing.
   */
  checkedWord(a: unknown, k: number, callee: string): number {
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
  argWord(a: Operand | ConstantInput): number {
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
          if (this.entry(name) === undefined) this.add(name, "packed").onlyReferenced = true;
          return encodeArg(ArgKind.FuncIdx, this.byName.get(name)!);
        }
      }
    }
    if (typeof a === "bigint") {
      const small = immediateOf(a);
      if (small !== null) return encodeArg(ArgKind.Immediate, small);
    }
    return encodeArg(ArgKind.ConstIdx, this.pool.intern(a));
  }
}
