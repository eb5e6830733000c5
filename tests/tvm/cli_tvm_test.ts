/**
 * The command line with TVM's files: `relaxvm dump` reads them (and prints
 * TVM's `as_python()` with `--python`), `relaxvm build --format tvm` writes
 * one. Checked against the golden output TVM printed (testdata/tvm/).
 */

import { assertEquals } from "@std/assert";
import { Executable } from "../../mod.ts";
import type { TvmOutput } from "./description.ts";

const ROOT = new URL("../../", import.meta.url);
const dir = new URL("testdata/tvm/", ROOT);
const outputs = JSON.parse(await Deno.readTextFile(new URL("outputs.json", dir))) as Record<
  string,
  TvmOutput
>;

async function relaxvm(...args: string[]): Promise<string> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", "--allow-read", "--allow-write", "cli/main.ts", ...args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(code, 0, new TextDecoder().decode(stderr));
  return new TextDecoder().decode(stdout);
}

Deno.test("relaxvm dump reads a TVM file and prints what TVM prints (--python: as_python)", async () => {
  const tvm = outputs["closures_and_branches"];
  assertEquals(
    await relaxvm("dump", "--python", "testdata/tvm/closures_and_branches.tvm"),
    tvm.as_python,
  );
  assertEquals(
    await relaxvm("dump", "testdata/tvm/closures_and_branches.tvm"),
    `${tvm.stats!.trimEnd()}\n\n${tvm.as_text!.trimEnd()}\n`,
  );
});

Deno.test("relaxvm build --format tvm writes the bytes TVM wrote", async () => {
  const golden = await Deno.readFile(new URL("design_doc.tvm", dir));
  using ex = Executable.load(golden);
  const tmp = await Deno.makeTempDir({ prefix: "relaxvm_cli_tvm_" });
  try {
    await Deno.writeTextFile(
      `${tmp}/program.ts`,
      ex.as_typescript({ importFrom: new URL("mod.ts", ROOT).href }),
    );
    await relaxvm("build", `${tmp}/program.ts`, "-o", `${tmp}/out.tvm`, "--format", "tvm");
    assertEquals(await Deno.readFile(`${tmp}/out.tvm`), golden);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});
