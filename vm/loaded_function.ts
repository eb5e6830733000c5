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
 * - the liveness release points are attached to the instructions.
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
import { instructionText } from "../program/text_format.ts";

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
  /** Registers released after this instruction (If: when it falls through), or null. */
  readonly after: Int32Array | null;
  /** If: registers released when it jumps, or null. */
  readonly afterJump: Int32Array | null;
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
    afterJump: Int32Array | null,
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
    this.afterJump = afterJump;
    this.index = index;
  }
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
  /** Inputs no instruction reads: released as the frame starts. */
  readonly entryReleases: Int32Array | null;
  /** The specialized form of the loop for this function, when there is one (vm/specialized_dispatch.ts). */
  specialized:
    | ((frame: { regs: unknown[]; pc: number; pending: Promise<unknown> | null }) => unknown)
    | null;
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
  // Entry releases are moved onto the edges that reach the block (the
  // fall-through or jump of each predecessor), so the loop never checks for them.
  const n = f.end - f.start;
  const after = (pc: number) => releases?.after[pc] ?? [];
  const entry = (pc: number) => (pc >= 0 && pc < n ? releases?.onEntry[pc] ?? [] : []);
  const toInt32 = (...lists: (readonly number[])[]) => {
    const all = [...new Set(lists.flat())].sort((a, b) => a - b);
    return all.length > 0 ? Int32Array.from(all) : null;
  };
  const cursor = new InstructionCursor(ex);
  const code: Instr[] = [];
  for (let i = f.start; i < f.end; i++) {
    const c = cursor.seek(i);
    const pc = i - f.start;
    switch (c.op) {
      case Opcode.Call: {
        const count = c.argCount;
        const args = new Int32Array(count);
        for (let k = 0; k < count; k++) args[k] = operandSlot(c.argWord(k));
        const fi = c.func;
        let dst = c.dst >= 0 ? c.dst : -1;
        const op = count <= 4 ? DecodedOp.Call0 + count : DecodedOp.CallN;
        let released = [...after(pc), ...entry(pc + 1)];
        if (dst >= 0 && released.includes(dst) && !Array.from(args).includes(dst)) {
          // The result is dead on arrival: discard it instead of storing and releasing it.
          // (When dst is also an argument, the old value must still be released.)
          released = released.filter((r) => r !== dst);
          dst = -1;
        }
        const rel = toInt32(released);
        code.push(
          new Instr(op, dst, resolve.callee(fi), ex.functions[fi].name, args, 0, rel, null, i),
        );
        break;
      }
      case Opcode.Ret:
        code.push(
          new Instr(DecodedOp.Ret, -1, noCallee, "", Int32Array.of(c.register), 0, null, null, i),
        );
        break;
      case Opcode.If: {
        const jump = c.jump;
        const rel = toInt32(after(pc), entry(pc + 1));
        const relJump = toInt32(after(pc), entry(pc + jump));
        code.push(
          new Instr(
            DecodedOp.If,
            -1,
            noCallee,
            "",
            Int32Array.of(c.register),
            jump,
            rel,
            relJump,
            i,
          ),
        );
        break;
      }
      case Opcode.Goto: {
        const jump = c.jump;
        code.push(
          new Instr(
            DecodedOp.Goto,
            -1,
            noCallee,
            "",
            new Int32Array(0),
            jump,
            toInt32(entry(pc + jump)),
            null,
            i,
          ),
        );
        break;
      }
    }
  }
  const entryReleases = toInt32(entry(0));
  return {
    info: f,
    code,
    registers: f.registerFileSize,
    template,
    entryReleases,
    specialized: null,
  };
}

/** The text of a decoded instruction, for error messages. */
export function instrText(ex: ProgramData, ins: Instr): string {
  return instructionText(ex, ins.index).trimEnd();
}
