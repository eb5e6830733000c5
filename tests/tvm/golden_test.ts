/**
 * The committed TVM golden files (testdata/tvm/, written by TVM 0.27 with
 * `deno task tvm:golden`), checked without Python: relaxvm loads each file
 * TVM wrote, prints what TVM printed (as_text, as_python, stats), writes
 * the file back byte for byte, builds the same bytes from the description
 * with its own ExecBuilder, and runs it to TVM's results.
 */

import { assert, assertEquals } from "@std/assert";
import { Executable } from "../../mod.ts";
import {
  buildWithRelaxvm,
  type ProgramDesc,
  sameValue,
  toHex,
  type TvmOutput,
} from "./description.ts";
import { runInRelaxvm } from "./differential.ts";

const dir = new URL("../../testdata/tvm/", import.meta.url);
const { programs } = JSON.parse(await Deno.readTextFile(new URL("programs.json", dir))) as {
  programs: ProgramDesc[];
};
const outputs = JSON.parse(await Deno.readTextFile(new URL("outputs.json", dir))) as Record<
  string,
  TvmOutput
>;

for (const p of programs) {
  Deno.test(`TVM golden ${p.name}: load, print, save back, build, run as TVM does`, async () => {
    const tvm = outputs[p.name];
    const bytes = await Deno.readFile(new URL(`${p.name}.tvm`, dir));
    using ex = Executable.load(bytes);
    assertEquals(ex.as_text(), tvm.as_text);
    assertEquals(ex.as_python(), tvm.as_python);
    if (tvm.stats !== undefined) assertEquals(ex.stats(), tvm.stats);
    else assertEquals(tvm.stats_error, "Unsupported constant pool type float");
    assertEquals(toHex(ex.save({ format: "tvm" })), toHex(bytes), "TVM -> relaxvm -> TVM");
    using built = buildWithRelaxvm(p);
    assertEquals(toHex(built.save({ format: "tvm" })), toHex(bytes), "relaxvm's builder");
    // relaxvm's own format keeps everything too: TVM -> relaxvm format -> TVM.
    using again = Executable.load(ex.save());
    assertEquals(toHex(again.save({ format: "tvm" })), toHex(bytes), "through relaxvm's format");
    if (p.runs !== undefined) {
      const results = await runInRelaxvm(ex, p.runs);
      assert(
        results.every((r, i) => sameValue(tvm.results![i], r)),
        `results ${JSON.stringify(results)}\nTVM: ${JSON.stringify(tvm.results)}`,
      );
    }
  });
}

Deno.test("TVM golden files: as_typescript() rebuilds each byte for byte (Int constants as bigint literals)", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "relaxvm_tvm_ts_" });
  try {
    for (const name of [...programs.map((p) => p.name), "mlp_dynamic_batch"]) {
      const bytes = await Deno.readFile(new URL(`${name}.tvm`, dir));
      using ex = Executable.load(bytes);
      const path = `${tmp}/${name}.ts`;
      await Deno.writeTextFile(
        path,
        ex.as_typescript({ importFrom: new URL("../../mod.ts", import.meta.url).href }),
      );
      const { ex: rebuilt } = await import(new URL(`file://${path}`).href) as { ex: Executable };
      assertEquals(toHex(rebuilt.save({ format: "tvm" })), toHex(bytes), name);
      rebuilt.dispose();
    }
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});
