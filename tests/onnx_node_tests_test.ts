/**
 * ONNX's node tests that pass today keep passing: every test named in
 * `tests/onnx/node_tests_passing.txt` (written by `deno task onnx:nodes
 * --write`) is imported with `importONNX`, run on the CPU and compared with
 * ONNX's tolerances (tests/onnx/node_tests.ts). One Deno test, one process.
 *
 * Needs `tools/onnx/.venv` (`bash tools/onnx/setup.sh`), whose onnx wheel
 * holds the tests. Without it the test is ignored, unless
 * RELAXVM_REQUIRE_ONNX=1 (CI sets it), which makes it fail.
 */

import { assert, assertEquals } from "@std/assert";
import { nodeTestRoot, runNodeTest } from "./onnx/node_tests.ts";

const repo = new URL("../", import.meta.url);
const root = await nodeTestRoot(repo);
const required = Deno.env.get("RELAXVM_REQUIRE_ONNX") === "1";
if (root === null && !required) {
  console.log(
    "onnx_node_tests_test: ignored, no tools/onnx/.venv (run `bash tools/onnx/setup.sh`; RELAXVM_REQUIRE_ONNX=1 makes this fail)",
  );
}

Deno.test({
  name: "onnx node tests: every test on the committed passing list still passes on the CPU",
  ignore: root === null && !required,
  fn: async () => {
    if (root === null) throw new Error("RELAXVM_REQUIRE_ONNX=1 but tools/onnx/.venv is missing");
    const list = await Deno.readTextFile(new URL("onnx/node_tests_passing.txt", import.meta.url));
    const names = list.split("\n").filter((l) => l !== "");
    assert(names.length > 0);
    const regressions: string[] = [];
    for (const name of names) {
      const r = await runNodeTest(root, name);
      if (r.status !== "pass") regressions.push(`${name}: ${r.status}: ${r.detail}`);
    }
    assertEquals(regressions, []);
  },
});

Deno.test("onnx node tests: docs/onnx.md's counts are the committed passing lists'", async () => {
  // `deno task onnx:nodes --write` writes the table and the three lists together; onnxruntime-web's
  // run (`--ort`, about a minute and a 30 MB npm package) stays out of CI, so CI holds the table
  // to the lists it was written with: a list changed without rerunning --write fails here.
  const lines = async (file: string) =>
    (await Deno.readTextFile(new URL(`onnx/${file}`, import.meta.url))).split("\n")
      .filter((l) => l !== "").length;
  const n = (x: number) => x.toLocaleString("en-US");
  const page = await Deno.readTextFile(new URL("../docs/onnx.md", import.meta.url));
  const table = page.slice(
    page.indexOf("<!-- onnx-node-table"),
    page.indexOf("<!-- /onnx-node-table"),
  )
    .replace(/\s+/g, " ");
  const cpu = await lines("node_tests_passing.txt");
  const gpu = await lines("node_tests_passing_webgpu.txt");
  const ort = await lines("node_tests_passing_ort.txt");
  assert(table.includes(`**${n(cpu)} of `), `the table's CPU count is not ${cpu}`);
  assert(table.includes(`; ${n(gpu)} on WebGPU`), `the table's WebGPU count is not ${gpu}`);
  assert(
    table.includes(`backend passes ${n(ort)} in the same harness`),
    `the table's onnxruntime-web count is not ${ort}`,
  );
});
