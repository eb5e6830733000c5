/**
 * Lists the exports of the library's modules that no library module
 * imports and no entry point re-exports: what only tests, benchmarks or
 * nobody use (issue 32). Tests may import internal modules directly, so an
 * export a test needs may stay; one that is there only for tests should
 * not sit in a module's public face without saying so. Prints one line per
 * export: the file, the name, and who else imports it (tests/, bench/,
 * examples/, tools/, docs/, or nobody).
 *
 * ```sh
 * deno run --allow-read tools/test_only_exports.ts
 * ```
 *
 * By regular expressions over the source (imports and `export { … } from`
 * lists, `export function|const|class|…` declarations), not the type
 * checker: an export used only inside its own file counts as unused, and
 * types are listed too (a type a public signature names must stay
 * exported for `deno doc --lint`; judge those by hand).
 *
 * @module
 */

import { libraryFiles, tsFilesUnder } from "../tests/check_layers.ts";

const ROOT = new URL("../", import.meta.url);
const ENTRIES = ["mod.ts", "runtime.ts", "testing.ts", "models.ts"];
const OTHERS = ["tests", "bench", "examples", "tools", "docs", "web"];

/** `spec` imported from `from`, as a path relative to the repository (null: not a relative import). */
function resolve(from: string, spec: string): string | null {
  if (!spec.startsWith(".")) return null;
  const url = new URL(spec, new URL(from, ROOT));
  return url.pathname.slice(ROOT.pathname.length);
}

/** The names `file` imports (or re-exports) from each file, by resolved path. */
function importsOf(file: string, text: string): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const add = (path: string | null, name: string) => {
    if (path === null) return;
    if (!out.has(path)) out.set(path, new Set());
    out.get(path)!.add(name);
  };
  const lists = /(?:import|export)\s+(?:type\s+)?\{([^}]*)\}\s*from\s*"([^"]+)"/g;
  for (const m of text.matchAll(lists)) {
    const path = resolve(file, m[2]);
    for (const part of m[1].split(",")) {
      const name = part.trim().replace(/^type\s+/, "").split(/\s+as\s+/)[0].trim();
      if (name !== "") add(path, name);
    }
  }
  for (const m of text.matchAll(/export\s+\*\s+from\s*"([^"]+)"/g)) add(resolve(file, m[1]), "*");
  for (const m of text.matchAll(/import\s+\*\s+as\s+\w+\s+from\s*"([^"]+)"/g)) {
    add(resolve(file, m[1]), "*");
  }
  for (const m of text.matchAll(/import\(\s*"([^"]+)"\s*\)/g)) add(resolve(file, m[1]), "*");
  return out;
}

const declared =
  /export\s+(?:declare\s+)?(?:async\s+)?(?:function\*?|const|let|class|interface|type|enum|abstract\s+class)\s+([A-Za-z_$][\w$]*)/g;

// The layer check's walk: the same library files, and its rule for what a source file is.
const library = await libraryFiles(ROOT);
const others = (await Promise.all(OTHERS.map((dir) => tsFilesUnder(ROOT, `${dir}/`)))).flat();
const importedBy = new Map<string, Map<string, string[]>>(); // target → name → importers
for (const file of [...library, ...others]) {
  const text = Deno.readTextFileSync(new URL(file, ROOT));
  for (const [target, names] of importsOf(file, text)) {
    if (!importedBy.has(target)) importedBy.set(target, new Map());
    for (const name of names) {
      const by = importedBy.get(target)!;
      if (!by.has(name)) by.set(name, []);
      by.get(name)!.push(file);
    }
  }
}

const isLibrary = (f: string) => library.includes(f);
let count = 0;
for (const file of library.filter((f) => !ENTRIES.includes(f)).sort()) {
  const text = Deno.readTextFileSync(new URL(file, ROOT));
  const by = importedBy.get(file) ?? new Map<string, string[]>();
  if ((by.get("*") ?? []).some(isLibrary)) continue;
  for (const m of text.matchAll(declared)) {
    const name = m[1];
    const users = by.get(name) ?? [];
    if (users.some(isLibrary)) continue;
    const kind = /interface|type/.test(m[0]) ? "type" : "value";
    const where = [...new Set(users.map((u) => u.split("/")[0]))].join(", ") || "nobody";
    console.log(`${file}\t${kind}\t${name}\t${where}`);
    count++;
  }
}
console.error(`${count} exports no library module imports`);
