/**
 * The documentation a reader reads, as the tests that check it see it: README.md first, then every
 * Markdown page under docs/. The README was once one file of ~2,900 lines; its sections now live in
 * these pages (issue 32), and every check that read the README reads them all.
 *
 * @module
 */

/** The repository root. */
export const ROOT: URL = new URL("../", import.meta.url);

/** The pages' paths relative to the root: `README.md`, then `docs/*.md` in name order. */
export async function docPages(): Promise<string[]> {
  const pages: string[] = [];
  for await (const entry of Deno.readDir(new URL("docs/", ROOT))) {
    if (entry.isFile && entry.name.endsWith(".md")) pages.push(`docs/${entry.name}`);
  }
  return ["README.md", ...pages.sort()];
}

/** Every page's text by its path relative to the root, in `docPages()`'s order. */
export async function readPages(): Promise<Map<string, string>> {
  const texts = new Map<string, string>();
  for (const path of await docPages()) {
    texts.set(path, await Deno.readTextFile(new URL(path, ROOT)));
  }
  return texts;
}

/** The one page whose text contains `needle`; throws naming the pages when none or several do. */
export function pageWith(pages: Map<string, string>, needle: string): [string, string] {
  const found = [...pages].filter(([, text]) => text.includes(needle));
  if (found.length !== 1) {
    throw new Error(
      `${found.length === 0 ? "no page" : found.map(([p]) => p).join(", ")} holds ${needle}`,
    );
  }
  return found[0];
}
