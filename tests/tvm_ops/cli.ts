/**
 * The operator suite and the random-module differential by hand, at any
 * size (not part of CI beyond what `tvm_ops_test.ts` runs):
 *
 *     deno task tvm:ops                       the operator suite
 *     deno task tvm:ops --cases 10000         10^4 random modules (--seed S, default 28)
 *     deno task tvm:ops --write-readme        the operator suite, and docs/tvm.md's table from it
 *
 * Prints what became of the cases and how long the build and the run took;
 * exits with 1 if a case neither passes nor matches `expectations.ts`.
 *
 * @module
 */

import { buildSuite, runSuite, type SuiteSpec } from "./suite_cache.ts";
import { problemOf } from "./expectations.ts";
import { formatMarkdown, opsTable, readmeTable, TABLE_START } from "./table.ts";
import { pageWith, readPages, ROOT } from "../../docs/pages.ts";

const args = Deno.args;
const value = (flag: string): string | undefined => {
  const at = args.indexOf(flag);
  return at >= 0 ? args[at + 1] : undefined;
};
const cases = value("--cases");
const spec: SuiteSpec = cases === undefined
  ? { suite: "ops" }
  : { suite: "random", count: Number(cases), seed: Number(value("--seed") ?? 28) };
if (spec.suite === "random" && !(Number.isSafeInteger(spec.count) && spec.count > 0)) {
  console.error(`--cases takes a positive integer, not ${cases}`);
  Deno.exit(2);
}

const t0 = performance.now();
const { dir, index, built } = await buildSuite(spec);
const t1 = performance.now();
const run = await runSuite(dir);
const t2 = performance.now();
if (typeof run === "string") {
  console.error(run);
  Deno.exit(1);
}
const results = run.results;
const counts = new Map<string, number>();
for (const r of results) counts.set(r.outcome, (counts.get(r.outcome) ?? 0) + 1);
const found = index.cases.map((e, i) => problemOf(e, results[i], run)).filter((p) => p !== null);
for (const p of found) console.log(p);
console.log(
  `${
    spec.suite === "ops" ? "operator suite" : `${spec.count} random modules (seed ${spec.seed})`
  }: ` +
    `${index.cases.length} cases: ${[...counts].map(([o, n]) => `${n} ${o}`).join(", ")}; ` +
    `${found.length} not as expected`,
);
console.log(
  `TVM build: ${
    built ? `${((t1 - t0) / 1000).toFixed(1)} s` : `cached (${index.seconds} s when built)`
  }; ` +
    `WebGPU run: ${((t2 - t1) / 1000).toFixed(1)} s; in ${dir.pathname}`,
);
if (run.unsignedI32Remainder) {
  console.log("the adapter computes WGSL's i32 % as an unsigned remainder (adapter_probe.ts)");
}
if (args.includes("--write-readme")) {
  if (spec.suite !== "ops") throw new Error("--write-readme takes the operator suite (no --cases)");
  const [page, text] = pageWith(await readPages(), TABLE_START);
  const old = readmeTable(text)!;
  const table = await formatMarkdown(opsTable(index.cases, results, run));
  await Deno.writeTextFile(new URL(page, ROOT), text.replace(old, table));
  console.log(`${page}: operator table written`);
}
Deno.exit(found.length === 0 ? 0 : 1);
