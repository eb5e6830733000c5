/**
 * Fuzz family "loader": bytes that are almost executables. Each case takes a
 * saved program (the golden files or a random one) and cuts it short,
 * flips bytes, writes edge values into fields and code words, splices in
 * pieces of another program, or is garbage behind a valid header. `load`
 * must reject it with a `LoadError` or return an executable that prints and
 * loads into a VM within budget; any other exception, a slow case or
 * memory left allocated after a rejection is a bug.
 *
 * @module
 */

import { cpu, Executable, LoadError, VirtualMachine, VMError } from "../../mod.ts";
import { defaultAllocator } from "../../devices/allocation_context.ts";
import { randomProgram } from "./program_generator.ts";
import type { Random } from "./random.ts";
import { emptyReport, type FamilyReport, recordBug } from "./report.ts";

/** A case slower than this (load + print + VM construction) counts as a hang. */
const HANG_MS = 2000;

/**
 * VM construction budget: the 50 ms per 10,000 instructions, ×10 for
 * shared CI machines, and at least 200 ms, so that a garbage-collection pause
 * (the bomb family allocates large arrays) is not counted against a small
 * program.
 */
export function constructionBudgetMs(instructions: number): number {
  return 10 * Math.max(20, (50 * instructions) / 10_000);
}

const EDGE_U32 = [0, 1, 2, 3, 7, 0x7fffffff, 0x80000000, 0xffffffff, 0x10000, 0xfffffff0];
const EDGE_F64 = [NaN, Infinity, -Infinity, 2 ** 53, -(2 ** 53), -1, -2, -3, 0.5, 1e300, 5, 0];

/** One mutated copy of `bytes`. */
export function mutate(rand: Random, bytes: Uint8Array, other: Uint8Array): Uint8Array {
  const out = bytes.slice();
  const view = new DataView(out.buffer);
  switch (rand.int(6)) {
    case 0: // strict prefix
      return out.subarray(0, rand.int(out.length));
    case 1: // byte flips
      for (let k = rand.between(1, 4); k > 0; k--) out[rand.int(out.length)] = rand.int(256);
      return out;
    case 2: { // an edge value in a 4-byte field
      const at = rand.int(Math.max(1, out.length - 4)) & ~3;
      view.setUint32(at, rand.pick(EDGE_U32), true);
      return out;
    }
    case 3: { // an edge value in an 8-byte word (the code is f64 words)
      const at = rand.int(Math.max(1, out.length - 8)) & ~7;
      view.setFloat64(at, rand.pick(EDGE_F64), true);
      return out;
    }
    case 4: { // splice a piece of another program in
      const from = rand.int(other.length), len = rand.int(64);
      const at = rand.int(out.length);
      const piece = other.subarray(from, from + len);
      const spliced = new Uint8Array(out.length - Math.min(len, out.length - at) + piece.length);
      spliced.set(out.subarray(0, at));
      spliced.set(piece, at);
      spliced.set(out.subarray(Math.min(out.length, at + len)), at + piece.length);
      return spliced;
    }
    default: { // garbage behind a valid header
      const garbage = rand.bytes(rand.int(512));
      const out2 = new Uint8Array(16 + garbage.length);
      out2.set(bytes.subarray(0, 16));
      out2.set(garbage, 16);
      return out2;
    }
  }
}

/** The corpus: the golden binaries and random programs. */
export async function corpus(rand: Random, randomCount: number): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  for (const name of ["design_doc", "everything", "shape_heap"]) {
    out.push(await Deno.readFile(new URL(`../../testdata/${name}.rvm`, import.meta.url)));
  }
  for (let i = 0; i < randomCount; i++) out.push(randomProgram(rand).save());
  return out;
}

/** Runs `cases` loader cases from `rand`'s sequence. */
export async function loaderFamily(rand: Random, cases: number): Promise<FamilyReport> {
  const report = emptyReport("loader");
  runLoadCases(report, rand, await corpus(rand, 40), cases, mutate, (ex) => {
    ex.as_text();
    ex.stats();
  });
  return report;
}

/**
 * The cases both loader families run (this one and tvm_format_family.ts): `cases` times,
 * bytes `mutateBytes` makes from two programs of `programs` are loaded and, where they
 * load, given to `inspect` (what the family checks of an executable: it throws or records
 * a bug in `report`) and put in a VM within budget; then disposed, leaving nothing
 * allocated. A rejection must be a `LoadError`, a failed VM construction a `VMError`.
 */
export function runLoadCases(
  report: FamilyReport,
  rand: Random,
  programs: readonly Uint8Array[],
  cases: number,
  mutateBytes: (rand: Random, bytes: Uint8Array, other: Uint8Array) => Uint8Array,
  inspect: (ex: Executable, bytes: Uint8Array, i: number) => void,
): void {
  const host = defaultAllocator(cpu());
  for (let i = 0; i < cases; i++) {
    const bytes = mutateBytes(rand, rand.pick(programs), rand.pick(programs));
    report.tried++;
    const liveBefore = host.stats().liveBytes;
    const t0 = performance.now();
    let ex: Executable | undefined;
    try {
      ex = Executable.load(bytes);
      inspect(ex, bytes, i);
      report.loaded++;
    } catch (e) {
      if (e instanceof LoadError) report.rejected++;
      else recordBug(report, "otherExceptions", `case ${i}: ${String(e).slice(0, 200)}`);
    }
    if (ex !== undefined) {
      const t1 = performance.now();
      try {
        new VirtualMachine(ex).dispose();
      } catch (e) {
        // A VMError here is a constant that cannot be placed (an unknown packed function
        // fails only the calls that reach it).
        if (!(e instanceof VMError)) {
          recordBug(report, "otherExceptions", `case ${i} (VM): ${String(e).slice(0, 200)}`);
        }
      }
      const ms = performance.now() - t1;
      if (ms > constructionBudgetMs(ex.instructionCount)) {
        recordBug(
          report,
          "overBudget",
          `case ${i}: ${ms.toFixed(0)} ms for ${ex.instructionCount} instructions`,
        );
      }
    }
    const elapsed = performance.now() - t0;
    if (elapsed > HANG_MS) recordBug(report, "hangs", `case ${i}: ${elapsed.toFixed(0)} ms`);
    // Loaded or not, nothing stays: a disposed executable frees its constants at once.
    ex?.dispose();
    if (host.stats().liveBytes !== liveBefore) {
      recordBug(
        report,
        "leaks",
        `case ${i}: ${ex === undefined ? "a rejected load" : "a disposed executable"} left ${
          host.stats().liveBytes - liveBefore
        } bytes`,
      );
    }
  }
}
