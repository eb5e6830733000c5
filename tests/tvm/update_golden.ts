/**
 * `deno task tvm:golden`: rebuilds testdata/tvm/ with the pinned TVM
 * (tools/tvm/.venv): for each program of golden_programs.ts, the bytes TVM
 * writes (`<name>.tvm`), and in outputs.json its as_text, as_python, stats
 * and run results. tests/tvm/golden_test.ts reads them without Python.
 *
 * @module
 */

import { fromHex } from "./description.ts";
import { goldenPrograms } from "./golden_programs.ts";
import { buildWithTvm } from "./tvm_python.ts";

const dir = new URL("../../testdata/tvm/", import.meta.url);
const programs = goldenPrograms();
const { tvm, programs: outputs } = await buildWithTvm(programs);
await Deno.mkdir(dir, { recursive: true });
const texts: Record<string, unknown> = {};
for (const [i, p] of programs.entries()) {
  const o = outputs[i];
  if (o.bytes === undefined) throw new Error(`TVM cannot build ${p.name}: ${o.build_error}`);
  await Deno.writeFile(new URL(`${p.name}.tvm`, dir), fromHex(o.bytes));
  const { bytes: _, ...rest } = o;
  texts[p.name] = rest;
}
await Deno.writeTextFile(
  new URL("programs.json", dir),
  JSON.stringify({ tvm, programs }, null, 1) + "\n",
);
await Deno.writeTextFile(new URL("outputs.json", dir), JSON.stringify(texts, null, 1) + "\n");
console.log(`wrote ${programs.length} programs to testdata/tvm/`);
