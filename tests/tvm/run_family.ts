/**
 * Runs a family of exported TVM packages (`tools/tvm/matmul_family.py OUT_DIR`
 * writes one) on WebGPU and compares each case with TVM's `llvm` build:
 *
 *     deno run -A tests/tvm/run_family.ts OUT_DIR [--bound 1e-5]
 *
 * Prints one line per case: max |got - want| / max |want| of each
 * reference input, or the reason the package was refused at export or at
 * load. Exits 1 when a case that loaded is beyond the bound.
 *
 * @module
 */

import { loadTVMPackage, TVMPackageError } from "../../mod.ts";
import { compareWithReference, type ReferenceCase } from "../_tvm_packages.ts";

const dir = Deno.args[0];
if (dir === undefined) throw new Error("usage: run_family.ts OUT_DIR [--bound 1e-5]");
const at = Deno.args.indexOf("--bound");
const bound = at >= 0 ? Number(Deno.args[at + 1]) : 1e-5;
const index = JSON.parse(await Deno.readTextFile(`${dir}/index.json`)) as {
  cases: { name: string; exported: boolean; reason?: string }[];
};
let wrong = 0, passed = 0, refused = 0;
for (const c of index.cases) {
  if (!c.exported) {
    refused++;
    console.log(`${c.name}: refused at export: ${c.reason}`);
    continue;
  }
  const path = `${dir}/${c.name}`;
  try {
    using pkg = await loadTVMPackage(path);
    const cases = (JSON.parse(await Deno.readTextFile(`${path}/reference.json`)) as {
      cases: ReferenceCase[];
    }).cases;
    const { worst } = await compareWithReference(c.name, pkg, bound, cases);
    const ok = worst <= bound;
    if (ok) passed++;
    else wrong++;
    console.log(
      `${c.name}: ${cases.length} sizes, worst ${worst.toExponential(2)} ${ok ? "ok" : "WRONG"}`,
    );
  } catch (e) {
    if (!(e instanceof TVMPackageError)) throw e;
    refused++;
    console.log(`${c.name}: refused at load: ${e.message}`);
  }
}
console.log(`${passed} passed, ${refused} refused, ${wrong} wrong (bound ${bound})`);
if (wrong > 0) Deno.exit(1);
