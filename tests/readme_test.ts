/**
 * The README's first example runs and prints what its comments say: each
 * `console.log` is followed by the expected output, as an inline comment
 * or as the comment lines right after it (blank lines aside).
 */

import { assertEquals } from "@std/assert";

const readme = await Deno.readTextFile(new URL("../README.md", import.meta.url));
const modUrl = new URL("../mod.ts", import.meta.url).href;

/** The text of the first ```ts block. */
function firstExample(): string {
  const match = /```ts\n([\s\S]*?)```/.exec(readme);
  if (match === null) throw new Error("README.md has no ```ts block");
  return match[1];
}

/** The output the example's comments announce, one entry per line. */
function expectedOutput(code: string): string[] {
  const lines = code.split("\n");
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i].startsWith("console.log(")) continue;
    const inline = /\);\s*\/\/ (.*)$/.exec(lines[i]);
    if (inline !== null) {
      out.push(inline[1]);
      continue;
    }
    for (let j = i + 1; j < lines.length && lines[j].startsWith("//"); j++) {
      out.push(lines[j].replace(/^\/\/ ?/, ""));
    }
  }
  return out.filter((l) => l.trim() !== "");
}

Deno.test("README: the first example prints what its comments say", async () => {
  const code = firstExample();
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(file, code.replaceAll('"jsr:@relaxvm/relaxvm"', `"${modUrl}"`));
    const { code: status, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--no-config", file],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assertEquals(status, 0, new TextDecoder().decode(stderr));
    const printed = new TextDecoder().decode(stdout).split("\n").map((l) => l.trimEnd())
      .filter((l) => l !== "");
    assertEquals(printed, expectedOutput(code));
  } finally {
    await Deno.remove(file);
  }
});
