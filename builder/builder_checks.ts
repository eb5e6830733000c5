/**
 * What `ExecBuilder` (builder/exec_builder.ts) and its state
 * (builder/builder_state.ts) share: the function-table entry, label and undo
 * shapes, the argument checks and their messages, the warnings `get()` adds,
 * and TVM's rule for which integers become immediates.
 *
 * @module
 */

import { formatProblem } from "../ground/errors.ts";
import { getGlobalFunc, listGlobalFuncNames } from "../ground/registry.ts";
import { suggestName } from "../ground/suggest.ts";
import { printable } from "../ground/printable.ts";
import { INSPECT } from "../ground/inspect.ts";
import { MAX_OPERAND_VALUE } from "../program/bytecode.ts";
import { InstructionCursor } from "../program/decoder.ts";
import type { ProgramData } from "../program/program_data.ts";
import { describe } from "./constant_pool.ts";
import { Operand } from "./operand.ts";

export interface FunctionEntry {
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
export function checkLabel(name: unknown, what: string): asserts name is string {
  if (typeof name !== "string" || name === "" || /^\s*[-+]?\d/.test(name)) {
    throw new TypeError(
      `${what}: expected an integer offset or a label name (a string not starting with a digit), got ${
        describe(name)
      }`,
    );
  }
}

/** The labels of the function being written: where each is, and the jumps waiting for one. */
export interface LabelScope {
  /** Label name -> the index (global) of the instruction it marks. */
  placed: Map<string, number>;
  /** Jumps to labels not placed yet: the jump's instruction index and the label. */
  pending: { index: number; label: string }[];
}

/** What a `function()` body may change, so that a body that throws can take it back. */
export interface UndoMark {
  functions: number;
  code: number;
  constants: number;
  duplicates: number;
  /** The fields of entries that existed before the body, as they were. */
  saved: Map<FunctionEntry, FunctionEntry>;
}

/** How to close a scope that `using` left open, shown wherever an open scope is reported. */
export const CLOSE_HINT =
  "close it with the scope's [Symbol.dispose]() (at the REPL's top level `using _ = ib.function(...)` never closes: call _[Symbol.dispose]()), or use the callback form ib.function(name, opts, () => { ... })";

/** A `TypeError` unless `name` is a non-empty string. */
export function checkName(name: unknown, what: string): asserts name is string {
  if (typeof name !== "string" || name === "") {
    throw new TypeError(`${what}: name must be a non-empty string, got ${describe(name)}`);
  }
}

/**
 * A `TypeError` unless `opts` is undefined or a plain options object whose
 * keys are all in `allowed` (a misspelt option would otherwise be ignored
 * without a word).
 */
export function checkOptions(
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
export function describeArg(v: unknown): string {
  if (v instanceof Operand) return operandText(v);
  return describe(v);
}

export function operandText(op: Operand): string {
  return op[INSPECT]();
}

/**
 * A `TypeError` for a non-number, a `RangeError` for a number that is not a
 * safe integer within `limit` (`min` and up).
 */
export function checkInteger(
  v: unknown,
  min: number,
  limit: number,
  what: string,
): asserts v is number {
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
export function unregisteredWarnings(code: ProgramData): string[] {
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
export function firstUse(code: ProgramData, index: number): string {
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

/** TVM's largest immediate, 2^55 - 1: a 56-bit signed value (bytecode.h, kValueMaxLimit). */
export const TVM_MAX_IMMEDIATE = 2n ** 55n - 1n;

/**
 * The immediate TVM's builder makes of integer `v` (as a number), or null
 * when TVM makes it a constant; a `RangeError` when TVM's immediate is
 * wider than relaxvm's (ConvertConstant_ in TVM's exec_builder.cc).
 */
export function immediateOf(v: bigint): number | null {
  const magnitude = v < 0n ? -v : v;
  if (magnitude > TVM_MAX_IMMEDIATE) return null;
  if (magnitude <= BigInt(MAX_OPERAND_VALUE)) return Number(v);
  throw new RangeError(
    `convert_constant(${v}n): TVM makes an integer below 2^55 an immediate, and relaxvm's immediates hold less than 2^51; use a number (a Float constant) or a value of at least 2^55`,
  );
}
