/**
 * Operator coverage against TVM (issue 28): every operator family TVM 0.27
 * compiles for WebGPU, and seeded random chains of them, exported by
 * `tools/tvm/export_webgpu.py`'s `export_package`, run by relaxvm on WebGPU
 * and compared with TVM's `llvm` build of the same module: max|Δ|/max|want|
 * ≤ 1e-5 for float32 (1e-2 float16), exact for integers and bools. Each
 * case passes or is on `tvm_ops/expectations.ts` with the refusal it must
 * give; anything else (a silent wrong answer above all) fails. The README's
 * table is checked against the run.
 *
 * The suites are built by `tools/tvm/op_suite/build_suite.py` into
 * `.tvm_ops/` (cached by the generator's hash) and run in a child process.
 * Needs tools/tvm/.venv: ignored without it, failing instead under
 * `RELAXVM_REQUIRE_TVM=1`; and a WebGPU adapter (ignored without one, unless
 * `RELAXVM_REQUIRE_WEBGPU=1`). `deno task tvm:ops --cases 10000` runs the
 * differential at scale.
 */

import { assert, assertEquals } from "@std/assert";
import { ignoreWithoutTvm, SETUP_HINT, tvmAvailable } from "./tvm/tvm_python.ts";
import { buildSuite, runSuite, type SuiteSpec } from "./tvm_ops/suite_cache.ts";
import { problemOf, unmetExpectations } from "./tvm_ops/expectations.ts";
import { formatMarkdown, opsTable, readmeTable, TABLE_START } from "./tvm_ops/table.ts";
import { pageWith, readPages } from "../docs/pages.ts";
import type { IndexEntry, SuiteRun } from "./tvm_ops/outcomes.ts";

/** Random modules per CI run, and their seed. */
export const RANDOM_CASES = 200;
const RANDOM_SEED = 28;

const ignore = ignoreWithoutTvm("tvm_ops_test");

/** Builds (or finds cached) and runs a suite; null when there is no adapter and none is required. */
async function runSpec(
  spec: SuiteSpec,
): Promise<{ entries: IndexEntry[]; run: SuiteRun } | null> {
  assert(tvmAvailable(), `RELAXVM_REQUIRE_TVM=1: ${SETUP_HINT}`);
  const t0 = performance.now();
  const { dir, index, built } = await buildSuite(spec);
  const t1 = performance.now();
  const run = await runSuite(dir);
  const t2 = performance.now();
  if (typeof run === "string") {
    if (Deno.env.get("RELAXVM_REQUIRE_WEBGPU") === "1") {
      throw new Error(`RELAXVM_REQUIRE_WEBGPU=1: ${run}`);
    }
    console.log(`ignored: ${run}`);
    return null;
  }
  const results = run.results;
  assertEquals(results.map((r) => r.id), index.cases.map((c) => c.id), "one result per case");
  const counts = new Map<string, number>();
  for (const r of results) counts.set(r.outcome, (counts.get(r.outcome) ?? 0) + 1);
  console.log(
    `${spec.suite}: ${index.cases.length} cases (${
      [...counts].map(([o, n]) => `${n} ${o}`).join(", ")
    }); ` +
      `TVM build ${
        built ? `${((t1 - t0) / 1000).toFixed(0)} s` : `cached (took ${index.seconds} s)`
      }, ` +
      `WebGPU run ${((t2 - t1) / 1000).toFixed(0)} s`,
  );
  return { entries: index.cases, run };
}

function problems(entries: IndexEntry[], run: SuiteRun, family?: string): string[] {
  return entries.flatMap((e, i) =>
    family !== undefined && e.family !== family ? [] : [problemOf(e, run.results[i], run)].filter(
      (p): p is string => p !== null,
    )
  );
}

Deno.test({
  name: "TVM operator suite: each case matches TVM's llvm build or is refused as listed",
  ignore,
  sanitizeResources: false,
  fn: async (t) => {
    const ran = await runSpec({ suite: "ops" });
    if (ran === null) return;
    const { entries, run: suiteRun } = ran;
    const families = [...new Set(entries.map((e) => e.family))];
    for (const family of families) {
      await t.step(family, () => {
        const found = problems(entries, suiteRun, family);
        assert(found.length === 0, found.join("\n"));
      });
    }
    await t.step("every expected refusal and known bug is still met", () => {
      const unmet = unmetExpectations(entries, suiteRun.results, suiteRun);
      assert(
        unmet.length === 0,
        `no case meets these (remove them from tests/tvm_ops/expectations.ts): ${
          unmet.map((e) => e.label).join(", ")
        }`,
      );
    });
    // The table is the software adapter's, as CI runs it: another adapter has other bugs.
    const software = suiteRun.adapter.includes("llvmpipe");
    if (!software) console.log(`operator table not compared on ${suiteRun.adapter}`);
    await t.step({
      name: "the docs' operator table is this run's",
      ignore: !software,
      fn: async () => {
        const [page, text] = pageWith(await readPages(), TABLE_START);
        assertEquals(
          readmeTable(text),
          await formatMarkdown(opsTable(entries, suiteRun.results, suiteRun)),
          `${page}'s operator table is stale: deno task tvm:ops --write-readme`,
        );
      },
    });
  },
});

Deno.test({
  name: `TVM random-module differential: ${RANDOM_CASES} seeded modules match TVM's llvm build`,
  ignore,
  sanitizeResources: false,
  fn: async () => {
    const ran = await runSpec({ suite: "random", count: RANDOM_CASES, seed: RANDOM_SEED });
    if (ran === null) return;
    const found = problems(ran.entries, ran.run);
    assert(found.length === 0, found.join("\n"));
    const passed = ran.run.results.filter((r) => r.outcome === "pass").length;
    assert(passed >= RANDOM_CASES / 2, `only ${passed} of ${RANDOM_CASES} modules ran`);
  },
});

// The judge itself, without TVM: what makes a case fail.
const entry = (id: string, description?: string): IndexEntry => {
  const [family, op, cls, dtype] = id.split("/");
  return { id, family, op, class: cls, dtype, dir: "0", status: "built", seconds: 0, description };
};
const onCI = { unsignedI32Remainder: true };

Deno.test("TVM operator suite judge: an unlisted wrong answer fails, listed ones must say why", () => {
  const wrong = { id: "", outcome: "mismatch" as const, message: "max|Δ|/max|want| 1e-1" };
  assert(problemOf(entry("unary/exp/static/float32"), wrong, onCI)!.startsWith("SILENT WRONG"));
  // rms_norm over extent 1 was a listed TVM bug until the exporter fixed it: a wrong answer
  // there is now a silent one, as is floor_divide's on an adapter with an unsigned i32 `%`.
  assert(problemOf(entry("norm/rms_norm/one/float32"), wrong, onCI)!.startsWith("SILENT WRONG"));
  const differ = { id: "", outcome: "mismatch" as const, message: "3 of 32 elements differ" };
  assert(problemOf(entry("binary/floor_divide/static/int32"), differ, onCI) !== null);
  // small-outputs excuses a random chain through gelu at its precision, and nothing else.
  const small = {
    id: "",
    outcome: "mismatch" as const,
    message: "max|Δ|/max|want| 8.0e-5 > 0.00001",
  };
  assertEquals(
    problemOf(entry("random/m7/symbolic/float32", "float32 x[n,2,5]: gelu"), small, onCI),
    null,
  );
  assert(problemOf(entry("random/m7/symbolic/float32", "float32 x[n,2,5]: gelu"), wrong, onCI));
  assert(problemOf(entry("unary/gelu/static/float32"), small, onCI)!.startsWith("SILENT WRONG"));
  // A listed refusal must give its message and, at load, name the kernel or host function.
  const f16 = entry("unary/exp/static/float16");
  const named = 'Cannot load TVM package: p, host_functions["tir_exp"].params[0].dtype: ' +
    'tensor dtype "float16" is not supported';
  assertEquals(problemOf(f16, { id: "", outcome: "refused-at-load", message: named }, onCI), null);
  assert(
    problemOf(f16, { id: "", outcome: "refused-at-load", message: "float16 is bad" }, onCI)!
      .includes("without naming the kernel"),
  );
  assert(
    problemOf(f16, { id: "", outcome: "refused-at-load", message: "something else" }, onCI) !==
      null,
  );
  // A refusal at load is not an excuse for a case listed as refused by TVM.
  assert(
    problemOf(entry("gather/g/static/float32"), {
      id: "",
      outcome: "refused-at-load",
      message: 'kernels["k"]: i64',
    }, onCI) !== null,
  );
});

Deno.test("TVM operator suite judge: a listed entry no case meets is reported stale", () => {
  const entries = [entry("unary/exp/static/float32")];
  const unmet = unmetExpectations(entries, [{ id: "", outcome: "pass" }], onCI);
  assert(unmet.some((e) => e.label === "no-f16"));
  // An entry random modules alone meet is not required of the operator suite.
  assert(!unmet.some((e) => e.label === "small-outputs"));
});
