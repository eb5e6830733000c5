/**
 * docs/builtins.md is current: regenerated in memory from the builtins'
 * metadata, it equals the file in the repository (`deno task docs` rewrites
 * it). And every builtin has complete metadata.
 */

import { assert, assertEquals } from "@std/assert";
import { BUILTIN_TABLES } from "../builtins/install.ts";
import { builtinNamesModule, builtinsPage } from "../docs/generate.ts";

Deno.test("docs/builtins.md is generated from the current metadata (run `deno task docs`)", async () => {
  const file = await Deno.readTextFile(new URL("../docs/builtins.md", import.meta.url));
  assertEquals(file, await builtinsPage(), "docs/builtins.md is stale: run `deno task docs`");
});

Deno.test("ground/builtin_names.ts is generated from the current metadata (run `deno task docs`)", async () => {
  const file = await Deno.readTextFile(new URL("../ground/builtin_names.ts", import.meta.url));
  assertEquals(file, await builtinNamesModule(), "builtin_names.ts is stale: run `deno task docs`");
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
