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

import { ArgKind } from "./bytecode.ts";
import { InstructionCursor, NO_FIELD } from "./decoder.ts";
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

/** The registers of bit word `w` set in `bits` (word w holds registers 32w..32w+31), appended to `out`. */
function pushBits(bits: number, w: number, out: number[]): void {
  while (bits !== 0) {
    const low = bits & -bits;
    out.push(w * 32 + 31 - Math.clz32(low));
    bits ^= low;
  }
}

/**
 * What each instruction of a function reads and writes and where control
 * goes next, in flat arrays: reads of instruction pc are
 * `reads[readStart[pc] .. readStart[pc + 1])`.
 */
interface Accesses {
  readonly reads: Int32Array;
  readonly readStart: Int32Array;
  /** The register written, or -1. */
  readonly def: Int32Array;
  /** Whether control can continue at pc + 1. */
  readonly falls: Uint8Array;
  /** The jump target (absolute pc), or -1. */
  readonly target: Int32Array;
}

function accessesOf(ex: ProgramData, f: FunctionInfo): Accesses {
  const n = f.end - f.start;
  const c = new InstructionCursor(ex);
  let total = 0;
  for (let pc = 0; pc < n; pc++) total += c.seek(f.start + pc).argCount + 1;
  const reads = new Int32Array(total), readStart = new Int32Array(n + 1);
  const def = new Int32Array(n), falls = new Uint8Array(n), target = new Int32Array(n);
  let at = 0;
  for (let pc = 0; pc < n; pc++) {
    c.seek(f.start + pc);
    readStart[pc] = at;
    const count = c.argCount;
    for (let k = 0; k < count; k++) {
      if (c.argKind(k) === ArgKind.Register) {
        const r = c.argValue(k);
        if (r >= 0) reads[at++] = r;
      }
    }
    const fixed = c.register; // Ret's result, If's condition (special registers are negative)
    if (fixed >= 0) reads[at++] = fixed;
    def[pc] = c.written();
    falls[pc] = c.fallsThrough ? 1 : 0;
    const jump = c.jump;
    target[pc] = jump === NO_FIELD ? -1 : pc + jump;
  }
  readStart[n] = at;
  return { reads, readStart, def, falls, target };
}

/** Computes the release points of VM function `f`. */
export function computeReleases(ex: ProgramData, f: FunctionInfo): Releases {
  const n = f.end - f.start;
  const { reads, readStart, def, falls, target } = accessesOf(ex, f);

  // Basic blocks: leaders are the entry, jump targets and instructions after a branch.
  const leader = new Uint8Array(n + 1);
  leader[0] = 1;
  for (let pc = 0; pc < n; pc++) {
    if (target[pc] >= 0 || !falls[pc]) {
      if (target[pc] <= n && target[pc] >= 0) leader[target[pc]] = 1;
      leader[pc + 1] = 1;
    }
  }
  let nb = 0;
  for (let pc = 0; pc < n; pc++) nb += leader[pc];
  const starts = new Int32Array(nb + 1), blockOf = new Int32Array(n);
  for (let pc = 0, b = -1; pc < n; pc++) {
    if (leader[pc]) starts[++b] = pc;
    blockOf[pc] = b;
  }
  starts[nb] = n;
  // Each block has at most two successors (fall-through, jump): -1 for none.
  const succA = new Int32Array(nb).fill(-1), succB = new Int32Array(nb).fill(-1);
  const predCount = new Int32Array(nb + 1);
  for (let b = 0; b < nb; b++) {
    const last = starts[b + 1] - 1;
    if (falls[last] && last + 1 < n) succA[b] = blockOf[last + 1];
    const t = target[last];
    if (t >= 0 && t < n) succB[b] = blockOf[t];
    if (succA[b] >= 0) predCount[succA[b]]++;
    if (succB[b] >= 0) predCount[succB[b]]++;
  }
  // Predecessors in one array: those of block b are preds[predStart[b] .. predStart[b + 1]).
  const predStart = new Int32Array(nb + 1);
  for (let b = 0; b < nb; b++) predStart[b + 1] = predStart[b] + predCount[b];
  const preds = new Int32Array(predStart[nb]);
  const fill = predStart.slice(0, nb);
  for (let b = 0; b < nb; b++) {
    if (succA[b] >= 0) preds[fill[succA[b]]++] = b;
    if (succB[b] >= 0) preds[fill[succB[b]]++] = b;
  }

  // Bit sets over the registers, W words per block: gen (read before written in the
  // block), kill (written), live in and live out.
  const W = (f.registerFileSize + 31) >>> 5;
  const gen = new Uint32Array(nb * W), kill = new Uint32Array(nb * W);
  for (let b = 0; b < nb; b++) {
    const base = b * W;
    for (let pc = starts[b + 1] - 1; pc >= starts[b]; pc--) {
      const d = def[pc];
      if (d >= 0) {
        gen[base + (d >>> 5)] &= ~(1 << (d & 31));
        kill[base + (d >>> 5)] |= 1 << (d & 31);
      }
      for (let i = readStart[pc]; i < readStart[pc + 1]; i++) {
        const r = reads[i];
        gen[base + (r >>> 5)] |= 1 << (r & 31);
      }
    }
  }

  // Backward dataflow to a fixed point: liveIn = gen ∪ (liveOut − kill). The
  // worklist pops the last block first, so a block is usually visited after
  // its successors.
  const liveIn = gen.slice(), liveOut = new Uint32Array(nb * W);
  const queued = new Uint8Array(nb).fill(1);
  const work = new Int32Array(nb);
  let top = 0;
  for (let b = 0; b < nb; b++) work[top++] = b;
  while (top > 0) {
    const b = work[--top];
    queued[b] = 0;
    const base = b * W;
    const sa = succA[b], sb = succB[b];
    if (sa >= 0) { for (let w = 0; w < W; w++) liveOut[base + w] |= liveIn[sa * W + w]; }
    if (sb >= 0) { for (let w = 0; w < W; w++) liveOut[base + w] |= liveIn[sb * W + w]; }
    let grew = false;
    for (let w = 0; w < W; w++) {
      // `>>> 0`: bitwise results are int32, the array's elements uint32.
      const next = (liveIn[base + w] | (liveOut[base + w] & ~kill[base + w])) >>> 0;
      if (next !== liveIn[base + w]) {
        liveIn[base + w] = next;
        grew = true;
      }
    }
    if (grew) {
      for (let i = predStart[b]; i < predStart[b + 1]; i++) {
        const p = preds[i];
        if (!queued[p]) {
          queued[p] = 1;
          work[top++] = p;
        }
      }
    }
  }

  const after: (number[] | null)[] = new Array(n).fill(null);
  const onEntry: (number[] | null)[] = new Array(n).fill(null);
  const live = new Uint32Array(W);
  const isLive = (r: number) => (live[r >>> 5] & (1 << (r & 31))) !== 0;
  for (let b = 0; b < nb; b++) {
    live.set(liveOut.subarray(b * W, b * W + W));
    for (let pc = starts[b + 1] - 1; pc >= starts[b]; pc--) {
      const d = def[pc];
      // Ret (no successor) is skipped: its value goes to the caller and the frame ends anyway.
      if (falls[pc] || target[pc] >= 0) {
        let dead: number[] | null = null;
        for (let i = readStart[pc]; i < readStart[pc + 1]; i++) {
          const r = reads[i];
          if (!isLive(r) && !(dead ??= []).includes(r)) dead.push(r);
        }
        if (d >= 0 && !isLive(d) && !(dead ??= []).includes(d)) dead.push(d);
        if (dead !== null) after[pc] = dead.sort((x, y) => x - y);
      }
      if (d >= 0) live[d >>> 5] &= ~(1 << (d & 31));
      for (let i = readStart[pc]; i < readStart[pc + 1]; i++) {
        const r = reads[i];
        live[r >>> 5] |= 1 << (r & 31);
      }
    }
    // Dead on entry: live out of some predecessor (or an input, at pc 0), not live in here.
    const incoming = live.fill(0);
    if (b === 0) { for (let r = 0; r < f.numArgs; r++) incoming[r >>> 5] |= 1 << (r & 31); }
    for (let i = predStart[b]; i < predStart[b + 1]; i++) {
      const p = preds[i];
      for (let w = 0; w < W; w++) incoming[w] |= liveOut[p * W + w];
    }
    const dead: number[] = [];
    for (let w = 0; w < W; w++) pushBits(incoming[w] & ~liveIn[b * W + w], w, dead);
    if (dead.length > 0) onEntry[starts[b]] = dead;
  }
  return { after, onEntry };
}
