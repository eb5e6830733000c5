// Runs a program from examples/ as a newcomer would: `deno run` with no permissions.
import { assert, assertEquals } from "@std/assert";

const ROOT = new URL("../", import.meta.url);

/** Runs `examples/<name>.ts` with no permissions; resolves to its stdout, asserting success. */
export async function runExample(name: string): Promise<string> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", `examples/${name}.ts`],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const out = new TextDecoder().decode(stdout);
  assertEquals(code, 0, `examples/${name}.ts failed:\n${new TextDecoder().decode(stderr)}`);
  return out;
}

/** Asserts that `out` has a line equal to `line` (after trimming its end). */
export function assertLine(out: string, line: string): void {
  const lines = out.split("\n").map((l) => l.trimEnd());
  assert(lines.includes(line), `expected the line ${JSON.stringify(line)} in:\n${out}`);
}
