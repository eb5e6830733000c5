/**
 * relaxvm's own golden dumps (testdata/*.txt: `stats()` then `as_text()`,
 * written by `deno task golden`) checked against real TVM: each golden
 * program is saved in TVM's format, and TVM 0.27 loads it and prints it.
 * The dumps must be what TVM prints (the stats line where TVM can print it:
 * it cannot print a Float constant), not a listing copied from a design
 * document. Needs tools/tvm/.venv (see tvm_python.ts).
 */

import { assertEquals } from "@std/assert";
import { Executable } from "../../mod.ts";
import { toHex } from "./description.ts";
import { buildWithTvm, ignoreWithoutTvm } from "./tvm_python.ts";

const NAMES = ["design_doc", "everything", "shape_heap"];

Deno.test({
  name: "relaxvm's golden dumps are what TVM prints for the same executables",
  ignore: ignoreWithoutTvm("relaxvm golden dumps against TVM"),
  async fn() {
    const dir = new URL("../../testdata/", import.meta.url);
    const programs = [];
    const dumps: string[] = [];
    for (const name of NAMES) {
      using ex = Executable.load(await Deno.readFile(new URL(`${name}.rvm`, dir)));
      programs.push({ name, relaxvm_bytes: toHex(ex.save({ format: "tvm" })) });
      dumps.push(await Deno.readTextFile(new URL(`${name}.txt`, dir)));
    }
    const { programs: tvm } = await buildWithTvm(programs);
    for (const [i, name] of NAMES.entries()) {
      const t = tvm[i];
      assertEquals(t.relaxvm_loaded, true, `${name}: ${t.relaxvm_load_error}`);
      const cut = dumps[i].indexOf("\n\n"); // the file is stats(), "\n", as_text()
      const [stats, text] = [dumps[i].slice(0, cut + 1), dumps[i].slice(cut + 2)];
      assertEquals(text, t.relaxvm_as_text, `${name}: as_text`);
      if (t.relaxvm_stats !== undefined) assertEquals(stats, t.relaxvm_stats, `${name}: stats`);
      else assertEquals(t.relaxvm_stats_error, "Unsupported constant pool type float", name);
    }
  },
});
