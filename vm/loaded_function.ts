/**
 * Load-time decoding. When a VM loads an executable it turns each VM
 * function's instructions (read through program/decoder.ts) into `Instr`
 * records once, so the dispatch loop never decodes operands:
 *
 * - every operand becomes a slot of the frame's register array: registers
 *   are slots `0..R-1`, and each distinct constant, immediate, function
 *   reference, `%vm` and `%void` used by the function gets a slot after them,
 *   filled once in a template that each frame copies. A `Call` then reads
 *   all its arguments the same way, `regs[slot]`.
 * - the callee is resolved to a JS function (a packed function from the
 *   registry, or the VM's entry for a VM function).
 * - the liveness release points are attached to the instructions: after an
 *   instruction (its own list) and on entry to a block (one list per block,
 *   shared by every edge that reaches it, so no list is ever copied).
 *
 * All `Instr` objects have one shape, so the loop's property reads stay
 * monomorphic.
 *
 * @module
 */

import {
  ArgKind,
  argKind,
  argValue,
  Opcode,
  VM_REGISTER,
  VOID_REGISTER,
} from "../program/bytecode.ts";
import { InstructionCursor } from "../program/decoder.ts";
import type { Releases } from "../program/liveness.ts";
import type { FunctionInfo, ProgramData } from "../program/program_data.ts";
import { builtInstructionText, instructionText } from "../program/text_format.ts";

/**
 * Opcodes of decoded instructions: `Call` is split by argument count so the
 * loop's one `switch` also picks the call form.
 */
export const DecodedOp = {
  Call0: 10,
  Call1: 11,
  Call2: 12,
  Call3: 13,
  Call4: 14,
  CallN: 15,
  Ret: 2,
  Goto: 3,
  If: 4,
} as const;

/** A callable as the loop sees it. */
export type Callee = (...args: unknown[]) => unknown;

/** One decoded instruction. */
export class Instr {
  /** The opcode. */
  readonly op: number;
  /** Call: destination slot, or -1 to discard. Ret/If: the register read (in `a0`). */
  readonly dst: number;
  /** Call: the function to call. */
  fn: Callee;
  /** Call: the callee's name, for errors and instruments. */
  readonly fnName: string;
  /** Call: argument count. */
  readonly argc: number;
  /** First four argument slots (also Ret's result and If's condition in `a0`). */
  readonly a0: number;
  readonly a1: number;
  readonly a2: number;
  readonly a3: number;
  /** All argument slots. */
  readonly args: Int32Array;
  /** Goto/If: relative jump. */
  readonly jump: number;
  /** Registers released after this instruction runs (If: whichever way it goes), or null. */
  readonly after: Int32Array | null;
  /**
   * Registers released on entering this instruction, however control gets
   * there (it starts a block), or null. Releasing an empty register does
   * nothing, so one list serves every predecessor.
   */
  readonly entry: Int32Array | null;
  /**
   * Call: liveness guarantees that `dst` is empty when the call stores its
   * result (it is not read by the call and was released after its last use),
   * so the store need not release an old value.
   */
  readonly fresh: boolean;
  /** Index of the instruction in the executable, for `as_text`-style messages. */
  readonly index: number;

  constructor(
    op: number,
    dst: number,
    fn: Callee,
    fnName: string,
    args: Int32Array,
    jump: number,
    after: Int32Array | null,
    entry: Int32Array | null,
    fresh: boolean,
    index: number,
  ) {
    this.op = op;
    this.dst = dst;
    this.fn = fn;
    this.fnName = fnName;
    this.argc = args.length;
    this.a0 = args.length > 0 ? args[0] : -1;
    this.a1 = args.length > 1 ? args[1] : -1;
    this.a2 = args.length > 2 ? args[2] : -1;
    this.a3 = args.length > 3 ? args[3] : -1;
    this.args = args;
    this.jump = jump;
    this.after = after;
    this.entry = entry;
    this.fresh = fresh;
    this.index = index;
  }
}

/** What backward jumps charge: an invocation's fuel (vm/invocation.ts). */
export interface FuelBudget {
  /** Fuel left before the next `refill`. */
  budget: number;
  /** Checks the limits and takes more fuel, or throws. */
  refill(): void;
}

/** A VM function ready to run. */
export interface LoadedFunction {
  /** Its table entry. */
  readonly info: FunctionInfo;
  /** Decoded instructions. */
  readonly code: Instr[];
  /** Number of real registers (slots released at frame end). */
  readonly registers: number;
  /** Initial slot values: registers undefined, then the operand slots. */
  readonly template: unknown[];
  /** Number of code words of the function (the size generated source is bounded by). */
  readonly words: number;
  /** Total length of the release lists attached to block entries. */
  readonly entryReleaseCount: number;
  /** The specialized form of the loop for this function, when there is one (vm/specialized_dispatch.ts). */
  specialized:
    | ((frame: {
      regs: unknown[];
      pc: number;
      pending: Promise<unknown> | null;
      readonly inv: FuelBudget;
    }) => unknown)
    | null;
  /** The compiled form, when the VM runs in compiled mode and could compile it (vm/compiled_mode.ts). */
  compiled: ((args: readonly unknown[], inv: FuelBudget, resumeAt?: number) => unknown) | null;
  /** Characters of JavaScript generated for this function (specialized and compiled forms). */
  sourceLength: number;
}

/** How operands resolve to values. */
export interface OperandResolver {
  /** The value of constant `index` (on the VM's device). */
  constant(index: number): unknown;
  /** The value passed for `f[index]`. */
  functionRef(index: number): unknown;
  /** The callee for a `Call` of function-table entry `index`. */
  callee(index: number): Callee;
  /** The `%vm` value. */
  vmState(): unknown;
}

const noCallee: Callee = () => {
  throw new Error("not a call");
};

/** Decodes `f` for the loop. */
export function loadFunction(
  ex: ProgramData,
  f: FunctionInfo,
  resolve: OperandResolver,
  releases: Releases | null,
): LoadedFunction {
  // Built by push, not `new Array(n)`: a holey array would make every register read check for holes.
  const template: unknown[] = [];
  for (let r = 0; r < f.registerFileSize; r++) template.push(undefined);
  const slotOf = new Map<string, number>();
  const slot = (key: string, value: () => unknown): number => {
    let s = slotOf.get(key);
    if (s === undefined) {
      s = template.length;
      template.push(value());
      slotOf.set(key, s);
    }
    return s;
  };
  const operandSlot = (word: number): number => {
    const v = argValue(word);
    switch (argKind(word)) {
      case ArgKind.Register:
        if (v === VM_REGISTER) return slot("vm", () => resolve.vmState());
        if (v === VOID_REGISTER) return slot("void", () => null);
        return v;
      case ArgKind.Immediate:
        return slot(`i${v}`, () => v);
      case ArgKind.ConstIdx:
        return slot(`c${v}`, () => resolve.constant(v));
      case ArgKind.FuncIdx:
        return slot(`f${v}`, () => resolve.functionRef(v));
    }
  };
  // Liveness gives releases after an instruction and on entry to a block.
  const n = f.end - f.start;
  const toInt32 = (list: readonly number[] | null | undefined) =>
    list === null || list === undefined || list.length === 0 ? null : Int32Array.from(list);
  const cursor = new InstructionCursor(ex);
  const code: Instr[] = [];
  let words = 0, entryReleaseCount = 0;
  for (let i = f.start; i < f.end; i++) {
    const c = cursor.seek(i);
    const pc = i - f.start;
    words += 1 + c.info.fields.length + c.argCount;
    const entry = toInt32(releases?.onEntry[pc]);
    entryReleaseCount += entry?.length ?? 0;
    switch (c.op) {
      case Opcode.Call: {
        const count = c.argCount;
        const args = new Int32Array(count);
        for (let k = 0; k < count; k++) args[k] = operandSlot(c.argWord(k));
        const fi = c.func;
        let dst = c.dst >= 0 ? c.dst : -1;
        const op = count <= 4 ? DecodedOp.Call0 + count : DecodedOp.CallN;
        let released = releases?.after[pc] ?? [];
        const readsDst = dst >= 0 && args.includes(dst);
        if (dst >= 0 && released.includes(dst) && !readsDst) {
          // The result is dead on arrival: discard it instead of storing and releasing it.
          // (When dst is also an argument, the old value must still be released.)
          released = released.filter((r) => r !== dst);
          dst = -1;
        }
        const fresh = releases !== null && !readsDst;
        code.push(
          new Instr(
            op,
            dst,
            resolve.callee(fi),
            ex.functions[fi].name,
            args,
            0,
            toInt32(released),
            entry,
            fresh,
            i,
          ),
        );
        break;
      }
      case Opcode.Ret:
        code.push(
          new Instr(
            DecodedOp.Ret,
            -1,
            noCallee,
            "",
            Int32Array.of(c.register),
            0,
            null,
            entry,
            false,
            i,
          ),
        );
        break;
      case Opcode.If:
      case Opcode.Goto: {
        const isIf = c.op === Opcode.If;
        code.push(
          new Instr(
            isIf ? DecodedOp.If : DecodedOp.Goto,
            -1,
            noCallee,
            "",
            isIf ? Int32Array.of(c.register) : new Int32Array(0),
            c.jump,
            toInt32(releases?.after[pc]),
            entry,
            false,
            i,
          ),
        );
        break;
      }
    }
  }
  if (code.length !== n) throw new Error(`decoded ${code.length} of ${n} instructions`);
  return {
    info: f,
    code,
    registers: f.registerFileSize,
    template,
    words,
    entryReleaseCount,
    specialized: null,
    compiled: null,
    sourceLength: 0,
  };
}

/** The text of a decoded instruction, for error messages. */
export function instrText(ex: ProgramData, ins: Instr): string {
  return instructionText(ex, ins.index).trimEnd();
}

/** The instruction as the builder wrote it, when formalize renumbered its registers; else `""`. */
export function builtInstrText(ex: ProgramData, ins: Instr): string {
  return builtInstructionText(ex, ins.index).trimEnd();
}
