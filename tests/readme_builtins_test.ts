// The README's builtin table lists exactly the builtins installBuiltins() registers.
import { assertEquals } from "@std/assert";
import { BUILTIN_TABLES } from "../builtins/install.ts";

Deno.test("README: the builtin table names every registered vm.builtin.* and nothing else", async () => {
  const readme = await Deno.readTextFile(new URL("../README.md", import.meta.url));
  const section = readme.slice(readme.indexOf("## Builtins"), readme.indexOf("## Figures"));
  const tableRows = section.split("\n").filter((l) => l.startsWith("| `"));
  const listed = new Set(
    tableRows.flatMap((row) =>
      [...row.split("|")[1].matchAll(/`([a-z_.0-9]+)`/g)].map((m) => m[1])
    ),
  );
  const registered = BUILTIN_TABLES.flatMap((t) => t.entries.map((e) => e.name))
    .filter((n) => n.startsWith("vm.builtin."))
    .map((n) => n.slice("vm.builtin.".length));
  assertEquals([...listed].sort(), registered.sort());
  const ops = BUILTIN_TABLES.flatMap((t) => t.entries.map((e) => e.name))
    .filter((n) => n.startsWith("vm.op."));
  for (const op of ops) {
    const short = op.slice("vm.op.".length);
    assertEquals(section.includes(`\`${short}\``) || section.includes(`\`${op}\``), true, op);
  }
});
