/**
 * ONNX's node tests that pass on WebGPU today keep passing there: each test
 * in `tests/onnx/node_tests_passing_webgpu.txt` (written by `deno task
 * onnx:nodes --write`) imported, run on the test GPU and compared with
 * ONNX's tolerances. Registered when `tools/onnx/.venv` holds the tests, or
 * when CI requires it (RELAXVM_REQUIRE_ONNX=1), then failing with how to
 * make it.
 *
 * @module
 */

import { assertEquals } from "@std/assert";
import { nodeTestRoot, runNodeTest } from "../onnx/node_tests.ts";
import { gpuTest } from "./suite_registry.ts";

const repo = new URL("../../", import.meta.url);
const root = await nodeTestRoot(repo);
if (root !== null || Deno.env.get("RELAXVM_REQUIRE_ONNX") === "1") {
  gpuTest("ONNX node tests: the committed WebGPU passing list still passes", async (gpu) => {
    if (root === null) throw new Error("no tools/onnx/.venv: run bash tools/onnx/setup.sh");
    const list = await Deno.readTextFile(
      new URL("../onnx/node_tests_passing_webgpu.txt", import.meta.url),
    );
    const regressions: string[] = [];
    for (const name of list.split("\n").filter((l) => l !== "")) {
      const r = await runNodeTest(root, name, gpu);
      if (r.status !== "pass") regressions.push(`${name}: ${r.status}: ${r.detail}`);
    }
    assertEquals(regressions, []);
  });
}
