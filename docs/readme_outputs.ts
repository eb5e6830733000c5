/**
 * The README's figures and sample outputs that a script can produce, produced by this script so
 * they cannot drift from the code (`deno task readme` rewrites them; tests/readme_outputs_test.ts
 * fails while one is stale). Each sits between markers in one page of the documentation (README.md
 * or docs/*.md; today docs/guide.md holds them all):
 *
 * ```text
 * <!-- readme:bundle-size -->about 490 KiB, 130 KiB gzipped<!-- /readme -->
 * <!-- readme:profile-output -->
 * ```text
 * ...what the ```ts block above prints, run as it stands in a fresh process...
 * ```
 * <!-- /readme -->
 * ```
 *
 * What varies between runs is compared loosely: the bundle's sizes within 10% (they move with
 * every change of the library, and are written rounded), the profile's times not at all (its
 * rows, calls and bytes exactly, in any order: the order is by time).
 *
 * @module
 */

import { buildBundles } from "../web/bundle.ts";
import { readPages, ROOT } from "./pages.ts";

const MOD_URL = new URL("../mod.ts", import.meta.url).href;

/** `text` between `<!-- readme:name -->` and the next `<!-- /readme -->`, or null. */
export function section(readme: string, name: string): { start: number; end: number } | null {
  const open = `<!-- readme:${name} -->`;
  const at = readme.indexOf(open);
  if (at < 0) return null;
  const start = at + open.length;
  const end = readme.indexOf("<!-- /readme -->", start);
  return end < 0 ? null : { start, end };
}

/** One generated passage: how to make it, and whether what the README says still holds. */
interface Output {
  /** The marker name. */
  name: string;
  /** The text to put between the markers now. */
  make(readme: string): Promise<string>;
  /** Whether `current` (in the README) agrees with `fresh` (made now). */
  agrees(current: string, fresh: string): boolean;
}

/** The size of `text` in UTF-8 bytes, and gzipped. */
async function sizes(text: string): Promise<{ bytes: number; gzipped: number }> {
  const bytes = new TextEncoder().encode(text);
  const gz = new Response(new Blob([bytes]).stream().pipeThrough(new CompressionStream("gzip")));
  return { bytes: bytes.length, gzipped: (await gz.arrayBuffer()).byteLength };
}

/** `about 490 KiB, 130 KiB gzipped`, rounded to tens of KiB. */
function sizeText({ bytes, gzipped }: { bytes: number; gzipped: number }): string {
  const kib = (n: number) => Math.round(n / 10240) * 10;
  return `about ${kib(bytes)} KiB, ${kib(gzipped)} KiB gzipped`;
}

const SIZE = /^about (\d+) KiB, (\d+) KiB gzipped$/;

const bundleSize: Output = {
  name: "bundle-size",
  async make() {
    return sizeText(await sizes((await buildBundles())["relaxvm.js"]));
  },
  agrees(current, fresh) {
    const [a, b] = [SIZE.exec(current), SIZE.exec(fresh)];
    if (a === null || b === null) return false;
    const near = (x: string, y: string) => Math.abs(Number(x) - Number(y)) <= 0.1 * Number(y);
    return near(a[1], b[1]) && near(a[2], b[2]);
  },
};

/** The ```ts block that ends right before `at`. */
function codeBefore(readme: string, at: number): string {
  const end = readme.lastIndexOf("```", at);
  const start = readme.lastIndexOf("```ts\n", end - 1);
  if (start < 0 || end < 0) throw new Error("no ```ts block before the profile output marker");
  return readme.slice(start + "```ts\n".length, end);
}

/** Runs a README code block as it stands, in a fresh process, with the checkout's mod.ts. */
async function runBlock(code: string): Promise<string> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-config", "--allow-read", "--ext", "ts", "-"],
    env: { NO_COLOR: "1" },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(
    new TextEncoder().encode(code.replaceAll('"jsr:@relaxvm/relaxvm"', `"${MOD_URL}"`)),
  );
  await writer.close();
  const { code: status, stdout, stderr } = await child.output();
  if (status !== 0) {
    throw new Error(`the README block failed:\n${new TextDecoder().decode(stderr)}`);
  }
  return new TextDecoder().decode(stdout);
}

/** The profile table's lines with every time (a number with 3 decimals, or a percentage) masked. */
function withoutTimes(table: string): string[] {
  return table.split("\n").map((l) => l.trimEnd().replace(/\d+\.\d{3}\b|\d+\.\d%/g, "#"))
    .map((l) => l.replace(/ +/g, " ")).filter((l) => l !== "").sort();
}

const profileOutput: Output = {
  name: "profile-output",
  async make(readme) {
    const at = section(readme, "profile-output")!.start;
    const printed = await runBlock(codeBefore(readme, at));
    return `\n\`\`\`text\n${printed.trimEnd()}\n\`\`\`\n`;
  },
  agrees(current, fresh) {
    const [a, b] = [withoutTimes(current), withoutTimes(fresh)];
    return a.length === b.length && a.every((line, i) => line === b[i]);
  },
};

/**
 * What the REPL prints for the expression on the passage's first line (`> expr`), the way the REPL
 * prints it (`Deno.inspect`), evaluated in a fresh process with the whole API in scope.
 */
const tensorPrint: Output = {
  name: "tensor-print",
  async make(readme) {
    const at = section(readme, "tensor-print")!;
    const prompt = /^> (.+)$/m.exec(readme.slice(at.start, at.end));
    if (prompt === null) throw new Error("the tensor-print passage has no `> expression` line");
    const printed = await runBlock(
      `import * as relaxvm from "jsr:@relaxvm/relaxvm";\nObject.assign(globalThis, relaxvm);\n` +
        `console.log(Deno.inspect(await (0, eval)(${JSON.stringify(prompt[1])})));\n`,
    );
    return `\n\n\`\`\`text\n> ${prompt[1]}\n${printed.trimEnd()}\n\`\`\`\n\n`;
  },
  agrees(current, fresh) {
    return current.trim() === fresh.trim();
  },
};

/** Every generated passage of the README. */
export const OUTPUTS: readonly Output[] = [bundleSize, profileOutput, tensorPrint];

/**
 * The names of the passages that disagree with what the code makes now, over the pages given (path
 * → text): each passage must sit in exactly one page (`name (no markers)` or
 * `name (markers in a, b)` otherwise).
 */
export async function staleOutputs(pages: Map<string, string>): Promise<string[]> {
  const stale: string[] = [];
  for (const output of OUTPUTS) {
    const holders = [...pages].filter(([, text]) => section(text, output.name) !== null);
    if (holders.length !== 1) {
      const where = holders.map(([path]) => path).join(", ");
      stale.push(`${output.name} (${holders.length === 0 ? "no markers" : `markers in ${where}`})`);
      continue;
    }
    const [, text] = holders[0];
    const at = section(text, output.name)!;
    const fresh = await output.make(text);
    if (!output.agrees(text.slice(at.start, at.end), fresh)) stale.push(output.name);
  }
  return stale;
}

/** `text` (one page) with every passage it holds made afresh. */
export async function rewritten(text: string): Promise<string> {
  for (const output of OUTPUTS) {
    const at = section(text, output.name);
    if (at === null) continue;
    text = text.slice(0, at.start) + await output.make(text) + text.slice(at.end);
  }
  return text;
}

if (import.meta.main) {
  const pages = await readPages();
  for (const output of OUTPUTS) {
    if (![...pages.values()].some((text) => section(text, output.name) !== null)) {
      throw new Error(`no page has <!-- readme:${output.name} --> markers`);
    }
  }
  for (const [path, text] of pages) {
    const names = OUTPUTS.filter((o) => section(text, o.name) !== null).map((o) => o.name);
    if (names.length === 0) continue;
    await Deno.writeTextFile(new URL(path, ROOT), await rewritten(text));
    console.log(`Wrote ${names.join(", ")} into ${path}`);
  }
}
