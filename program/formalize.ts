/**
 * Formalize: renumber each function's registers in order of first use, so a
 * program that writes `r(10000)` gets a register file of the size it needs
 * (seed 002). Inputs keep `%0..%{n-1}`; special registers are untouched.
 * Running it on a formalized executable changes nothing.
 *
 * @module
 */

import { ArgKind, argKind, argValue, encodeArg, Opcode } from "./bytecode.ts";
import { Executable, type FunctionInfo } from "./executable.ts";

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
  return formalizeInPlace(ex, ex.instrData.slice());
}

/**
 * Formalize, writing the renumbered code into `data` (a copy of
 * `ex.instrData` that the caller owns): saves a copy of the whole code on
 * every build. @internal
 */
export function formalizeInPlace(ex: Executable, data: Float64Array): Executable {
  const functions: FunctionInfo[] = ex.functions.map((f) => {
    if (f.kind !== "vm") return f;
    // old register -> new register + 1 (0: not seen yet); a typed array, as this runs on every build.
    const renamed = new Int32Array(f.registerFileSize);
    let next = 0;
    for (; next < f.numArgs; next++) renamed[next] = next + 1;
    const rename = (reg: number): number => {
      if (reg < 0) return reg;
      if (renamed[reg] === 0) renamed[reg] = ++next;
      return renamed[reg] - 1;
    };
    for (let i = f.start; i < f.end; i++) {
      const at = ex.instrOffset[i];
      switch (data[at]) {
        case Opcode.Call: {
          const n = data[at + 3];
          for (let k = 0; k < n; k++) {
            const w = data[at + 4 + k];
            if (argKind(w) === ArgKind.Register) {
              data[at + 4 + k] = encodeArg(ArgKind.Register, rename(argValue(w)));
            }
          }
          data[at + 1] = rename(data[at + 1]);
          break;
        }
        case Opcode.Ret:
        case Opcode.If:
          data[at + 1] = rename(data[at + 1]);
          break;
      }
    }
    return { ...f, registerFileSize: next };
  });
  return new Executable({
    functions,
    constants: ex.constants,
    instrOffset: ex.instrOffset,
    instrData: data,
    liveness: ex.liveness,
    warnings: ex.warnings,
  });
}
