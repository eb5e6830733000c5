/**
 * Fuzz family "builtins": every registered builtin (`installBuiltins()`'s
 * tables) called with random arguments of every kind a register can hold —
 * numbers at the edges, strings, shapes and arrays with bad dimensions,
 * dtypes, tensors of every dtype and odd shapes (some disposed), tuples,
 * closures, storages, KV caches, `%vm` — inside a VM memory scope with a
 * small limit, as the VM calls them. Four cases in five follow the
 * builtin's signature (tests/fuzz/builtin_signatures.ts) with values at the
 * edges, so that they get past the first type check.
 *
 * How a case ends:
 *
 * - a result: it must be well formed (no tensor or shape with a negative or
 *   fractional dimension: else "wrong results");
 * - an `Error` whose message starts with the builtin's name (`reshape:`,
 *   `vm.op.add:`; after an `err_ctx` prefix for the checks that take one), or
 *   one of the errors a builtin passes on — an allocation refused (`Cannot
 *   allocate …`, the memory limit among them), a use after free (`… was used
 *   after its memory was released`), or the error of a callable the family
 *   passed in, or an error of the library's own classes (`TensorCacheError`,
 *   `VMError`): rejected;
 * - anything else — `Cannot read properties of undefined`, an unnamed
 *   `RangeError` from the engine — is an "other exception";
 * - live bytes left in the scope, or in the default allocator once the
 *   arguments are disposed, are "leaks"; a call over `HANG_MS` is a hang.
 *
 * @module
 */

import { activateAllocators } from "../../devices/allocation_context.ts";
import { defaultAllocator } from "../../devices/allocation_context.ts";
import { MemoryScope } from "../../devices/memory_scope.ts";
import { cpu } from "../../mod.ts";
import { BUILTIN_TABLES } from "../../builtins/install.ts";
import type { Builtin } from "../../builtins/builtin_table.ts";
import { releaseIfUnowned } from "../../ground/object.ts";
import type { Random } from "./random.ts";
import { Random as CaseRandom } from "./random.ts";
import { caseSeeds, emptyReport, type FamilyReport, recordBug, settle } from "./report.ts";
import { Made, malformed, memoryRecipe, randomRecipe, type Recipe } from "./values.ts";
import { signatureRecipes } from "./builtin_signatures.ts";

/** A call slower than this counts as a hang. */
const HANG_MS = 2000;
/** The scope's memory limit: small, so that size checks are what stops big requests. */
const LIMIT_BYTES = 1 << 20;

/** The prefixes a builtin's own errors start with: its full name, and the part after `vm.builtin.` / `vm.op.`. */
function names(name: string): string[] {
  const short = name.replace(/^vm\.builtin\./, "").replace(/^vm\.op\./, "");
  return short === name ? [name] : [name, short];
}

/**
 * Errors a builtin passes on from below, not its own: the library's
 * allocation refusals and use-after-free errors, and what the family's own
 * callables throw when a builtin calls them (`invoke_closure`, `call_tir_dyn`).
 */
const PASSED_ON = [
  /^Cannot allocate \d+ bytes on /,
  /was used after its memory was released/,
  /^fuzz callee throws$/,
];

/** The library's own error classes: a builtin may throw them (a tensor cache that cannot load). */
const LIBRARY_ERRORS = new Set(["VMError", "TensorCacheError", "WebGPUError"]);

/** Whether `e` is a rejection by builtin `name` (see the module doc). */
export function isRejection(name: string, e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  if (LIBRARY_ERRORS.has(e.name)) return true;
  const message = e.message;
  for (const n of names(name)) {
    if (message.startsWith(`${n}:`) || message.includes(`: ${n}:`)) return true;
  }
  return PASSED_ON.some((re) => re.test(message));
}

/** Every builtin of the library, in registration order. */
function allBuiltins(): Builtin[] {
  return BUILTIN_TABLES.flatMap((t) => [...t.entries]);
}

/** A recipe for one argument: mostly any value, sometimes `%vm` or a storage or cache. */
function argumentRecipe(rand: Random, scope: MemoryScope): Recipe {
  const r = rand.next();
  if (r < 0.08) return () => scope;
  if (r < 0.14) return memoryRecipe(rand);
  // Small integers are what most builtins take: make them likely.
  if (r < 0.35) {
    const n = rand.between(-2, 6);
    return () => n;
  }
  return randomRecipe(rand);
}

/** Runs `cases` builtin calls from `rand`'s sequence. */
export async function builtinFamily(rand: Random, cases: number): Promise<FamilyReport> {
  const report = emptyReport("builtins");
  const builtins = allBuiltins();
  const host = defaultAllocator(cpu());
  const log = console.log;
  console.log = () => {}; // vm.builtin.print and debug_print print what they are given
  try {
    for (const [i, seed] of caseSeeds(rand, cases)) {
      const caseRand = new CaseRandom(seed);
      const { name, fn } = caseRand.pick(builtins);
      const scope = new MemoryScope(
        [cpu()],
        caseRand.chance(0.5) ? "pooled" : "naive",
        LIMIT_BYTES,
      );
      // Mostly arguments of the kinds the builtin takes, with values at the edges.
      const recipes = (caseRand.chance(0.8) ? signatureRecipes(caseRand, name, scope) : null) ??
        Array.from({ length: caseRand.int(7) }, () => argumentRecipe(caseRand, scope));
      report.tried++;
      const hostBefore = host.stats().liveBytes;
      const made = new Made();
      const args = recipes.map((r) => r(made));
      const where = `case ${i}: ${name}`;
      let outcome: { value: unknown } | { error: unknown } | "hang";
      const t0 = performance.now();
      const previous = activateAllocators(scope);
      try {
        const out = fn(...args);
        outcome = { value: out };
      } catch (error) {
        outcome = { error };
      } finally {
        activateAllocators(previous);
      }
      if ("value" in outcome && outcome.value instanceof Promise) {
        outcome = await settle(outcome.value, HANG_MS);
      }
      const ms = performance.now() - t0;
      if (outcome === "hang" || ms > HANG_MS) {
        recordBug(report, "hangs", `${where}: ${ms.toFixed(0)} ms`);
      } else if ("error" in outcome) {
        if (isRejection(name, outcome.error)) report.rejected++;
        else {
          recordBug(
            report,
            "otherExceptions",
            `${where}: ${String(outcome.error).slice(0, 200)}`,
          );
        }
      } else {
        report.loaded++;
        const bad = malformed(outcome.value, args);
        if (bad !== null) recordBug(report, "wrong", `${where}: returned ${bad}`);
        releaseIfUnowned(outcome.value);
      }
      scope.clearOwnTensorCache(); // what the builtin cached went to the scope's own cache
      made.cleanUp();
      const scopeLive = scope.allocators().reduce((n, a) => n + a.stats().liveBytes, 0);
      const hostLive = host.stats().liveBytes - hostBefore;
      if (scopeLive !== 0 || hostLive > 0) {
        recordBug(
          report,
          "leaks",
          `${where}: ${scopeLive} bytes left in the VM's scope, ${hostLive} outside`,
        );
      }
    }
  } finally {
    console.log = log;
  }
  return report;
}
