/**
 * The documentation's generated figures and sample outputs (docs/readme_outputs.ts) agree with what
 * the code makes now, in whichever page (README.md or docs/*.md) holds them: the bundle size within
 * 10%, the profile sample row for row (times aside), the REPL's print of a 64×64 tensor exactly.
 * `deno task readme` rewrites them.
 */

import { assert, assertEquals } from "@std/assert";
import { OUTPUTS, section, staleOutputs } from "../docs/readme_outputs.ts";
import { readPages } from "../docs/pages.ts";

const pages = await readPages();

/** The page holding `name`'s markers, and its text. */
function holder(name: string): [string, string] {
  const found = [...pages].filter(([, text]) => section(text, name) !== null);
  assertEquals(found.length, 1, `${name}: ${found.map(([p]) => p)}`);
  return found[0];
}

/** The pages with `path`'s text replaced. */
function withPage(path: string, text: string): Map<string, string> {
  return new Map([...pages].map(([p, t]) => [p, p === path ? text : t]));
}

Deno.test("docs: the generated figures and sample outputs are current (run `deno task readme`)", async () => {
  assertEquals(await staleOutputs(pages), []);
});

Deno.test("docs: the checks can fail: a wrong size and a changed profile row are stale", async () => {
  const [sizePath, sizePage] = holder("bundle-size");
  const size = section(sizePage, "bundle-size")!;
  const tooSmall = sizePage.slice(0, size.start) + "about 290 KiB, 80 KiB gzipped" +
    sizePage.slice(size.end);
  const [profilePath, profilePage] = holder("profile-output");
  const profile = section(profilePage, "profile-output")!;
  const body = profilePage.slice(profile.start, profile.end);
  const wrongCalls = profilePage.slice(0, profile.start) +
    body.replace(/(vm\.op\.softmax +packed +)1/, "$12") + profilePage.slice(profile.end);
  assert(wrongCalls !== profilePage, "the sample has a vm.op.softmax row");
  const [printPath, printPage] = holder("tensor-print");
  const print = section(printPage, "tensor-print")!;
  const fewerRows = printPage.slice(0, print.start) +
    printPage.slice(print.start, print.end).replace(/^ \[ 128,.*\n/m, "") +
    printPage.slice(print.end);
  assert(fewerRows !== printPage, "the tensor print shows the row starting at 128");
  assertEquals(await staleOutputs(withPage(sizePath, tooSmall)), ["bundle-size"]);
  assertEquals(await staleOutputs(withPage(profilePath, wrongCalls)), ["profile-output"]);
  assertEquals(await staleOutputs(withPage(printPath, fewerRows)), ["tensor-print"]);
  assertEquals(OUTPUTS.map((o) => o.name), ["bundle-size", "profile-output", "tensor-print"]);
});

Deno.test("docs: a passage with no markers, or markers in two pages, is reported", async () => {
  const [printPath, printPage] = holder("tensor-print");
  const gone = printPage.replace("<!-- readme:tensor-print -->", "");
  assert((await staleOutputs(withPage(printPath, gone))).includes("tensor-print (no markers)"));
  const twice = new Map(pages).set("docs/copy.md", printPage);
  assert(
    (await staleOutputs(twice)).includes(`tensor-print (markers in ${printPath}, docs/copy.md)`),
  );
});
