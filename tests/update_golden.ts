/**
 * Rewrites the golden files in testdata/ from the programs in
 * tests/_programs.ts. Run after an intended format change and review the
 * diff: `deno task golden`.
 *
 * @module
 */

import { designDocProgram, everythingProgram, shapeHeapProgram } from "./_programs.ts";

const dir = new URL("../testdata/", import.meta.url);
const programs = {
  design_doc: designDocProgram(),
  shape_heap: shapeHeapProgram(),
  everything: everythingProgram(),
};
for (const [name, ex] of Object.entries(programs)) {
  await Deno.writeTextFile(new URL(`${name}.txt`, dir), ex.stats() + "\n" + ex.as_text());
  await Deno.writeTextFile(new URL(`${name}.releases.txt`, dir), ex.as_text({ releases: true }));
  await Deno.writeFile(new URL(`${name}.rvm`, dir), ex.save());
  console.log(`wrote testdata/${name}.{txt,releases.txt,rvm}`);
}
