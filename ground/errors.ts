/**
 * The error classes of relaxvm, one per stage: building (`CheckError`),
 * loading bytes (`LoadError`) and running (`VMError`), and `WebGPUError` for
 * what a GPU reports about queued work. Each carries the facts a
 * tool needs as readonly fields, and a message that states them.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "./brand.ts";
import {
  cut,
  MAX_MESSAGE_CHARS,
  MAX_NAME_CHARS,
  MAX_REASON_CHARS,
  printable,
} from "./printable.ts";

/** One problem found by the checker. */
export interface CheckProblem {
  /** The VM function the problem is in (empty for whole-executable problems). */
  readonly functionName: string;
  /** Index of the instruction within the function, or -1 when none applies. */
  readonly pc: number;
  /** What is wrong, in one sentence without a period. */
  readonly message: string;
}

const CHECK_ERROR_BRAND = brandKey("CheckError");

/** How many problems a `CheckError`'s message lists; `problems` holds them all. */
export const PROBLEMS_LISTED = 50;

/** Characters of one problem in a `CheckError`'s message (its line, after `  - `). */
const PROBLEM_CHARS = 1000;

/**
 * Thrown by `ExecBuilder.get()` when the program is malformed. Finds every
 * problem, not only the first: the message lists the first 50 and counts
 * the rest (at most 64 KiB in all), `problems` holds them all.
 *
 * @example Catch a read of an unwritten register
 * ```ts
 * import { CheckError, ExecBuilder } from "@relaxvm/relaxvm";
 * import { assertInstanceOf } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("main", { num_inputs: 0 }, () => ib.emit_ret(ib.r(3)));
 * try {
 *   ib.get();
 * } catch (e) {
 *   assertInstanceOf(e, CheckError);
 * }
 * ```
 */
export class CheckError extends Error {
  static {
    brand(this, CHECK_ERROR_BRAND);
  }

  /**
   * True for a `CheckError` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is CheckError {
    return typeof v === "object" && v !== null && (v as Branded)[CHECK_ERROR_BRAND] === true;
  }

  /** Every problem the checker found, in program order. */
  readonly problems: readonly CheckProblem[];

  /** Builds the error from the checker's problem list. */
  constructor(problems: readonly CheckProblem[]) {
    // A call of 100,000 operands never written is 100,000 problems: 6.6 MB listed in full.
    const lines = problems.slice(0, PROBLEMS_LISTED).map((p) =>
      cut(formatProblem(p), PROBLEM_CHARS)
    );
    const more = problems.length - lines.length;
    if (more > 0) lines.push(`… and ${more} more (the error's \`problems\` lists them all)`);
    super(
      cut(
        `Cannot build executable: found ${problems.length} problem${
          problems.length === 1 ? "" : "s"
        }\n${lines.map((l) => l.startsWith("…") ? `  ${l}` : `  - ${l}`).join("\n")}`,
        MAX_MESSAGE_CHARS,
      ),
    );
    this.name = "CheckError";
    this.problems = problems;
  }
}

/** Formats one problem as `@func[pc]: message` (a long function name cut). */
export function formatProblem(p: CheckProblem): string {
  const where = p.functionName === ""
    ? "executable"
    : `@${cut(printable(p.functionName), MAX_NAME_CHARS)}`;
  return p.pc >= 0 ? `${where}[${p.pc}]: ${p.message}` : `${where}: ${p.message}`;
}

const LOAD_ERROR_BRAND = brandKey("LoadError");

/**
 * Thrown by `Executable.load()` for bytes that are not a valid executable:
 * truncated, corrupted, of another version, or holding code that does not
 * check.
 *
 * @example
 * ```ts
 * import { Executable, LoadError } from "@relaxvm/relaxvm";
 * import { assertThrows } from "@std/assert";
 *
 * assertThrows(() => Executable.load(new Uint8Array([1, 2, 3])), LoadError);
 * ```
 */
export class LoadError extends Error {
  static {
    brand(this, LOAD_ERROR_BRAND);
  }

  /**
   * True for a `LoadError` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is LoadError {
    return typeof v === "object" && v !== null && (v as Branded)[LOAD_ERROR_BRAND] === true;
  }

  /** The section being read: `header`, `functions`, `constants`, `code`, … */
  readonly section: string;
  /** Byte offset in the input where the problem was found. */
  readonly offset: number;

  /** Builds the error; the message names the section and byte offset. */
  constructor(section: string, offset: number, reason: string, options?: ErrorOptions) {
    // A reason may quote the file (a name, a dtype's text): bounded, as every message is.
    super(
      `Cannot load executable: ${
        cut(reason, MAX_REASON_CHARS)
      } (section "${section}", byte offset ${offset})`,
      options,
    );
    this.name = "LoadError";
    this.section = section;
    this.offset = offset;
  }
}

/** Where a `VMError` happened. */
export interface VMErrorLocation {
  /** The VM function that was running. */
  functionName: string;
  /** Index of the failing instruction within that function (-1: before the first). */
  pc: number;
  /** The instruction as `as_text()` prints it (empty when none). */
  instruction: string;
  /** The packed function that failed (empty when the fault is the VM's own). */
  packedFunc: string;
  /**
   * The instruction with the register numbers the builder used, when formalize renumbered
   * them (`ib.r(7)` may run as `%2`); empty when they are the same or unknown.
   */
  builtInstruction?: string;
}

const VM_ERROR_BRAND = brandKey("VMError");

/** Where the library's modules live: the repository root, or the bundle file itself. */
const THIS_FILE = import.meta.url;
const LIBRARY_DIRS = ["ground/", "devices/", "program/", "builder/", "vm/", "builtins/", "kernels/"]
  .map((d) => new URL(`../${d}`, THIS_FILE).href);

/** Whether a stack line is a frame inside the library (its code, or code it generated). */
function internalFrame(line: string): boolean {
  if (!/^\s+at /.test(line)) return false;
  if (line.includes("eval at makeFunction")) return true; // compiled mode's generated code
  return line.includes(THIS_FILE) || LIBRARY_DIRS.some((dir) => line.includes(dir));
}

/**
 * `stack` without the library's internal frames: the frames a user can act on, after the
 * outermost library frame (the API function they called). Nothing else changes.
 */
export function withoutInternalFrames(stack: string): string {
  const lines = stack.split("\n");
  const first = lines.findIndex((l) => /^\s+at /.test(l));
  if (first < 0) return stack;
  let lastInternal = -1;
  for (let i = first; i < lines.length && (internalFrame(lines[i]) || i === first); i++) {
    if (internalFrame(lines[i])) lastInternal = i;
  }
  if (lastInternal <= first) return stack;
  return [...lines.slice(0, first), ...lines.slice(lastInternal)].join("\n");
}

/** V8's frame limit, raised while a `VMError` captures its stack so trimming loses no user frame. */
const ErrorLimit = Error as { stackTraceLimit?: number };

/**
 * Thrown when running a VM function fails. Names the VM function, the
 * instruction index and text, and the packed function, and keeps the original
 * error as `cause`. The VM that threw stays usable.
 *
 * @example
 * ```ts
 * import { ExecBuilder, VirtualMachine, VMError } from "@relaxvm/relaxvm";
 * import { assertRejects } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("main", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
 * const vm = new VirtualMachine(ib.get());
 * await assertRejects(() => vm.invoke("main"), VMError); // wrong argument count
 * ```
 */
export class VMError extends Error {
  static {
    brand(this, VM_ERROR_BRAND);
  }

  /**
   * True for a `VMError` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is VMError {
    return typeof v === "object" && v !== null && (v as Branded)[VM_ERROR_BRAND] === true;
  }

  /** The VM function that was running. */
  readonly functionName: string;
  /** Index of the failing instruction within the function (-1: before the first). */
  readonly pc: number;
  /** The failing instruction in text form. */
  readonly instruction: string;
  /** The packed function that failed, or `""`. */
  readonly packedFunc: string;
  /** The instruction with the builder's register numbers, or `""` (see `VMErrorLocation`). */
  readonly builtInstruction: string;

  /** Builds the error from where it happened and what went wrong. */
  constructor(location: VMErrorLocation, reason: string, options?: ErrorOptions) {
    const parts = location.functionName === ""
      ? []
      : [`in @${cut(printable(location.functionName), MAX_NAME_CHARS)}`];
    if (location.pc >= 0) parts.push(`instruction ${location.pc}`);
    const built = location.builtInstruction ?? "";
    if (location.instruction !== "") {
      const asBuilt = built === "" ? "" : ` (as built: \`${cut(built.trimEnd(), 500)}\`)`;
      parts.push(`\`${cut(location.instruction, 500)}\`${asBuilt}`);
    }
    if (location.packedFunc !== "") {
      parts.push(`calling ${cut(printable(location.packedFunc), MAX_NAME_CHARS)}`);
    }
    // A reason may carry what a program chose (a string, a name): bounded, so one failing call
    // cannot print megabytes on one line.
    const shown = cut(reason, MAX_REASON_CHARS);
    const limit = ErrorLimit.stackTraceLimit;
    if (typeof limit === "number") ErrorLimit.stackTraceLimit = limit + 30;
    super(parts.length === 0 ? shown : `${shown} (${parts.join(", ")})`, options);
    if (typeof limit === "number") ErrorLimit.stackTraceLimit = limit;
    this.name = "VMError";
    // The VM's own frames (interpreter, dispatch, invoke's helpers) say nothing to its user.
    if (typeof this.stack === "string") this.stack = withoutInternalFrames(this.stack);
    this.functionName = location.functionName;
    this.pc = location.pc;
    this.instruction = location.instruction;
    this.packedFunc = location.packedFunc;
    this.builtInstruction = built;
  }
}

const WEBGPU_ERROR_BRAND = brandKey("WebGPUError");

/** Thrown (from the next read) when WebGPU reported an error for queued work. */
export class WebGPUError extends Error {
  static {
    brand(this, WEBGPU_ERROR_BRAND);
  }

  /**
   * True for a `WebGPUError` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is WebGPUError {
    return typeof v === "object" && v !== null && (v as Branded)[WEBGPU_ERROR_BRAND] === true;
  }

  /** `"validation"`, `"out-of-memory"`, `"internal"` or `"device-lost"`. */
  readonly kind: string;

  /** Wraps the message WebGPU gave. */
  constructor(kind: string, message: string) {
    super(
      `WebGPU reported ${kind === "out-of-memory" ? "out of memory" : `a ${kind} error`}: ${
        cut(message, MAX_REASON_CHARS)
      }`,
    );
    this.name = "WebGPUError";
    this.kind = kind;
  }
}
