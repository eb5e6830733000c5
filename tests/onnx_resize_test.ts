/**
 * `Resize` (onnx/ops_resize.ts) against ONNX's own expected outputs: every
 * `test_resize_*` node test with its roi, scales and sizes folded into
 * initializers (tools/onnx/fold_inputs.py), since the node tests pass them as
 * graph inputs, which the importer must know at import. Compared as the node
 * tests are (rtol 1e-3, atol 1e-7), on the CPU.
 *
 * Needs `tools/onnx/.venv` (`bash tools/onnx/setup.sh`); ignored without it
 * unless RELAXVM_REQUIRE_ONNX=1 (CI) makes that a failure.
 *
 * @module
 */

import { assertEquals } from "@std/assert";
import { importONNX, type NDArray, VirtualMachine } from "../mod.ts";
import { decodeTensor as decodeONNXTensor } from "../onnx/onnx_tensor.ts";
import { compare, nodeTestRoot } from "./onnx/node_tests.ts";

const repo = new URL("../", import.meta.url);
const root = await nodeTestRoot(repo);
const required = Deno.env.get("RELAXVM_REQUIRE_ONNX") === "1";

Deno.test({
  name: "onnx Resize: every resize node test, its scales, sizes and roi folded, matches ONNX",
  ignore: root === null && !required,
  fn: async () => {
    if (root === null) throw new Error("RELAXVM_REQUIRE_ONNX=1 but tools/onnx/.venv is missing");
    const names = [...Deno.readDirSync(root)].map((e) => e.name)
      .filter((n) => n.startsWith("test_resize_")).sort();
    assertEquals(names.length > 30, true, `only ${names.length} resize tests`);
    const out = await Deno.makeTempDir({ prefix: "relaxvm-resize-" });
    try {
      const python = new URL("tools/onnx/.venv/bin/python", repo).pathname;
      const script = new URL("tools/onnx/fold_inputs.py", repo).pathname;
      const folded = await new Deno.Command(python, {
        args: [script, root, out, ...names],
        stderr: "piped",
      })
        .output();
      assertEquals(folded.success, true, new TextDecoder().decode(folded.stderr));
      const problems: string[] = [];
      for (const name of names) {
        using model = await importONNX(await Deno.readFile(`${out}/${name}.onnx`));
        const data = `${root}${name}/test_data_set_0/`;
        using x = decodeONNXTensor(await Deno.readFile(`${data}input_0.pb`));
        using want = decodeONNXTensor(await Deno.readFile(`${data}output_0.pb`));
        const vm = new VirtualMachine(model.executable);
        const args: unknown[] = model.params.length > 0 ? [x, model.params] : [x];
        using got = await vm.invoke("main", ...args) as NDArray;
        const problem = await compare(got, want);
        if (problem !== null) problems.push(`${name}: ${problem}`);
      }
      assertEquals(problems, []);
    } finally {
      await Deno.remove(out, { recursive: true });
    }
  },
});
