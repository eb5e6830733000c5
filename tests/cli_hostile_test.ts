/**
 * The `relaxvm` CLI on hostile files (issue 18, finding 8 and the unclear
 * errors): a call is bounded by `--timeout` (a minute by default), `--fuel`
 * and `--max-memory`; a large result prints summarized; names and strings
 * from the file reach the terminal escaped.
 */

import { assert, assertEquals, assertStringIncludes } from "@std/assert";
import { ExecBuilder } from "../mod.ts";
import { addBigTensor, addSpin } from "./_hostile_functions.ts";

const ROOT = new URL("../", import.meta.url);

/** Runs `deno run cli/main.ts ...args` with read permission only. */
async function relaxvm(...args: string[]) {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", "--allow-read", "cli/main.ts", ...args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return { code, stdout: decoder.decode(stdout), stderr: decoder.decode(stderr) };
}

/** A saved executable: `spin` loops forever, `big(n)` returns zeros of [n], `odd` fails oddly. */
async function hostileFile(): Promise<string> {
  const ib = new ExecBuilder();
  addSpin(ib);
  addBigTensor(ib, "big", 1);
  ib.function("text\x1b[2J\x9b31m", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.copy", ["\x1b]0;pwned\x07" + "x".repeat(50_000)], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  const file = await Deno.makeTempFile({ suffix: ".rvm" });
  await Deno.writeFile(file, ib.get().save());
  return file;
}

/** A terminal escape, a bell or a C1 control sequence introducer left raw in the output. */
const ESC = new RegExp("[\u001b\u0007\u009b]");

Deno.test("cli: run and profile stop an endless loop at --timeout and --fuel", async () => {
  const file = await hostileFile();
  try {
    for (const command of ["run", "profile"]) {
      const t0 = performance.now();
      const timed = await relaxvm(command, file, "spin", "--timeout", "300");
      assertEquals(timed.code, 1, command);
      assertStringIncludes(timed.stderr, "Timed out after 300 ms");
      assert(performance.now() - t0 < 20_000, `${command}: ${performance.now() - t0} ms`);
      const fuel = await relaxvm(command, file, "spin", "--fuel", "1000");
      assertStringIncludes(fuel.stderr, "Out of fuel");
    }
    const bad = await relaxvm("run", file, "spin", "--timeout", "soon");
    assertStringIncludes(bad.stderr, "non-negative number or none");
    const memory = await relaxvm("run", file, "big", "0", "--max-memory", "1000000");
    assertStringIncludes(memory.stderr, "maxMemoryBytes");
  } finally {
    await Deno.remove(file);
  }
});

Deno.test("cli: a large result prints summarized; escapes from the file print escaped", async () => {
  const file = await hostileFile();
  try {
    const big = await relaxvm("run", file, "big", "0");
    assertEquals(big.code, 0, big.stderr);
    assert(big.stdout.length < 1000, `${big.stdout.length} characters`);
    assertStringIncludes(big.stdout, "..., ");
    assertStringIncludes(big.stdout, "(float32, shape [4194304])");
    const text = await relaxvm("run", file, "text\x1b[2J\x9b31m");
    assertEquals(text.code, 0, text.stderr);
    assert(!ESC.test(text.stdout), text.stdout.slice(0, 40));
    assert(text.stdout.length < 11_000, `${text.stdout.length} characters`);
    assertStringIncludes(text.stdout, "more characters");
    const missing = await relaxvm("run", file, "nope\x1b[2J", "--timeout", "x\x1b[31m");
    assertEquals(missing.code, 1);
    assert(!ESC.test(missing.stderr), missing.stderr);
  } finally {
    await Deno.remove(file);
  }
});
