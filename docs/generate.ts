/**
 * Writes docs/builtins.md, ground/builtin_names.ts and ground/builtin_names/*.ts
 * from the builtins' metadata (`deno task docs`): `catalogueMarkdown()` and
 * `catalogueTypeScript()`, formatted by `deno fmt` with the repository's
 * settings so that the files pass `deno fmt --check`. A family file whose
 * family is gone is deleted. tests/docs_test.ts checks that all are current.
 *
 * @module
 */

import { catalogueMarkdown, catalogueTypeScript } from "../builtins/catalogue.ts";

/** `markdown` as `deno fmt` writes it in this repository. */
export async function formatMarkdown(markdown: string): Promise<string> {
  return await formatText(markdown, "md");
}

/** `text` (of file type `ext`) as `deno fmt` writes it in this repository. */
async function formatText(text: string, ext: "md" | "ts"): Promise<string> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["fmt", "--ext", ext, "-"],
    cwd: new URL("../", import.meta.url),
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(text));
  await writer.close();
  const { code, stdout, stderr } = await child.output();
  if (code !== 0) throw new Error(`deno fmt failed: ${new TextDecoder().decode(stderr)}`);
  return new TextDecoder().decode(stdout);
}

/** The current text of docs/builtins.md. */
export async function builtinsPage(): Promise<string> {
  return await formatMarkdown(catalogueMarkdown());
}

/** The folder the generated family files live in (ground/builtin_names/). */
export const BUILTIN_NAMES_DIR: URL = new URL("../ground/builtin_names/", import.meta.url);

/**
 * The current text of ground/builtin_names.ts and of each ground/builtin_names/<family>.ts,
 * keyed by path relative to ground/.
 */
export async function builtinNamesModules(): Promise<Map<string, string>> {
  const modules = new Map<string, string>();
  for (const { path, text } of catalogueTypeScript()) {
    modules.set(path, await formatText(text, "ts"));
  }
  return modules;
}

/** The `.ts` files now in ground/builtin_names/, as paths relative to ground/. */
export async function builtinNamesFiles(): Promise<string[]> {
  const files: string[] = [];
  try {
    for await (const entry of Deno.readDir(BUILTIN_NAMES_DIR)) {
      if (entry.isFile && entry.name.endsWith(".ts")) files.push(`builtin_names/${entry.name}`);
    }
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return files.sort();
}

if (import.meta.main) {
  const page = new URL("./builtins.md", import.meta.url);
  await Deno.writeTextFile(page, await builtinsPage());
  console.log(`Wrote ${page.pathname}`);
  const modules = await builtinNamesModules();
  await Deno.mkdir(BUILTIN_NAMES_DIR, { recursive: true });
  for (const stale of await builtinNamesFiles()) {
    if (modules.has(stale)) continue;
    const target = new URL(`../ground/${stale}`, import.meta.url);
    await Deno.remove(target);
    console.log(`Removed ${target.pathname}`);
  }
  for (const [path, text] of modules) {
    const target = new URL(`../ground/${path}`, import.meta.url);
    await Deno.writeTextFile(target, text);
    console.log(`Wrote ${target.pathname}`);
  }
}
