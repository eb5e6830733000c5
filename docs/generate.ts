/**
 * Writes docs/builtins.md and ground/builtin_names.ts from the builtins'
 * metadata (`deno task docs`): `catalogueMarkdown()` and
 * `catalogueTypeScript()`, formatted by `deno fmt` with the repository's
 * settings so that the files pass `deno fmt --check`. tests/docs_test.ts
 * checks that both are current.
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

/** The current text of ground/builtin_names.ts. */
export async function builtinNamesModule(): Promise<string> {
  return await formatText(catalogueTypeScript(), "ts");
}

if (import.meta.main) {
  for (
    const [path, text] of [
      ["./builtins.md", builtinsPage],
      ["../ground/builtin_names.ts", builtinNamesModule],
    ] as const
  ) {
    const target = new URL(path, import.meta.url);
    await Deno.writeTextFile(target, await text());
    console.log(`Wrote ${target.pathname}`);
  }
}
