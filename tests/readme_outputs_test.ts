/**
 * The README's generated figures and sample outputs (docs/readme_outputs.ts) agree with what the
 * code makes now: the bundle size within 10%, the profile sample row for row (times aside), the
 * REPL's print of a 64×64 tensor exactly.
 * `deno task readme` rewrites them.
 */

import { assert, assertEquals } from "@std/assert";
import { OUTPUTS, section, staleOutputs } from "../docs/readme_outputs.ts";

const readme = await Deno.readTextFile(new URL("../README.md", import.meta.url));

Deno.test("README: the generated figures and sample outputs are current (run `deno task readme`)", async () => {
  assertEquals(await staleOutputs(readme), []);
});

Deno.test("README: the checks can fail: a wrong size and a changed profile row are stale", async () => {
  const size = section(readme, "bundle-size")!;
  const tooSmall = readme.slice(0, size.start) + "about 290 KiB, 80 KiB gzipped" +
    readme.slice(size.end);
  const profile = section(readme, "profile-output")!;
  const body = readme.slice(profile.start, profile.end);
  const wrongCalls = readme.slice(0, profile.start) +
    body.replace(/(vm\.op\.softmax +packed +)1/, "$12") + readme.slice(profile.end);
  assert(wrongCalls !== readme, "the sample has a vm.op.softmax row");
  const print = section(readme, "tensor-print")!;
  const fewerRows = readme.slice(0, print.start) +
    readme.slice(print.start, print.end).replace(/^ \[ 128,.*\n/m, "") + readme.slice(print.end);
  assert(fewerRows !== readme, "the tensor print shows the row starting at 128");
  assertEquals(await staleOutputs(tooSmall), ["bundle-size"]);
  assertEquals(await staleOutputs(wrongCalls), ["profile-output"]);
  assertEquals(await staleOutputs(fewerRows), ["tensor-print"]);
  assertEquals(OUTPUTS.map((o) => o.name), ["bundle-size", "profile-output", "tensor-print"]);
});
