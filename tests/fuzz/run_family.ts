/**
 * Fuzz family "run": load and run. Each case is a random program
 * (tests/fuzz/program_generator.ts: calls, branches, loops, recursion,
 * constants of every kind, hostile names) or a mutant of a saved program
 * that still loads. It is loaded into a VM in each form — specialized
 * dispatch, the generic loop, compiled mode — with a small memory limit, and
 * each of its functions is invoked with random arguments under a small fuel
 * budget and a timeout.
 *
 * The three forms must agree on every call: the same result (tensors by
 * dtype, shape and bytes) or a `VMError` with the same message, or it is a
 * "wrong result". In one case of `YIELDING_EVERY` the generic loop and
 * compiled mode yield to the event loop at every check of their budget
 * (`yieldIntervalMs` of a nanosecond), at the backward jumps and calls that
 * happen to check, so a call that yields must agree with one that does not. Any error but a `LoadError` (loading) or a `VMError`
 * (constructing, running) is an "other exception"; memory a VM still holds
 * after its results are disposed, or host memory after the arguments are,
 * is a "leak"; a case over `HANG_MS` is a hang (fuel stops every loop long
 * before that); construction over the loader family's budget is
 * "over budget".
 *
 * @module
 */

import { cpu, Executable, LoadError, VirtualMachine, VMError } from "../../mod.ts";
import { defaultAllocator } from "../../devices/allocation_context.ts";
import { constructionBudgetMs, corpus, mutate } from "./loader_family.ts";
import { randomProgram } from "./program_generator.ts";
import { Random } from "./random.ts";
import { caseSeeds, emptyReport, type FamilyReport, recordBug } from "./report.ts";
import { canonical, disposeResult, Made, malformed, randomRecipe, type Recipe } from "./values.ts";
import "../_programs.ts"; // registers the packed functions the golden programs call

/** A case slower than this counts as a hang. */
const HANG_MS = 5000;
/** Per call: instructions, milliseconds, and the VM's memory. */
const FUEL = 2000, TIMEOUT_MS = 1000, MEMORY_BYTES = 1 << 20;
/** Shallow recursion: the JavaScript stack must never be what stops a call. */
const MAX_CALL_DEPTH = 100;
/** Cases whose index is a multiple of this run two forms yielding at every check (by index: the random sequence is the same). */
const YIELDING_EVERY = 32;
/** A yield at every check of the budget (each waits a macrotask). */
const YIELD_ALWAYS = { yieldIntervalMs: 1e-6 };

const FORMS = [
  { name: "specialized", options: {} },
  { name: "generic", options: { dispatch: "generic" } },
  { name: "compiled", options: { mode: "compiled" } },
] as const;

/** How one call ended, as text to compare between forms. */
async function outcome(
  vm: VirtualMachine,
  name: string,
  args: unknown[],
): Promise<{ text: string; raw?: unknown; bad?: string }> {
  try {
    const v = await vm.with({ fuel: FUEL, timeoutMs: TIMEOUT_MS }).invoke(name, ...args);
    // A shape constant may hold anything (axes are negative): only what builtins made counts.
    const bad = malformed(v, [...args, ...vm.executable.constants]) ?? undefined;
    const text = `= ${canonical(v)}`;
    disposeResult(v);
    return { text, bad };
  } catch (e) {
    if (e instanceof VMError) return { text: `! ${e.message}` };
    return { text: `raw ${String(e)}`, raw: e };
  }
}

/** Runs `cases` load-and-run cases from `rand`'s sequence. */
export async function runFamily(rand: Random, cases: number): Promise<FamilyReport> {
  const report = emptyReport("run");
  const programs = await corpus(rand, 20);
  const host = defaultAllocator(cpu());
  const log = console.log;
  console.log = () => {}; // programs may call vm.builtin.print
  try {
    for (const [i, seed] of caseSeeds(rand, cases)) {
      const r = new Random(seed);
      report.tried++;
      const where = `case ${i}`;
      const t0 = performance.now();
      const bytes = r.chance(0.5)
        ? randomProgram(r, { maxLength: 30 }).save()
        : mutate(r, r.pick(programs), r.pick(programs));
      let ex: Executable;
      const hostBeforeLoad = host.stats().liveBytes;
      try {
        ex = Executable.load(bytes);
      } catch (e) {
        if (e instanceof LoadError) report.rejected++;
        else recordBug(report, "otherExceptions", `${where} (load): ${String(e).slice(0, 200)}`);
        continue;
      }
      // The same arguments for every form, made again for each.
      const calls: { name: string; recipes: Recipe[] }[] = ex.functions
        .filter((f) => f.kind === "vm")
        .map((f) => ({
          name: f.name,
          recipes: Array.from({ length: f.numArgs }, () => randomRecipe(r)),
        }));
      const results: string[][] = [];
      let constructed = 0;
      for (const form of FORMS) {
        const hostBefore = host.stats().liveBytes;
        const t1 = performance.now();
        let vm: VirtualMachine;
        try {
          const yielding = i % YIELDING_EVERY === 0 && form.name !== "specialized";
          vm = new VirtualMachine(ex, cpu(), {
            ...form.options,
            ...(yielding ? YIELD_ALWAYS : {}),
            maxMemoryBytes: MEMORY_BYTES,
            maxCallDepth: MAX_CALL_DEPTH,
          });
        } catch (e) {
          // Construction fails only on constants that cannot be placed; an unknown packed
          // function fails the calls that reach it.
          if (e instanceof VMError) results.push([`construct ! ${e.message}`]);
          else recordBug(report, "otherExceptions", `${where} (VM): ${String(e).slice(0, 200)}`);
          continue;
        }
        const ms = performance.now() - t1;
        if (ms > constructionBudgetMs(ex.instructionCount)) {
          recordBug(report, "overBudget", `${where}: ${ms.toFixed(0)} ms (${form.name})`);
        }
        constructed++;
        const texts: string[] = [];
        for (const call of calls) {
          const made = new Made();
          const args = call.recipes.map((recipe) => recipe(made));
          const o = await outcome(vm, call.name, args);
          made.cleanUp();
          texts.push(o.text);
          if (o.raw !== undefined) {
            recordBug(
              report,
              "otherExceptions",
              `${where} (${form.name}): ${o.text.slice(0, 200)}`,
            );
          }
          if (o.bad !== undefined) {
            recordBug(report, "wrong", `${where} (${form.name}): returned ${o.bad}`);
          }
        }
        results.push(texts);
        const live = vm.memory_stats().liveBytes;
        vm.dispose();
        const hostLeft = host.stats().liveBytes - hostBefore;
        if (live !== 0 || hostLeft > 0) {
          recordBug(
            report,
            "leaks",
            `${where} (${form.name}): ${live} bytes held by the VM, ${hostLeft} outside`,
          );
        }
      }
      ex.dispose();
      if (host.stats().liveBytes > hostBeforeLoad) {
        recordBug(
          report,
          "leaks",
          `${where}: ${host.stats().liveBytes - hostBeforeLoad} bytes left after dispose()`,
        );
      }
      if (constructed > 0) report.loaded++;
      else report.rejected++;
      for (let k = 1; k < results.length; k++) {
        const at = results[0].findIndex((text, j) => results[k][j] !== text);
        if (at >= 0 || results[k].length !== results[0].length) {
          recordBug(
            report,
            "wrong",
            `${where}, call ${at}: ${FORMS[0].name} ${String(results[0][at]).slice(0, 300)} vs ${
              FORMS[k].name
            } ${String(results[k][at]).slice(0, 300)}`,
          );
          break;
        }
      }
      const elapsed = performance.now() - t0;
      if (elapsed > HANG_MS) recordBug(report, "hangs", `${where}: ${elapsed.toFixed(0)} ms`);
    }
  } finally {
    console.log = log;
  }
  return report;
}
