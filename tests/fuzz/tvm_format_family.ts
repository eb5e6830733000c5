/**
 * Fuzz family "tvm": bytes that are almost TVM executables. The corpus is
 * the golden files TVM 0.27 wrote (testdata/tvm/) and random programs saved
 * in TVM's format; each case cuts one short, flips bytes, writes TVM's edge
 * values (special registers, operand kinds, counts near 2^32 and 2^63,
 * negative sizes) into 8-byte fields at any offset, or splices in another
 * file. `load` must reject it with a `LoadError` or return an executable
 * that prints, writes back exactly the bytes it read, and loads into a VM
 * within budget; any other exception, a slow case, a changed round trip or
 * memory left allocated is a bug.
 *
 * @module
 */

import { mutate, runLoadCases } from "./loader_family.ts";
import { randomProgram } from "./program_generator.ts";
import type { Random } from "./random.ts";
import { emptyReport, type FamilyReport, recordBug } from "./report.ts";

const EDGE_I64 = [
  0n,
  1n,
  -1n,
  -2n,
  2n ** 54n, // %void
  2n ** 54n + 1n, // %vm
  2n ** 51n,
  -(2n ** 51n),
  (1n << 56n) | 5n, // an immediate 5
  (2n << 56n) | 1000n, // constant 1000
  (3n << 56n) | 7n, // function 7
  (4n << 56n) | 1n, // no such kind
  2n ** 32n,
  2n ** 40n,
  2n ** 62n,
  2n ** 63n - 1n,
  -(2n ** 63n),
];

/** One TVM-flavoured mutation of `bytes`, or a generic one (loader_family.ts). */
function mutateTvm(rand: Random, bytes: Uint8Array, other: Uint8Array): Uint8Array {
  if (rand.chance(0.5)) return mutate(rand, bytes, other);
  const out = bytes.slice();
  const view = new DataView(out.buffer);
  for (let k = rand.between(1, 2); k > 0; k--) {
    const at = rand.int(Math.max(1, out.length - 8));
    if (rand.chance(0.2)) {
      view.setInt32(at, rand.pick([0, 1, 2, 3, 5, 65, 69, 70, -1, 1 << 30]), true);
    } else view.setBigInt64(at, BigInt.asIntN(64, rand.pick(EDGE_I64)), true);
  }
  return out;
}

/** The golden files TVM wrote and `randomCount` random programs in TVM's format. */
async function corpus(rand: Random, randomCount: number): Promise<Uint8Array[]> {
  const dir = new URL("../../testdata/tvm/", import.meta.url);
  const out: Uint8Array[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (entry.name.endsWith(".tvm")) out.push(await Deno.readFile(new URL(entry.name, dir)));
  }
  out.sort((a, b) => a.length - b.length); // readDir's order is the file system's
  for (let i = 0; i < randomCount; i++) {
    using ex = randomProgram(rand);
    out.push(ex.save({ format: "tvm" }));
  }
  return out;
}

function same(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Runs `cases` TVM-format loader cases from `rand`'s sequence. */
export async function tvmFormatFamily(rand: Random, cases: number): Promise<FamilyReport> {
  const report = emptyReport("tvm");
  runLoadCases(report, rand, await corpus(rand, 40), cases, mutateTvm, (ex, bytes, i) => {
    ex.as_text();
    ex.as_python();
    ex.stats();
    if (!same(ex.save({ format: "tvm" }), bytes)) {
      recordBug(report, "wrong", `case ${i}: loaded, but does not write back the same bytes`);
    }
  });
  return report;
}
