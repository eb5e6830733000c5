// The builtin table (the README's once, docs/architecture.md's "Builtins" now) lists exactly the
// builtins installBuiltins() registers.
import { assert, assertEquals } from "@std/assert";
import { BUILTIN_TABLES } from "../builtins/install.ts";
import { pageWith, readPages } from "../docs/pages.ts";

Deno.test("docs: the builtin table names every registered vm.builtin.* and nothing else", async () => {
  const [, page] = pageWith(await readPages(), "\n## Builtins\n");
  const from = page.indexOf("\n## Builtins\n");
  const next = page.indexOf("\n## ", from + 1);
  const section = page.slice(from, next < 0 ? page.length : next);
  assert(section.split("\n").filter((l) => l.startsWith("| `")).length > 20, section);
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
