/**
 * Every runnable ```ts block of the README and of the pages under docs/ (where most of the README's
 * sections moved, issue 32) runs as written with the permissions its page gives it, as a newcomer
 * would copy it into a file: `deno run --no-prompt` with the flags its first line names
 * (`// deno run --allow-read --allow-write`), and none when it names none. The doc tests
 * (`deno test --doc`, which finds every Markdown file) run these blocks with every permission the
 * test task grants, so a block that needs a flag the page does not give passes there and fails for
 * the reader; this test does not.
 *
 * A block that needs a WebGPU adapter (its code asks for one) is skipped where there is none.
 */

import { assert, assertEquals } from "@std/assert";

import { readPages, ROOT } from "../docs/pages.ts";

const pages = await readPages();
const readme = pages.get("README.md")!;

/** A ```ts block (not `ts ignore`): its first line's number and its code. */
interface Block {
  line: number;
  code: string;
}

/** A page's runnable ```ts blocks. */
function tsBlocks(text: string): Block[] {
  const blocks: Block[] = [];
  const re = /^```ts\n([\s\S]*?)^```$/gm;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    blocks.push({ line: text.slice(0, m.index).split("\n").length, code: m[1] });
  }
  return blocks;
}

/** The permission flags a block's first line names: `// deno run --allow-read …`. */
function flagsOf(code: string): string[] {
  const first = /^\/\/ deno run((?: --allow-[a-z-]+(?:=\S+)?)*)/.exec(code);
  return first === null ? [] : first[1].trim().split(/\s+/).filter((f) => f !== "");
}

/** Runs one block in a fresh process from the repository root; resolves to its exit and stderr. */
async function runBlock(block: Block): Promise<{ code: number; err: string }> {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm-readme-block-" });
  const file = `${dir}/block.ts`;
  try {
    const code = block.code.replace(
      /"(?:jsr:)?@relaxvm\/relaxvm(\/[a-z]+)?"/g,
      (_, sub) => `"${new URL(sub === undefined ? "mod.ts" : `${sub.slice(1)}.ts`, ROOT).href}"`,
    );
    await Deno.writeTextFile(file, code);
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--no-prompt", "--no-config", ...flagsOf(block.code), file],
      cwd: ROOT,
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    return { code: out.code, err: new TextDecoder().decode(out.stderr) };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const hasAdapter = (await navigator.gpu?.requestAdapter()) != null;

Deno.test("docs: every ```ts block runs with the permission flags its page gives it", async () => {
  let count = 0;
  const failed: string[] = [];
  for (const [path, text] of pages) {
    for (const block of tsBlocks(text)) {
      count++;
      if (!hasAdapter && /webgpu\(\)|loadTVMPackage/.test(block.code)) continue;
      const { code, err } = await runBlock(block);
      if (code !== 0) {
        failed.push(`${path}:${block.line}: ${err.split("\n").slice(0, 3).join(" ")}`);
      }
    }
  }
  assert(count >= 8, `found ${count} blocks`);
  assertEquals(failed, []);
});

Deno.test("README blocks: flagsOf reads the first line only, and a block without it gets none", () => {
  assertEquals(flagsOf("// deno run --allow-read --allow-write=out\nconst x = 1;"), [
    "--allow-read",
    "--allow-write=out",
  ]);
  assertEquals(flagsOf("const x = 1;\n// deno run --allow-read"), []);
  assertEquals(tsBlocks("a\n```ts\nx\n```\n```ts ignore\ny\n```\n"), [{ line: 2, code: "x\n" }]);
});

Deno.test("docs: the commands that run every test say how long they take", () => {
  // The whole suite takes minutes; a newcomer who runs it without knowing thinks it hangs.
  const lines = [...pages.values()].join("\n").split("\n").filter((l) =>
    /^(npx -y deno@[\d.]+|deno) task test\b/.test(l) || l.startsWith("- `deno task test` runs")
  );
  assert(lines.length >= 2, lines.join("\n"));
  for (const line of lines) assert(/about \d+ minutes/.test(line), line);
});

Deno.test("README: says how to get Deno, at the version its first commands use, before any `deno` command", () => {
  const first = /^```sh\n([\s\S]*?)```/m.exec(readme)![1];
  const pinned = [...first.matchAll(/npx -y deno@([\d.]+)/g)].map((m) => m[1]);
  assertEquals(pinned.length, 2, "the first two commands run a pinned Deno through npx");
  const getting = readme.indexOf("**Getting Deno.**");
  assert(getting > 0, "no **Getting Deno.** paragraph");
  const paragraph = readme.slice(getting, readme.indexOf("\n\n", getting));
  assert(paragraph.includes(`npm i -g deno@${pinned[0]}`), paragraph);
  assert(paragraph.includes(`install.sh | sh -s v${pinned[0]}`), paragraph);
  // The first command that needs a `deno` on the PATH comes after it.
  const firstDeno = /(^|`)deno /m.exec(readme.replaceAll(/npx -y deno@[\d.]+/g, "npx"));
  assert(firstDeno !== null && firstDeno.index > getting, `a deno command before: ${firstDeno}`);
});
