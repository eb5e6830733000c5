/**
 * `relaxvm import` (cli/commands/import.ts), run as a subprocess: an ONNX
 * model written by the benchmarks' writer becomes a `.rvm` file and a tensor
 * cache that load and run in a fresh VM; a model with unsupported nodes and a
 * truncated file each fail with one `relaxvm: …` line naming the problem.
 */

import { assert, assertEquals, assertStringIncludes } from "@std/assert";
import { Executable, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { floatTensor, model, node, valueInfo } from "../bench/_onnx_writer.ts";

const ROOT = new URL("../", import.meta.url);

async function relaxvm(...args: string[]) {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", "--allow-read", "--allow-write", "cli/main.ts", ...args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const d = new TextDecoder();
  return { code, stdout: d.decode(stdout), stderr: d.decode(stderr) };
}

const linear = () =>
  model({
    name: "linear",
    nodes: [node("MatMul", ["x", "w"], ["h"]), node("Relu", ["h"], ["y"])],
    initializers: [floatTensor("w", [2, 2], new Float32Array([1, -1, 2, 0]))],
    inputs: [valueInfo("x", ["n", 2])],
    outputs: [valueInfo("y", ["n", 2])],
  });

Deno.test("cli import: model.onnx becomes model.rvm and a tensor cache that run", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm_cli_import_" });
  try {
    await Deno.writeFile(`${dir}/model.onnx`, linear());
    const r = await relaxvm("import", `${dir}/model.onnx`, "-o", `${dir}/model.rvm`);
    assertEquals(r.code, 0, r.stderr);
    assertStringIncludes(r.stdout, "inputs:  x: float32[n, 2]");
    assertStringIncludes(r.stdout, `Wrote ${dir}/model.rvm.params/ (1 tensors`);
    const ex = Executable.load(await Deno.readFile(`${dir}/model.rvm`));
    const vm = new VirtualMachine(ex, undefined, { tensorCacheRoots: [`${dir}/`] });
    const params = await vm.invoke("load_params", `file://${dir}/model.rvm.params/`, 1, 0);
    using x = tensor(new Float32Array([1, 1, 3, -1]), { shape: [2, 2] });
    using y = await vm.invoke("main", x, params) as NDArray;
    // [1, 1]·W = [3, -1] → [3, 0]; [3, -1]·W = [1, -3] → [1, 0].
    assertEquals([...y.dataSync()], [3, 0, 1, 0]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli import: unsupported nodes and a truncated file fail on one line", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm_cli_import_" });
  try {
    const bad = model({
      name: "bad",
      nodes: [node("Foo", ["x"], ["a"]), node("Bar", ["a"], ["y"])],
      initializers: [],
      inputs: [valueInfo("x", [1])],
      outputs: [valueInfo("y", [1])],
    });
    await Deno.writeFile(`${dir}/bad.onnx`, bad);
    await Deno.writeFile(`${dir}/cut.onnx`, linear().subarray(0, 40));
    for (const [file, includes] of [["bad", "Foo"], ["cut", "byte offset"]]) {
      const r = await relaxvm("import", `${dir}/${file}.onnx`, "-o", `${dir}/${file}.rvm`);
      assertEquals(r.code, 1, r.stdout);
      const lines = r.stderr.trimEnd().split("\n");
      assertEquals(lines.length, 1, r.stderr);
      assert(lines[0].startsWith("relaxvm: Cannot import ONNX model"), lines[0]);
      assertStringIncludes(lines[0], includes);
      if (file === "bad") assertStringIncludes(lines[0], "Bar");
      assert(!(await Deno.stat(`${dir}/${file}.rvm`).then(() => true, () => false)));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
