/**
 * The bytecode: instruction and operand layout, drawn once, and the single
 * opcode table that decoding, both dumps and the checker read.
 *
 * ## Words
 *
 * `instr_data` is a flat array of words; each word is a JS number holding a
 * safe integer (|w| < 2^53). TVM's ExecWord is an int64 whose operands pack
 * an 8-bit kind above a 56-bit value; a JS number has 53 bits of integer
 * precision (`2 ** 54 + 1 === 2 ** 54`), so that packing does not survive.
 * relaxvm packs the kind into the two low bits instead:
 *
 * ```text
 * operand word = value * 4 + kind        kind: 0 register  1 immediate
 *                                              2 constant  3 function
 * value        = floor(word / 4)          |value| <= 2^51 - 1
 * kind         = word - 4 * floor(word / 4)   (so negative immediates work)
 * ```
 *
 * Saved, each word is a little-endian float64, so typed-array copies move the
 * code section in and out at memory speed.
 *
 * ## Instructions (`instr_offset[i]` is where instruction i starts)
 *
 * ```text
 * Call   | 1 | dst | func_idx | num_args | arg_0 … arg_{n-1} |   4 + n words
 * Ret    | 2 | result_reg |                                     2 words
 * Goto   | 3 | pc_offset |                                      2 words
 * If     | 4 | cond_reg | false_offset |                         3 words
 * ```
 *
 * Opcodes start at 1 so a zeroed word is never a valid instruction. `dst`,
 * `result_reg` and `cond_reg` are plain register numbers (not operand
 * words); the special registers are negative: `%void` = -1, `%vm` = -2.
 * Offsets are relative, in instructions: `pc += pc_offset`.
 *
 * @module
 */

/** Operand kinds, as stored in the two low bits of an operand word. */
export const ArgKind = { Register: 0, Immediate: 1, ConstIdx: 2, FuncIdx: 3 } as const;
/** One of the `ArgKind` values. */
export type ArgKind = (typeof ArgKind)[keyof typeof ArgKind];

/** `%void`: as a destination, the result is discarded; as an argument, `null`. */
export const VOID_REGISTER = -1;
/** `%vm`: passes the running VM's state (for builtins such as `alloc_storage`). */
export const VM_REGISTER = -2;

/** Largest magnitude an operand value may have (2^51 - 1). */
export const MAX_OPERAND_VALUE = 2 ** 51 - 1;

/** Packs an operand into one word. */
export function encodeArg(kind: ArgKind, value: number): number {
  return value * 4 + kind;
}

/**
 * The kind of an operand word. Written with floor rather than `%`: words are
 * float64s, and a float `%` is a slow library call on the decoder's hot path.
 */
export function argKind(word: number): ArgKind {
  return (word - 4 * Math.floor(word / 4)) as ArgKind;
}

/** The value of an operand word. */
export function argValue(word: number): number {
  return Math.floor(word / 4);
}

/** Opcode numbers. */
export const Opcode = { Call: 1, Ret: 2, Goto: 3, If: 4 } as const;
/** One of the `Opcode` values. */
export type Opcode = (typeof Opcode)[keyof typeof Opcode];

/** What a fixed field of an instruction holds. */
export type FieldRole =
  /** A register written (`%void` allowed: the result is discarded). */
  | "write"
  /** A register read (a value register: not `%void` or `%vm`). */
  | "read"
  /** An index into the function table. */
  | "function"
  /** How many operand words follow the fixed fields. */
  | "count"
  /** A relative jump, in instructions. */
  | "jump";

/** One fixed field of an instruction. */
export interface FieldInfo {
  /** Its name, as in TVM's `Instruction`. */
  readonly name: string;
  /** What it holds. */
  readonly role: FieldRole;
}

/** What the opcode table says about one opcode. */
export interface OpcodeInfo {
  /** Name, as in TVM's `Opcode` enum. */
  readonly name: string;
  /** Spelling in `as_text()`. */
  readonly text: string;
  /** The fixed words after the opcode, in order. */
  readonly fields: readonly FieldInfo[];
  /** Whether operand words follow the fixed fields (their number is the `count` field). */
  readonly hasOperands: boolean;
  /** Whether control can continue at the next instruction. */
  readonly fallsThrough: boolean;
  /** What it does. */
  readonly meaning: string;
}

/**
 * The opcode table. The decoder (program/decoder.ts) derives every field
 * position and every query — registers read and written, successors,
 * operands — from it; the dumps take their spellings from it.
 */
export const OPCODES: Readonly<Record<Opcode, OpcodeInfo>> = {
  [Opcode.Call]: {
    name: "Call",
    text: "call",
    fields: [
      { name: "dst", role: "write" },
      { name: "func_idx", role: "function" },
      { name: "num_args", role: "count" },
    ],
    hasOperands: true,
    fallsThrough: true,
    meaning: "call function func_idx with the operands that follow; write the result to dst",
  },
  [Opcode.Ret]: {
    name: "Ret",
    text: "ret",
    fields: [{ name: "result", role: "read" }],
    hasOperands: false,
    fallsThrough: false,
    meaning: "return the value of register result to the caller",
  },
  [Opcode.Goto]: {
    name: "Goto",
    text: "goto",
    fields: [{ name: "pc_offset", role: "jump" }],
    hasOperands: false,
    fallsThrough: false,
    meaning: "jump by pc_offset instructions",
  },
  [Opcode.If]: {
    name: "If",
    text: "If",
    fields: [{ name: "cond", role: "read" }, { name: "false_offset", role: "jump" }],
    hasOperands: false,
    fallsThrough: true,
    meaning: "if register cond is nonzero (or true) continue, else jump by false_offset",
  },
};

/** The table entry for `opcode`, or `undefined` for a word that is no opcode. */
export function opcodeInfo(opcode: number): OpcodeInfo | undefined {
  return Object.hasOwn(OPCODES, opcode) ? OPCODES[opcode as Opcode] : undefined;
}
