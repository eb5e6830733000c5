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
 * @module
 */

import { InstructionCursor } from "./decoder.ts";
import type { FunctionInfo, ProgramData } from "./program_data.ts";

/** Release points of one function, indexed by instruction (relative to the function). */
export interface Releases {
  /** Registers to release right after instruction pc runs (null: none). */
  readonly after: (readonly number[] | null)[];
  /** Registers to release on entering instruction pc (live out of a predecessor, dead here). */
  readonly onEntry: (readonly number[] | null)[];
}

interface Access {
  uses: number[];
  def: number;
  succ: number[];
}

/** What instruction `pc` of `f` reads, writes and where control goes next (absolute pcs). */
function accessOf(c: InstructionCursor, f: FunctionInfo, pc: number): Access {
  c.seek(f.start + pc);
  const uses: number[] = [];
  c.forEachRead((r) => {
    if (r >= 0) uses.push(r);
  });
  return { uses, def: c.written(), succ: c.successors().map((d) => pc + d) };
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
  const gen: Set<number>[] = [];
  const kill: Set<number>[] = [];
  for (let b = 0; b < nb; b++) {
    const g = new Set<number>(), k = new Set<number>();
    for (let pc = blockEnd(b) - 1; pc >= starts[b]; pc--) {
      const a = acc[pc];
      if (a.def >= 0) {
        g.delete(a.def);
        k.add(a.def);
      }
      for (const u of a.uses) g.add(u);
    }
    gen.push(g);
    kill.push(k);
  }

  // Backward dataflow to a fixed point: liveIn = gen ∪ (liveOut − kill).
  const liveIn: Set<number>[] = gen.map((g) => new Set(g));
  const liveOut: Set<number>[] = Array.from({ length: nb }, () => new Set<number>());
  const queued = new Uint8Array(nb).fill(1);
  const work: number[] = [];
  for (let b = nb - 1; b >= 0; b--) work.push(b);
  while (work.length > 0) {
    const b = work.pop()!;
    queued[b] = 0;
    const out = liveOut[b];
    for (const s of succs[b]) for (const r of liveIn[s]) out.add(r);
    const inn = liveIn[b];
    let grew = false;
    for (const r of out) {
      if (!kill[b].has(r) && !inn.has(r)) {
        inn.add(r);
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
  for (let b = 0; b < nb; b++) {
    const live = new Set(liveOut[b]);
    for (let pc = blockEnd(b) - 1; pc >= starts[b]; pc--) {
      const a = acc[pc];
      if (a.succ.length > 0) {
        // Ret is skipped: its value goes to the caller and the frame ends anyway.
        const dead: number[] = [];
        const touched = a.def >= 0 ? [...a.uses, a.def] : a.uses;
        for (const r of touched) if (!live.has(r) && !dead.includes(r)) dead.push(r);
        if (dead.length > 0) after[pc] = dead.sort((x, y) => x - y);
      }
      if (a.def >= 0) live.delete(a.def);
      for (const u of a.uses) live.add(u);
    }
    const incoming = new Set<number>();
    if (b === 0) { for (let r = 0; r < f.numArgs; r++) incoming.add(r); }
    for (const p of preds[b]) for (const r of liveOut[p]) incoming.add(r);
    const dead = [...incoming].filter((r) => !liveIn[b].has(r)).sort((x, y) => x - y);
    if (dead.length > 0) onEntry[starts[b]] = dead;
  }
  return { after, onEntry };
}
