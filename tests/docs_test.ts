/**
 * docs/builtins.md is current: regenerated in memory from the builtins'
 * metadata, it equals the file in the repository (`deno task docs` rewrites
 * it). And every builtin has complete metadata.
 */

import { assert, assertEquals } from "@std/assert";
import { BUILTIN_TABLES } from "../builtins/install.ts";
import { builtinNamesFiles, builtinNamesModules, builtinsPage } from "../docs/generate.ts";

Deno.test("docs/builtins.md is generated from the current metadata (run `deno task docs`)", async () => {
  const file = await Deno.readTextFile(new URL("../docs/builtins.md", import.meta.url));
  assertEquals(file, await builtinsPage(), "docs/builtins.md is stale: run `deno task docs`");
});

Deno.test("ground/builtin_names.ts and ground/builtin_names/*.ts are generated from the current metadata (run `deno task docs`)", async () => {
  const modules = await builtinNamesModules();
  for (const [path, text] of modules) {
    const file = await Deno.readTextFile(new URL(`../ground/${path}`, import.meta.url));
    assertEquals(file, text, `ground/${path} is stale: run \`deno task docs\``);
  }
  // No family file is left over from a family that is gone.
  assertEquals(
    await builtinNamesFiles(),
    [...modules.keys()].filter((p) => p.startsWith("builtin_names/")).sort(),
    "ground/builtin_names/ holds a file the metadata does not generate: run `deno task docs`",
  );
});

Deno.test("every generated builtin-names file stays under 600 lines", async () => {
  for (const [path, text] of await builtinNamesModules()) {
    const lines = text.split("\n").length - 1;
    assert(lines < 600, `ground/${path} has ${lines} lines: split its family further`);
  }
});

Deno.test("every builtin carries metadata: signature, summary, devices, errors, TVM", () => {
  for (const table of BUILTIN_TABLES) {
    assert(table.title !== "" && table.file.startsWith("builtins/"), table.file);
    for (const { name, meta } of table.entries) {
      assert(/^\(.*\) → .+/.test(meta.signature), `${name}: signature ${meta.signature}`);
      assert(meta.summary.length > 10, `${name}: summary`);
      assert(meta.devices.length > 0, `${name}: devices`);
      assert(typeof meta.errors === "string", `${name}: errors`);
      assert(meta.tvm === null || meta.tvm.length > 0, `${name}: tvm`);
    }
  }
});
