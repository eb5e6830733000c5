/**
 * Writes docs/builtins.md from the builtins' metadata (`deno task docs`):
 * `catalogueMarkdown()`, formatted by `deno fmt` with the repository's
 * settings so that the file passes `deno fmt --check`. tests/docs_test.ts
 * checks that the file is current.
 *
 * @module
 */

import { catalogueMarkdown } from "../builtins/catalogue.ts";

/** `markdown` as `deno fmt` writes it in this repository. */
export async function formatMarkdown(markdown: string): Promise<string> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["fmt", "--ext", "md", "-"],
    cwd: new URL("../", import.meta.url),
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(markdown));
  await writer.close();
  const { code, stdout, stderr } = await child.output();
  if (code !== 0) throw new Error(`deno fmt failed: ${new TextDecoder().decode(stderr)}`);
  return new TextDecoder().decode(stdout);
}

/** The current text of docs/builtins.md. */
export async function builtinsPage(): Promise<string> {
  return await formatMarkdown(catalogueMarkdown());
}

if (import.meta.main) {
  const target = new URL("./builtins.md", import.meta.url);
  await Deno.writeTextFile(target, await builtinsPage());
  console.log(`Wrote ${target.pathname}`);
}
