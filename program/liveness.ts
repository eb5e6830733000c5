/**
 * Liveness (seed 003): where each register's value can be released because
 * no path reads it again. Computed on the control-flow graph of one VM
 * function (basic blocks split at jumps and jump targets, backward dataflow
 * to a fixed point), so `If` branches and `Goto` loops are handled: a value
 * read inside a loop stays live around the back edge.
 *
 * The result is kept beside the code, never written into it: the VM computes
 * it when it loads a function, so `as_text()` and `save()` stay exactly what
 * the user built (and what TVM would print), and an executable saved with
 * liveness on or off differs only in one flag.
 *
 * Aliasing needs no analysis here: a release drops the register's reference,
 * and tuples, closures and other registers holding the same value keep
 * theirs (ground/object.ts), so a shared value lives until its last holder
 * lets go.
 *
 * Cost. Live sets are bitsets over the function's registers, and the
 * worklist starts from the last block, so code without loops settles in one
 * visit per block and each loop adds a visit per block it contains: time is
 * the number of blocks times the register words, plus the size of the code.
 * (Visiting first blocks first, as an earlier version did, made a function
 * of K branches over K registers cost K³.)
 *
 * What the VM relies on. Every register that holds a value at a program
 * point is live there: a value is released after its last read, a result
 * nobody reads is released at once, and on entry to a block everything live
 * out of a predecessor but not live into the block is released. So a `Call`
 * that writes a register it does not read finds that register empty, and a
 * `Ret` finds every register but its result empty.
 *
 * @module
 */

import { InstructionCursor } from "./decoder.ts";
import type { FunctionInfo, ProgramData } from "./program_data.ts";

/** Release points of one function, indexed by instruction (relative to the function). */
export interface Releases {
  /**
   * Registers to release right after instruction pc runs (null: none): those
   * it read or wrote that are dead afterwards. Never more than the registers
   * the instruction names, so the lists together are as long as the code.
   */
  readonly after: (readonly number[] | null)[];
  /**
   * Registers to release on entering instruction pc, which starts a block
   * (null: none): live out of a predecessor (or an input, for pc 0) and dead
   * here. Releasing one that holds nothing does nothing, so the list is the
   * same whichever predecessor control came from.
   */
  readonly onEntry: (readonly number[] | null)[];
}

/** What one instruction reads, writes and where control goes next (relative pcs made absolute). */
interface Access {
  uses: number[];
  def: number;
  succ: number[];
}

function accessOf(c: InstructionCursor, f: FunctionInfo, pc: number): Access {
  c.seek(f.start + pc);
  const uses: number[] = [];
  c.forEachRead((r) => {
    if (r >= 0) uses.push(r);
  });
  return { uses, def: c.written(), succ: c.successors().map((d) => pc + d) };
}

/** Registers of `words` 32-bit words per set, `count` sets in one array. */
class BitSets {
  readonly words: number;
  readonly bits: Uint32Array;
  constructor(registers: number, count: number) {
    this.words = (registers + 31) >>> 5;
    this.bits = new Uint32Array(this.words * count);
  }
  add(set: number, r: number): void {
    this.bits[set * this.words + (r >>> 5)] |= 1 << (r & 31);
  }
  remove(set: number, r: number): void {
    this.bits[set * this.words + (r >>> 5)] &= ~(1 << (r & 31));
  }
  has(set: number, r: number): boolean {
    return (this.bits[set * this.words + (r >>> 5)] & (1 << (r & 31))) !== 0;
  }
}

/** The registers of bit word `w` set in `bits` (w-th word holds registers 32w..32w+31), appended to `out`. */
function pushBits(bits: number, w: number, out: number[]): void {
  while (bits !== 0) {
    const low = bits & -bits;
    out.push(w * 32 + 31 - Math.clz32(low));
    bits ^= low;
  }
}

/** Computes the release points of VM function `f`. */
export function computeReleases(ex: ProgramData, f: FunctionInfo): Releases {
  const n = f.end - f.start;
  const acc: Access[] = [];
  const cursor = new InstructionCursor(ex);
  for (let pc = 0; pc < n; pc++) acc.push(accessOf(cursor, f, pc));

  // Basic blocks: leaders are the entry, jump targets and instructions after a branch.
  const leader = new Uint8Array(n + 1);
  leader[0] = 1;
  for (let pc = 0; pc < n; pc++) {
    const s = acc[pc].succ;
    if (s.length !== 1 || s[0] !== pc + 1) {
      for (const t of s) if (t >= 0 && t <= n) leader[t] = 1;
      if (pc + 1 <= n) leader[pc + 1] = 1;
    }
  }
  const starts: number[] = [];
  for (let pc = 0; pc < n; pc++) if (leader[pc]) starts.push(pc);
  const blockOf = new Int32Array(n);
  starts.forEach((s, b) => {
    const end = b + 1 < starts.length ? starts[b + 1] : n;
    for (let pc = s; pc < end; pc++) blockOf[pc] = b;
  });
  const nb = starts.length;
  const blockEnd = (b: number) => (b + 1 < nb ? starts[b + 1] : n);
  const succs: number[][] = [];
  const preds: number[][] = Array.from({ length: nb }, () => []);
  for (let b = 0; b < nb; b++) {
    const last = blockEnd(b) - 1;
    const s = acc[last].succ.filter((t) => t >= 0 && t < n).map((t) => blockOf[t]);
    succs.push(s);
    for (const t of s) preds[t].push(b);
  }

  // gen (read before written in the block) and kill (written) per block.
  const registers = f.registerFileSize;
  const gen = new BitSets(registers, nb), kill = new BitSets(registers, nb);
  for (let b = 0; b < nb; b++) {
    for (let pc = blockEnd(b) - 1; pc >= starts[b]; pc--) {
      const a = acc[pc];
      if (a.def >= 0) {
        gen.remove(b, a.def);
        kill.add(b, a.def);
      }
      for (const u of a.uses) gen.add(b, u);
    }
  }

  // Backward dataflow to a fixed point: liveIn = gen ∪ (liveOut − kill). The
  // worklist pops the last block first, so a block is usually visited after
  // its successors.
  const W = gen.words;
  const liveIn = new BitSets(registers, nb), liveOut = new BitSets(registers, nb);
  const inBits = liveIn.bits, outBits = liveOut.bits, genBits = gen.bits, killBits = kill.bits;
  inBits.set(genBits);
  const queued = new Uint8Array(nb).fill(1);
  const work: number[] = [];
  for (let b = 0; b < nb; b++) work.push(b);
  while (work.length > 0) {
    const b = work.pop()!;
    queued[b] = 0;
    const base = b * W;
    for (const s of succs[b]) {
      for (let w = 0; w < W; w++) outBits[base + w] |= inBits[s * W + w];
    }
    let grew = false;
    for (let w = 0; w < W; w++) {
      // `>>> 0`: bitwise results are int32, the array's elements uint32.
      const next = (inBits[base + w] | (outBits[base + w] & ~killBits[base + w])) >>> 0;
      if (next !== inBits[base + w]) {
        inBits[base + w] = next;
        grew = true;
      }
    }
    if (grew) {
      for (const p of preds[b]) {
        if (!queued[p]) {
          queued[p] = 1;
          work.push(p);
        }
      }
    }
  }

  const after: (number[] | null)[] = new Array(n).fill(null);
  const onEntry: (number[] | null)[] = new Array(n).fill(null);
  const live = new BitSets(registers, 1);
  for (let b = 0; b < nb; b++) {
    live.bits.set(outBits.subarray(b * W, b * W + W));
    for (let pc = blockEnd(b) - 1; pc >= starts[b]; pc--) {
      const a = acc[pc];
      if (a.succ.length > 0) {
        // Ret is skipped: its value goes to the caller and the frame ends anyway.
        let dead: number[] | null = null;
        const touch = (r: number) => {
          if (!live.has(0, r) && !(dead ??= []).includes(r)) dead.push(r);
        };
        for (const u of a.uses) touch(u);
        if (a.def >= 0) touch(a.def);
        if (dead !== null) after[pc] = (dead as number[]).sort((x, y) => x - y);
      }
      if (a.def >= 0) live.remove(0, a.def);
      for (const u of a.uses) live.add(0, u);
    }
    // Dead on entry: live out of some predecessor (or an input, at pc 0), not live in here.
    const incoming = live.bits.fill(0);
    if (b === 0) { for (let r = 0; r < f.numArgs; r++) live.add(0, r); }
    for (const p of preds[b]) {
      for (let w = 0; w < W; w++) incoming[w] |= outBits[p * W + w];
    }
    const dead: number[] = [];
    for (let w = 0; w < W; w++) pushBits(incoming[w] & ~inBits[b * W + w], w, dead);
    if (dead.length > 0) onEntry[starts[b]] = dead;
  }
  return { after, onEntry };
}
