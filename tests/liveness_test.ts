import { assertEquals } from "@std/assert";
import { ExecBuilder, type Executable, registerFunc } from "../mod.ts";
import { InstructionCursor } from "../program/decoder.ts";
import { computeReleases } from "../program/liveness.ts";
import type { FunctionInfo } from "../program/program_data.ts";

registerFunc("test.build.f", (...args: unknown[]) => args.length, { override: true });

/**
 * Liveness the slow, obvious way: live sets per instruction, iterated to a
 * fixed point; releases after an instruction are the registers it touches
 * that are dead after it, and on entry to an instruction the registers live
 * out of a predecessor (or inputs, at pc 0) that are dead there.
 */
function referenceReleases(ex: Executable, f: FunctionInfo) {
  const n = f.end - f.start;
  const c = new InstructionCursor(ex);
  const uses: number[][] = [], defs: number[] = [], succs: number[][] = [];
  for (let pc = 0; pc < n; pc++) {
    c.seek(f.start + pc);
    const u: number[] = [];
    c.forEachRead((r) => r >= 0 && u.push(r));
    uses.push(u);
    defs.push(c.written());
    succs.push(c.successors().map((d) => pc + d).filter((t) => t >= 0 && t < n));
  }
  const liveIn = Array.from({ length: n }, () => new Set<number>());
  const liveOut = Array.from({ length: n }, () => new Set<number>());
  for (let changed = true; changed;) {
    changed = false;
    for (let pc = n - 1; pc >= 0; pc--) {
      for (const s of succs[pc]) for (const r of liveIn[s]) liveOut[pc].add(r);
      const next = new Set([...liveOut[pc]].filter((r) => r !== defs[pc]));
      for (const r of uses[pc]) next.add(r);
      if (next.size !== liveIn[pc].size) {
        liveIn[pc] = next;
        changed = true;
      }
    }
  }
  const sorted = (s: Iterable<number>) => {
    const out = [...new Set(s)].sort((a, b) => a - b);
    return out.length > 0 ? out : null;
  };
  const isRet = (pc: number) => c.seek(f.start + pc).info.name === "Ret";
  // Ret releases nothing after it: the frame ends.
  const after = uses.map((u, pc) =>
    isRet(pc)
      ? null
      : sorted([...u, ...(defs[pc] >= 0 ? [defs[pc]] : [])].filter((r) => !liveOut[pc].has(r)))
  );
  const preds = Array.from({ length: n }, () => [] as number[]);
  succs.forEach((s, pc) => s.forEach((t) => preds[t].push(pc)));
  const onEntry = liveIn.map((inn, pc) => {
    const incoming = preds[pc].flatMap((p) => [...liveOut[p]]);
    if (pc === 0) { for (let r = 0; r < f.numArgs; r++) incoming.push(r); }
    return sorted(incoming.filter((r) => !inn.has(r)));
  });
  return { after, onEntry };
}

/** A random function: up to 70 registers (three bit-set words), Calls, Ifs, loops, Rets. */
function randomProgram(seed: number): Executable {
  const rnd = (k: number) => {
    seed = (seed * 16807) % 2147483647;
    return seed % k;
  };
  const ib = new ExecBuilder();
  const registers = 2 + rnd(69), inputs = rnd(3), body = 5 + rnd(60);
  ib.function("main", inputs, () => {
    for (let r = inputs; r < registers; r++) {
      ib.emit_call("test.build.f", r > 0 ? [ib.r(rnd(r))] : [], { dst: ib.r(r) });
    }
    for (let i = 0; i < body; i++) {
      const kind = rnd(10), left = body - i;
      const args = Array.from({ length: rnd(4) }, () => ib.r(rnd(registers)));
      if (kind < 6 || left < 3) ib.emit_call("test.build.f", args, { dst: ib.r(rnd(registers)) });
      else if (kind < 8) ib.emit_if(ib.r(rnd(registers)), 1 + rnd(left));
      else if (kind < 9) ib.emit_goto(-(1 + rnd(i + registers - inputs)));
      else ib.emit_ret(ib.r(rnd(registers)));
    }
    ib.emit_ret(ib.r(rnd(registers)));
  });
  return ib.get();
}

Deno.test("liveness equals a per-instruction reference on random control flow up to 70 registers", () => {
  for (let seed = 1; seed <= 400; seed++) {
    const ex = randomProgram(seed);
    const f = ex.functions[0];
    const got = computeReleases(ex, f);
    const want = referenceReleases(ex, f);
    assertEquals(got.after, want.after, `after, seed ${seed}`);
    assertEquals(got.onEntry, want.onEntry, `on entry, seed ${seed}`);
  }
});
