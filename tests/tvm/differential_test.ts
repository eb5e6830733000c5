/**
 * The differential suite against the pinned TVM (tools/tvm/.venv): 1,000
 * seeded programs built by TVM's ExecBuilder and relaxvm's must give
 * identical bytes, as_text, as_python, stats and run results (figures
 * printed), and TVM must load the file relaxvm wrote and run it to the
 * results of its own.
 * `deno task tvm:differential` runs 10,000.
 *
 * Without tools/tvm/.venv the test is ignored with a message saying how to
 * set it up, unless RELAXVM_REQUIRE_TVM=1 (CI), where it fails.
 */

import { assertEquals } from "@std/assert";
import { differential, formatFigures } from "./differential.ts";
import { generatePrograms } from "./generator.ts";
import { ignoreWithoutTvm } from "./tvm_python.ts";

const PROGRAMS = 1000;
const SEED = 20261125;

Deno.test({
  name: `TVM differential: ${PROGRAMS} programs identical in bytes, text, python, stats, results`,
  ignore: ignoreWithoutTvm("TVM differential"),
  async fn() {
    const f = await differential(generatePrograms(SEED, PROGRAMS));
    console.log(formatFigures(f));
    const detail = `${formatFigures(f)}\n${f.mismatches.join("\n---\n")}`;
    assertEquals(f.built, f.tried, detail);
    for (const n of [f.bytes, f.text, f.python, f.roundTrip, f.loadedByTvm]) {
      assertEquals(n, f.built, detail);
    }
    assertEquals(f.ranByTvm, f.runs, detail);
    assertEquals(f.stats, f.statsComparable, detail);
    assertEquals(f.results, f.runs, detail);
    // The suite must exercise what it claims to: stats and runs on a good share of programs.
    assertEquals(f.runs, PROGRAMS / 4);
  },
});
