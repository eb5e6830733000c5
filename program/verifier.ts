/**
 * The checker: everything that can be wrong with an executable's code,
 * collected (not stopping at the first), each problem with its function and
 * instruction index. The builder runs it before formalize, so messages use
 * the register numbers the user wrote; `Executable.load` runs it on what it
 * read.
 *
 * One small function per concern, all reading instructions through the
 * opcode table's layout (vm/bytecode.ts).
 *
 * @module
 */

import { ArgKind, argKind, argValue, Opcode, VM_REGISTER } from "./bytecode.ts";
import type { CheckProblem } from "../ground/errors.ts";
import type { Executable, FunctionInfo } from "./executable.ts";
import { registerText } from "./text_format.ts";

/** What `check` found. */
export interface CheckResult {
  /** Problems that make the executable unusable. */
  errors: CheckProblem[];
  /** Suspicious but runnable things, as readable sentences. */
  warnings: string[];
}

type Report = (pc: number, message: string) => void;

function checkOperandRanges(ex: Executable, f: FunctionInfo, report: Report): void {
  const data = ex.instrData;
  for (let i = f.start; i < f.end; i++) {
    const at = ex.instrOffset[i], pc = i - f.start;
    if (data[at] === Opcode.Call) {
      const callee = ex.functions[data[at + 2]];
      const n = data[at + 3];
      if (callee === undefined) {
        report(pc, `calls function index ${data[at + 2]}, which does not exist`);
      } else if (callee.kind === "vm" && callee.numArgs !== n) {
        report(
          pc,
          `calls @${callee.name} with ${n} argument${
            n === 1 ? "" : "s"
          }, but it takes ${callee.numArgs}`,
        );
      }
      if (data[at + 1] === VM_REGISTER) report(pc, "cannot write the result to %vm");
      for (let k = 0; k < n; k++) {
        const w = data[at + 4 + k], v = argValue(w);
        if (argKind(w) === ArgKind.ConstIdx && (v < 0 || v >= ex.constants.length)) {
          report(pc, `reads constant c[${v}], but the pool has ${ex.constants.length}`);
        }
        if (argKind(w) === ArgKind.FuncIdx && ex.functions[v] === undefined) {
          report(pc, `refers to function index ${v}, which does not exist`);
        }
      }
    } else if ((data[at] === Opcode.Ret || data[at] === Opcode.If) && data[at + 1] < 0) {
      report(pc, `needs a value register, not ${registerText(data[at + 1])}`);
    }
  }
}

function checkRegisterUse(
  ex: Executable,
  f: FunctionInfo,
  report: Report,
  warn: (m: string) => void,
): void {
  // Bitmaps, not Sets: this runs over every instruction of every build and load.
  const size = f.registerFileSize;
  const written = new Uint8Array(size);
  written.fill(1, 0, Math.min(f.numArgs, size));
  const usedInput = new Uint8Array(f.numArgs);
  const data = ex.instrData;
  const read = (reg: number, pc: number) => {
    if (reg < 0) return;
    if (reg >= size) {
      report(pc, `reads ${registerText(reg)}, outside the register file of ${size}`);
      return;
    }
    if (written[reg] === 0) {
      const inputs = f.numArgs === 0 ? "none" : `%0..%${f.numArgs - 1}`;
      report(pc, `reads ${registerText(reg)} before any write (the inputs are ${inputs})`);
      written[reg] = 1; // report each register once
    }
    if (reg < f.numArgs) usedInput[reg] = 1;
  };
  for (let i = f.start; i < f.end; i++) {
    const at = ex.instrOffset[i], pc = i - f.start;
    switch (data[at]) {
      case Opcode.Call: {
        const n = data[at + 3];
        for (let k = 0; k < n; k++) {
          const w = data[at + 4 + k];
          if (argKind(w) === ArgKind.Register) read(argValue(w), pc);
        }
        const dst = data[at + 1];
        if (dst >= size) report(pc, `writes ${registerText(dst)}, outside the register file`);
        else if (dst >= 0) written[dst] = 1;
        break;
      }
      case Opcode.Ret:
      case Opcode.If:
        read(data[at + 1], pc);
        break;
    }
  }
  for (let r = 0; r < f.numArgs; r++) {
    if (usedInput[r] === 0) {
      warn(
        `@${f.name}: input ${registerText(r)}${
          f.paramNames[r] ? ` (${f.paramNames[r]})` : ""
        } is never used`,
      );
    }
  }
}

function checkControlFlow(ex: Executable, f: FunctionInfo, report: Report): void {
  const n = f.end - f.start;
  if (n === 0) {
    report(-1, "has no instructions, so it falls off its end without ret");
    return;
  }
  const data = ex.instrData;
  for (let i = f.start; i < f.end; i++) {
    const at = ex.instrOffset[i], pc = i - f.start;
    const op = data[at];
    if (op === Opcode.Goto || op === Opcode.If) {
      const offset = op === Opcode.Goto ? data[at + 1] : data[at + 2];
      const target = pc + offset;
      if (target < 0 || target >= n) {
        report(
          pc,
          `jumps by ${offset} to ${target}, outside the function (instructions 0..${n - 1})`,
        );
      } else if (offset === 0) {
        report(pc, `jumps by 0 to itself, which loops forever`);
      }
    }
    if (pc === n - 1 && (op === Opcode.Call || op === Opcode.If)) {
      report(pc, "can fall off the end of the function without ret");
    }
  }
}

/**
 * Checks an executable's code. Lower-level than `ExecBuilder.get()`, which
 * calls it and throws `CheckError` on errors.
 *
 * @example
 * ```ts
 * import { check, ExecBuilder } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("main", { num_inputs: 2 }, () => ib.emit_ret(ib.r(0)));
 * const { errors, warnings } = check(ib.get());
 * assertEquals(errors, []);
 * assertEquals(warnings, ["@main: input %1 is never used"]);
 * ```
 */
export function check(ex: Executable): CheckResult {
  const errors: CheckProblem[] = [];
  const warnings: string[] = [];
  for (const f of ex.functions) {
    if (f.kind !== "vm") continue;
    const report: Report = (pc, message) => errors.push({ functionName: f.name, pc, message });
    checkControlFlow(ex, f, report);
    checkOperandRanges(ex, f, report);
    checkRegisterUse(ex, f, report, (m) => warnings.push(m));
  }
  errors.sort((a, b) => {
    if (a.functionName !== b.functionName) {
      return ex.functionIndex(a.functionName) - ex.functionIndex(b.functionName);
    }
    return a.pc - b.pc;
  });
  return { errors, warnings };
}
