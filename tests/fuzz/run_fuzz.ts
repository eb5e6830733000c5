/**
 * `deno task fuzz`: runs every fuzz family with a fixed seed and prints a
 * table of tried / loaded / rejected / other exceptions / hangs / leaks /
 * over-budget constructions / wrong results. Exits with 1 if any of the last
 * five is not 0.
 *
 *   deno task fuzz                      # 100,000 cases per family
 *   deno task fuzz --cases 2000 --family loader --seed 7
 *
 * @module
 */

import { bombFamily } from "./bomb_family.ts";
import { builtinFamily } from "./builtin_family.ts";
import { cacheFamily } from "./cache_family.ts";
import { cliFamily } from "./cli_family.ts";
import { closureFamily } from "./closure_family.ts";
import { hostileFamily } from "./hostile_family.ts";
import { kernelFamily } from "./kernel_family.ts";
import { loaderFamily } from "./loader_family.ts";
import { onnxFamily } from "./onnx_family.ts";
import { packagePathsFamily } from "./package_paths_family.ts";
import { runFamily } from "./run_family.ts";
import { tvmFormatFamily } from "./tvm_format_family.ts";
import { tvmPackageFamily } from "./tvm_package_family.ts";
import { Random } from "./random.ts";
import { bugCount, type FamilyReport, reportTable } from "./report.ts";

/** The families, by name. */
export const FAMILIES: Record<string, (rand: Random, cases: number) => Promise<FamilyReport>> = {
  loader: loaderFamily,
  run: runFamily,
  builtins: builtinFamily,
  hostile: hostileFamily,
  bombs: bombFamily,
  tvm: tvmFormatFamily,
  tvm_package: tvmPackageFamily,
  paths: packagePathsFamily,
  cache: cacheFamily,
  closures: closureFamily,
  cli: cliFamily,
  kernels: kernelFamily,
  onnx: onnxFamily,
};

/** Runs the chosen families and returns their reports. */
export async function runFuzz(
  cases: number,
  seed: number,
  only?: string,
): Promise<FamilyReport[]> {
  const reports: FamilyReport[] = [];
  for (const [name, family] of Object.entries(FAMILIES)) {
    if (only !== undefined && name !== only) continue;
    reports.push(await family(new Random(seed), cases));
  }
  return reports;
}

if (import.meta.main) {
  const flag = (name: string) => {
    const i = Deno.args.indexOf(`--${name}`);
    return i >= 0 ? Deno.args[i + 1] : undefined;
  };
  const cases = Number(flag("cases") ?? 100_000);
  const seed = Number(flag("seed") ?? 20261122);
  const reports = await runFuzz(cases, seed, flag("family"));
  console.log(reportTable(reports));
  for (const r of reports) for (const example of r.examples) console.log(`${r.family}: ${example}`);
  if (reports.some((r) => bugCount(r) > 0)) Deno.exit(1);
}
