/**
 * Every relative link of the README and of docs/*.md leads somewhere: the file or directory exists,
 * and an anchor (`#security-model`, `guide.md#profiling`) names a heading or an `<a id>` of the
 * page it points into, as GitHub makes them. When the README's sections moved into docs/ (issue 32)
 * its internal links were rewritten; this keeps them, and every later move, honest.
 */

import { assertEquals } from "@std/assert";
import { readPages, ROOT } from "../docs/pages.ts";

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\p{M}_\- ]/gu, "").replaceAll(" ", "-");
}

/** `text` without its fenced code blocks and inline code spans, line numbers kept. */
function prose(text: string): string[] {
  let fenced = false;
  return text.split("\n").map((line) => {
    if (line.startsWith("```")) {
      fenced = !fenced;
      return "";
    }
    return fenced ? "" : line.replace(/`[^`]*`/g, "``");
  });
}

/** The anchors a page defines: its headings' (numbered when repeated, as GitHub does) and ids. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of text.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    if (fenced) continue;
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (heading !== null) {
      const base = slug(heading[1]);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      out.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a (?:id|name)="([^"]+)"/g)) out.add(m[1]);
  }
  return out;
}

/** The relative links of `pages` (path → text) that lead nowhere, as `page:line: target`. */
export async function brokenLinks(pages: Map<string, string>): Promise<string[]> {
  const broken: string[] = [];
  for (const [path, text] of pages) {
    const lines = prose(text);
    for (let i = 0; i < lines.length; i++) {
      for (const m of lines[i].matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1];
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, …
        const [file, anchor] = target.split("#", 2);
        const url = file === "" ? new URL(path, ROOT) : new URL(file, new URL(path, ROOT));
        const where = `${path}:${i + 1}: ${target}`;
        const relative = url.href.slice(ROOT.href.length);
        let page = pages.get(relative);
        if (page === undefined) {
          try {
            await Deno.stat(url);
          } catch {
            broken.push(`${where} (no such file)`);
            continue;
          }
          if (anchor !== undefined && relative.endsWith(".md")) {
            page = await Deno.readTextFile(url);
          }
        }
        if (anchor !== undefined && page !== undefined && !anchors(page).has(anchor)) {
          broken.push(`${where} (no such anchor)`);
        }
      }
    }
  }
  return broken;
}

Deno.test("docs: every relative link and anchor in README.md and docs/*.md resolves", async () => {
  assertEquals(await brokenLinks(await readPages()), []);
});

Deno.test("docs links: a missing file, a missing anchor and a repeated heading are seen", async () => {
  const pages = new Map([
    ["README.md", "# A\n\n## Two words: here\n\n## B\n\n## B\n\n[x](#two-words-here) [y](#b-1)"],
    ["docs/p.md", "## Q\n\n[up](../README.md#b) [no](../README.md#c) [gone](nowhere.md) [q](#q)"],
  ]);
  assertEquals(await brokenLinks(pages), [
    "docs/p.md:3: ../README.md#c (no such anchor)",
    "docs/p.md:3: nowhere.md (no such file)",
  ]);
  assertEquals(slug("Command line: `relaxvm`"), "command-line-relaxvm");
  assertEquals(
    slug("Real weights: all-MiniLM-L6-v2 sentence embeddings"),
    "real-weights-all-minilm-l6-v2-sentence-embeddings",
  );
});
