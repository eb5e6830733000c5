/**
 * The instruction decoder: the only code that reads instruction words.
 * Everything else — the verifier, liveness, formalize, both dumps, the VM's
 * load step — asks it what an instruction holds.
 *
 * `InstructionCursor` is a zero-allocation view that moves from instruction
 * to instruction, for passes over whole programs (a million instructions
 * build and load in a fraction of a second).
 *
 * Field positions and the queries (`reads`, `written`, `successors`,
 * operands) come from the opcode table in program/bytecode.ts. The cursor
 * trusts the layout: run `layoutProblems` first on code from outside.
 *
 * @module
 */

import {
  ArgKind,
  argKind,
  argValue,
  encodeArg,
  type FieldRole,
  Opcode,
  type OpcodeInfo,
  opcodeInfo,
  OPCODES,
} from "./bytecode.ts";
import type { Code } from "./program_data.ts";

/** Word offsets of each role's field within an instruction (1 = first word after the opcode). */
interface FieldPositions {
  readonly write: number;
  readonly read: number;
  readonly function: number;
  readonly count: number;
  readonly jump: number;
  /** Where operand words start. */
  readonly operands: number;
}

function positionsOf(info: OpcodeInfo): FieldPositions {
  const at = (role: FieldRole) => {
    const i = info.fields.findIndex((f) => f.role === role);
    return i < 0 ? -1 : 1 + i;
  };
  return {
    write: at("write"),
    read: at("read"),
    function: at("function"),
    count: at("count"),
    jump: at("jump"),
    operands: 1 + info.fields.length,
  };
}

/** Field positions by opcode, derived once from the table. */
const POSITIONS: readonly (FieldPositions | undefined)[] = (() => {
  const table: (FieldPositions | undefined)[] = [];
  for (const [op, info] of Object.entries(OPCODES)) table[Number(op)] = positionsOf(info);
  return table;
})();

/** Marks a field the instruction does not have. */
export const NO_FIELD = -0x7fffffff;

/** A view of one instruction at a time; `seek` moves it. */
export class InstructionCursor {
  readonly #data: Float64Array;
  readonly #offsets: Uint32Array;
  #at = 0;
  #index = -1;
  #pos: FieldPositions = POSITIONS[Opcode.Call]!;

  /** A cursor over `code`, before its first instruction. */
  constructor(code: Code) {
    this.#data = code.instrData;
    this.#offsets = code.instrOffset;
  }

  /** Moves to instruction `index` (global, not relative to a function). */
  seek(index: number): this {
    this.#index = index;
    this.#at = this.#offsets[index];
    this.#pos = POSITIONS[this.#data[this.#at]]!;
    return this;
  }

  /** The instruction's global index. */
  get index(): number {
    return this.#index;
  }

  /** Its opcode. */
  get op(): Opcode {
    return this.#data[this.#at] as Opcode;
  }

  /** Its opcode table entry. */
  get info(): OpcodeInfo {
    return OPCODES[this.op];
  }

  /** The register it writes (`%void` included), or `NO_FIELD`. */
  get dst(): number {
    const p = this.#pos.write;
    return p < 0 ? NO_FIELD : this.#data[this.#at + p];
  }

  /** The register it reads as a fixed field (Ret's result, If's condition), or `NO_FIELD`. */
  get register(): number {
    const p = this.#pos.read;
    return p < 0 ? NO_FIELD : this.#data[this.#at + p];
  }

  /** The function-table index it calls, or `NO_FIELD`. */
  get func(): number {
    const p = this.#pos.function;
    return p < 0 ? NO_FIELD : this.#data[this.#at + p];
  }

  /** Its relative jump, or `NO_FIELD`. */
  get jump(): number {
    const p = this.#pos.jump;
    return p < 0 ? NO_FIELD : this.#data[this.#at + p];
  }

  /** Number of operand words. */
  get argCount(): number {
    const p = this.#pos.count;
    return p < 0 ? 0 : this.#data[this.#at + p];
  }

  /** Operand word `k`. */
  argWord(k: number): number {
    return this.#data[this.#at + this.#pos.operands + k];
  }

  /** The kind of operand `k`. */
  argKind(k: number): ArgKind {
    return argKind(this.argWord(k));
  }

  /** The value of operand `k` (register number, immediate, constant or function index). */
  argValue(k: number): number {
    return argValue(this.argWord(k));
  }

  /** Whether control can continue at the next instruction. */
  get fallsThrough(): boolean {
    return OPCODES[this.op].fallsThrough;
  }

  /**
   * Calls `fn` with each register the instruction reads, in operand order:
   * register operands (special registers included) and the `read` field.
   */
  forEachRead(fn: (register: number) => void): void {
    const n = this.argCount;
    for (let k = 0; k < n; k++) {
      const w = this.argWord(k);
      if (argKind(w) === ArgKind.Register) fn(argValue(w));
    }
    const p = this.#pos.read;
    if (p >= 0) fn(this.#data[this.#at + p]);
  }

  /** Whether the instruction calls function-table entry `index` or passes it as `f[...]`. */
  refersToFunction(index: number): boolean {
    if (this.func === index) return true;
    const n = this.argCount;
    for (let k = 0; k < n; k++) {
      const w = this.argWord(k);
      if (argKind(w) === ArgKind.FuncIdx && argValue(w) === index) return true;
    }
    return false;
  }

  /**
   * Rewrites every register the instruction names through `rename` (special
   * registers are passed too), in the order it uses them: operands, the read
   * field, then the written register. For formalize, which renumbers.
   */
  renameRegisters(rename: (register: number) => number): void {
    const data = this.#data, at = this.#at, pos = this.#pos;
    const n = this.argCount;
    for (let k = 0; k < n; k++) {
      const w = data[at + pos.operands + k];
      if (argKind(w) === ArgKind.Register) {
        data[at + pos.operands + k] = encodeArg(ArgKind.Register, rename(argValue(w)));
      }
    }
    if (pos.read >= 0) data[at + pos.read] = rename(data[at + pos.read]);
    if (pos.write >= 0) data[at + pos.write] = rename(data[at + pos.write]);
  }

  /** The register written (`>= 0`), or -1 when none (no `write` field, or `%void`). */
  written(): number {
    const dst = this.dst;
    return dst >= 0 ? dst : -1;
  }

  /**
   * The instructions control can reach next, relative to this one's pc:
   * the fall-through (`+1`) first when there is one, then the jump target.
   */
  successors(): number[] {
    const out: number[] = [];
    if (this.fallsThrough) out.push(1);
    const j = this.jump;
    if (j !== NO_FIELD) out.push(j);
    return out;
  }
}

/** A problem with the layout of the code words, at a word position. */
export interface LayoutProblem {
  /** The instruction concerned (-1: the code as a whole). */
  readonly index: number;
  /** The word position in `instrData`. */
  readonly word: number;
  /** What is wrong. */
  readonly message: string;
}

/**
 * Checks that `code` decodes into whole instructions: every word a safe
 * integer, offsets increasing from 0, each instruction a known opcode that
 * fills exactly the words up to the next one, operand counts non-negative.
 * The cursor may be used only on code with no layout problems.
 */
export function layoutProblems(code: Code): LayoutProblem[] {
  const problems: LayoutProblem[] = [];
  const data = code.instrData, offsets = code.instrOffset;
  for (let i = 0; i < data.length; i++) {
    if (!Number.isSafeInteger(data[i])) {
      problems.push({ index: -1, word: i, message: `word ${i} is not an integer` });
      return problems; // every later check reads words as integers
    }
  }
  for (let i = 0; i < offsets.length; i++) {
    const at = offsets[i];
    const next = i + 1 < offsets.length ? offsets[i + 1] : data.length;
    if (at >= data.length || (i === 0 && at !== 0) || next <= at) {
      problems.push({
        index: i,
        word: at,
        message: `instruction ${i} has an invalid offset ${at}`,
      });
      continue;
    }
    const info = opcodeInfo(data[at]);
    if (info === undefined) {
      problems.push({
        index: i,
        word: at,
        message: `instruction ${i} has unknown opcode ${data[at]}`,
      });
      continue;
    }
    const pos = POSITIONS[data[at]]!;
    const fixedEnd = at + pos.operands;
    const count = pos.count >= 0 && fixedEnd <= next ? data[at + pos.count] : 0;
    if (fixedEnd > next || count < 0 || fixedEnd + count !== next) {
      problems.push({
        index: i,
        word: at,
        message: `instruction ${i} (${info.name}) does not fit its ${next - at} words`,
      });
    }
  }
  if (offsets.length === 0 && data.length > 0) {
    problems.push({ index: -1, word: 0, message: `${data.length} words hold no instruction` });
  }
  return problems;
}
