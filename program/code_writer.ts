/**
 * `CodeWriter`: appends instructions in the layout of program/bytecode.ts to
 * growing typed arrays, the encoding side of program/decoder.ts. The builder
 * writes code only through it, so instruction layout is known in this layer
 * alone.
 *
 * @module
 */

import { ArgKind, argKind, argValue, encodeArg, Opcode } from "./bytecode.ts";
import type { Code } from "./program_data.ts";

/** Appends encoded instructions. */
export class CodeWriter {
  #data = new Float64Array(1024);
  #length = 0;
  #offsets = new Uint32Array(256);
  #count = 0;

  /** Number of instructions written so far (the index of the next one). */
  get count(): number {
    return this.#count;
  }

  /**
   * `Call`: calls function-table entry `func` with the first `argc` operand
   * words of `args` (already encoded) and writes the result to `dst`.
   */
  call(dst: number, func: number, args: Float64Array, argc: number): void {
    const at = this.#reserve(4 + argc);
    const data = this.#data;
    data[at] = Opcode.Call;
    data[at + 1] = dst;
    data[at + 2] = func;
    data[at + 3] = argc;
    for (let k = 0; k < argc; k++) data[at + 4 + k] = args[k];
  }

  /** `Ret`: returns register `result`. */
  ret(result: number): void {
    const at = this.#reserve(2);
    this.#data[at] = Opcode.Ret;
    this.#data[at + 1] = result;
  }

  /** `Goto`: jumps by `offset` instructions. */
  goto(offset: number): void {
    const at = this.#reserve(2);
    this.#data[at] = Opcode.Goto;
    this.#data[at + 1] = offset;
  }

  /** `If`: falls through when register `cond` holds a true value, else jumps by `falseOffset`. */
  if(cond: number, falseOffset: number): void {
    const at = this.#reserve(3);
    this.#data[at] = Opcode.If;
    this.#data[at + 1] = cond;
    this.#data[at + 2] = falseOffset;
  }

  /**
   * Drops every instruction from index `count` on, as if they had never been
   * written (the builder's undo when a `function()` body throws).
   */
  truncate(count: number): void {
    if (count >= this.#count) return;
    this.#length = this.#offsets[count];
    this.#count = count;
  }

  /**
   * Sets the jump of `Goto` or `If` instruction `index` to `offset` (the builder's labels,
   * resolved once the target is known).
   */
  setJump(index: number, offset: number): void {
    const at = this.#offsets[index];
    const op = this.#data[at];
    if (op === Opcode.Goto) this.#data[at + 1] = offset;
    else if (op === Opcode.If) this.#data[at + 2] = offset;
    else throw new TypeError(`setJump: instruction ${index} is not a Goto or If`);
  }

  /**
   * Takes instructions `from`..`to - 1` out, moving the later ones down (the
   * builder's `remove_function` and `replace`). Jumps are relative and stay
   * inside a function, so removing whole functions leaves every jump right.
   */
  remove(from: number, to: number): void {
    if (!(0 <= from && from <= to && to <= this.#count)) {
      throw new RangeError(
        `remove(${from}, ${to}): not a range of the ${this.#count} instructions`,
      );
    }
    if (from === to) return;
    const wordFrom = this.#offsets[from];
    const wordTo = to === this.#count ? this.#length : this.#offsets[to];
    const words = wordTo - wordFrom;
    this.#data.copyWithin(wordFrom, wordTo, this.#length);
    for (let i = to; i < this.#count; i++) {
      this.#offsets[i - (to - from)] = this.#offsets[i] - words;
    }
    this.#count -= to - from;
    this.#length -= words;
  }

  /** Whether any instruction calls function-table entry `index` or passes it as `f[...]`. */
  refersToFunction(index: number): boolean {
    let found = false;
    this.#forEachFunctionWord((at) => {
      if (this.#data[at] === index) found = true;
      return this.#data[at];
    }, (at) => {
      if (argValue(this.#data[at]) === index) found = true;
      return this.#data[at];
    });
    return found;
  }

  /**
   * Renumbers the function-table references after entry `index` is deleted:
   * every index above it goes down by one. No instruction may refer to `index`.
   */
  dropFunction(index: number): void {
    this.#forEachFunctionWord(
      (at) => this.#data[at] > index ? this.#data[at] - 1 : this.#data[at],
      (at) => {
        const value = argValue(this.#data[at]);
        return value > index ? encodeArg(ArgKind.FuncIdx, value - 1) : this.#data[at];
      },
    );
  }

  /**
   * Visits every word that holds a function-table index: a `Call`'s callee
   * (`callee`) and its `f[...]` operands (`operand`); each returns the new word.
   */
  #forEachFunctionWord(callee: (at: number) => number, operand: (at: number) => number): void {
    const data = this.#data;
    for (let i = 0; i < this.#count; i++) {
      const at = this.#offsets[i];
      if (data[at] !== Opcode.Call) continue;
      data[at + 2] = callee(at + 2);
      const argc = data[at + 3];
      for (let k = 0; k < argc; k++) {
        if (argKind(data[at + 4 + k]) === ArgKind.FuncIdx) data[at + 4 + k] = operand(at + 4 + k);
      }
    }
  }

  /** A copy of the code written so far; later writes do not change it. */
  snapshot(): Code {
    return {
      instrOffset: this.#offsets.slice(0, this.#count),
      instrData: this.#data.slice(0, this.#length),
    };
  }

  /** Starts an instruction of `size` words; returns where its words go. */
  #reserve(size: number): number {
    if (this.#count === this.#offsets.length) {
      const grown = new Uint32Array(this.#offsets.length * 2);
      grown.set(this.#offsets);
      this.#offsets = grown;
    }
    const at = this.#length;
    this.#offsets[this.#count++] = at;
    if (at + size > this.#data.length) {
      const grown = new Float64Array(Math.max(this.#data.length * 2, at + size));
      grown.set(this.#data);
      this.#data = grown;
    }
    this.#length = at + size;
    return at;
  }
}
