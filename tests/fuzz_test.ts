/**
 * The fuzz families of tests/fuzz/, a few thousand cases each with fixed
 * seeds, on every test run; `deno task fuzz` runs 100,000 per family.
 */

import { assertEquals } from "@std/assert";
import { FAMILIES } from "./fuzz/run_fuzz.ts";
import { Random } from "./fuzz/random.ts";
import { bugCount, reportTable } from "./fuzz/report.ts";

const CASES = 2000;

for (const [name, family] of Object.entries(FAMILIES)) {
  Deno.test(`fuzz: ${name} (${CASES} cases) finds no bug`, async () => {
    const report = await family(new Random(20261122), CASES);
    assertEquals(report.tried, CASES);
    assertEquals(bugCount(report), 0, `${reportTable([report])}\n${report.examples.join("\n")}`);
  });
}
