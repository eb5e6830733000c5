/**
 * Formalize: renumber each function's registers in order of first use, so a
 * program that writes `r(10000)` gets a register file of the size it needs
 * (seed 002). Inputs keep `%0..%{n-1}`; special registers are untouched.
 * Running it on a formalized executable changes nothing.
 *
 * @module
 */

import { InstructionCursor } from "./decoder.ts";
import { type Executable, executableFromVerified } from "./executable.ts";
import type { FunctionInfo, ProgramData } from "./program_data.ts";

/**
 * Returns a new executable whose registers are numbered in order of first use.
 *
 * @example
 * ```ts
 * import { ExecBuilder, formalize } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("main", { num_inputs: 1 }, () => {
 *   ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(100) });
 *   ib.emit_ret(ib.r(100));
 * });
 * const ex = formalize(ib.get());
 * assertEquals(ex.as_text().split("\n")[2], "  ret   %1");
 * ```
 */
export function formalize(ex: Executable): Executable {
  const data = formalizeProgram({ ...programDataOf(ex), instrData: ex.instrData.slice() });
  return executableFromVerified(data, ex.warnings);
}

/** The data fields of an executable. */
function programDataOf(ex: Executable): ProgramData {
  return {
    functions: ex.functions,
    constants: ex.constants,
    instrOffset: ex.instrOffset,
    instrData: ex.instrData,
    liveness: ex.liveness,
  };
}

/**
 * Formalize, rewriting `p.instrData` in place (the caller owns it: the
 * builder passes its own snapshot, which saves a copy of the whole code on
 * every build). Returns the program with the new register file sizes.
 */
export function formalizeProgram(p: ProgramData): ProgramData {
  const cursor = new InstructionCursor(p);
  const functions: FunctionInfo[] = p.functions.map((f) => {
    if (f.kind !== "vm") return f;
    // old register -> new register + 1 (0: not seen yet); a typed array, as this runs on every build.
    const renamed = new Int32Array(f.registerFileSize);
    // new register -> old one, for error messages (FunctionInfo.builtRegisters).
    const oldOf: number[] = [];
    let next = 0;
    for (; next < f.numArgs; next++) {
      renamed[next] = next + 1;
      oldOf.push(next);
    }
    const rename = (reg: number): number => {
      if (reg < 0) return reg;
      if (renamed[reg] === 0) {
        renamed[reg] = ++next;
        oldOf.push(reg);
      }
      return renamed[reg] - 1;
    };
    for (let i = f.start; i < f.end; i++) cursor.seek(i).renameRegisters(rename);
    // The builder's numbers, when any moved (composed with an earlier formalize's map).
    const earlier = f.builtRegisters;
    const built = Int32Array.from(oldOf, (old) => earlier?.[old] ?? old);
    const moved = built.some((old, now) => old !== now);
    const { builtRegisters: _, ...rest } = f;
    return moved
      ? { ...rest, registerFileSize: next, builtRegisters: built }
      : { ...rest, registerFileSize: next };
  });
  return { ...p, functions };
}
