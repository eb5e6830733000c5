/**
 * The committed TVM packages (`testdata/tvm_webgpu/`) are what
 * `tools/tvm/export_webgpu.py` writes with the pinned TVM: each is exported
 * again into a temporary directory and compared file by file — the
 * manifest, the executable and the weights byte for byte, the reference
 * outputs of TVM's CPU build within 1e-6 (LLVM may pick other instructions
 * on another CPU).
 *
 * Needs `tools/tvm/.venv` (`bash tools/tvm/setup.sh`). Without it the test
 * is ignored with a message, unless `RELAXVM_REQUIRE_TVM=1` (CI), where it
 * fails.
 */

import { assert, assertEquals } from "@std/assert";
import {
  float32s,
  maxRelativeDifference,
  PACKAGES_DIR,
  type ReferenceCase,
} from "./_tvm_packages.ts";

const root = new URL("../", import.meta.url);
const python = new URL("tools/tvm/.venv/bin/python", root);
const hasVenv = await Deno.stat(python).then(() => true, () => false);
const required = Deno.env.get("RELAXVM_REQUIRE_TVM") === "1";
if (!hasVenv && !required) {
  console.log(
    "tvm_export_test: ignored, no tools/tvm/.venv (run `bash tools/tvm/setup.sh`; RELAXVM_REQUIRE_TVM=1 makes this fail)",
  );
}

for (const name of ["mlp", "encoder", "attention4d"]) {
  Deno.test({
    name: `tools/tvm/export_webgpu.py ${name} writes the committed package again`,
    ignore: !hasVenv && !required,
    fn: async () => {
      assert(
        hasVenv,
        "RELAXVM_REQUIRE_TVM=1 but tools/tvm/.venv is missing: bash tools/tvm/setup.sh",
      );
      const out = await Deno.makeTempDir({ prefix: "relaxvm-tvm-export-" });
      try {
        const { code, stderr } = await new Deno.Command(python, {
          args: ["tools/tvm/export_webgpu.py", name, out],
          cwd: root,
          stdout: "null",
          stderr: "piped",
        }).output();
        assertEquals(code, 0, new TextDecoder().decode(stderr));
        const committed = new URL(`${name}/`, PACKAGES_DIR);
        for (
          const file of [
            "package.json",
            "executable.tvm",
            "params/ndarray-cache.json",
            "params/params_shard_0.bin",
          ]
        ) {
          assertEquals(
            await Deno.readFile(`${out}/${file}`),
            await Deno.readFile(new URL(file, committed)),
            `${name}/${file} differs from what the exporter writes: re-export and commit it`,
          );
        }
        const cases = (path: string | URL) =>
          Deno.readTextFile(path).then((t) => (JSON.parse(t) as { cases: ReferenceCase[] }).cases);
        const fresh = await cases(`${out}/reference.json`);
        const kept = await cases(new URL("reference.json", committed));
        assertEquals(fresh.length, kept.length);
        fresh.forEach((c, i) => {
          assertEquals(c.inputs, kept[i].inputs, "the same inputs");
          const rel = maxRelativeDifference(
            float32s(c.output.base64),
            float32s(kept[i].output.base64),
          );
          assert(rel <= 1e-6, `${name} case ${i}: TVM's output moved by ${rel}`);
        });
      } finally {
        await Deno.remove(out, { recursive: true });
      }
    },
  });
}
