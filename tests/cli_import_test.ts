/**
 * `relaxvm import` (cli/commands/import.ts), run as a subprocess: an ONNX
 * model written by the benchmarks' writer becomes a `.rvm` file and a tensor
 * cache that load and run in a fresh VM; a model with unsupported nodes and a
 * truncated file each fail with one `relaxvm: …` line naming the problem.
 */

import { assert, assertEquals, assertStringIncludes } from "@std/assert";
import { Executable, importONNX, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { ignoreWithoutWeights, requireWeights, weightsDir } from "./_weights.ts";
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

const SILERO = weightsDir("silero-vad");

Deno.test({
  name: "cli import: --shape and --value import Silero VAD, which runs as importONNX's import does",
  ignore: ignoreWithoutWeights("silero-vad", SILERO, ["silero_vad.onnx"]),
  fn: async () => {
    requireWeights("silero-vad", SILERO, ["silero_vad.onnx"]);
    const file = new URL("silero_vad.onnx", SILERO);
    const dir = await Deno.makeTempDir({ prefix: "relaxvm_cli_import_" });
    try {
      // Without them its STFT convolution's windows are unknown at import.
      const bare = await relaxvm("import", file.pathname, "-o", `${dir}/bare.rvm`);
      assertEquals(bare.code, 1, bare.stdout);
      assertStringIncludes(bare.stderr, "stft/Conv");
      const r = await relaxvm(
        "import",
        file.pathname,
        "-o",
        `${dir}/vad.rvm`,
        "--shape",
        "input=1,576",
        "--value",
        "sr=16000",
      );
      assertEquals(r.code, 0, r.stderr);
      assertStringIncludes(r.stdout, "inputs:  input: float32[1, 576], state: float32[2, ?0, 128]");
      const ex = Executable.load(await Deno.readFile(`${dir}/vad.rvm`));
      const vm = new VirtualMachine(ex);
      const chunk = Float32Array.from({ length: 576 }, (_, i) => Math.sin(i / 7) * 0.3);
      using sr = tensor(new BigInt64Array([16000n]), { shape: [] });
      using direct = await importONNX(file, {
        inputShapes: { input: [1, 576] },
        inputValues: { sr },
      });
      // Silero's weights are Constant nodes, inside the executable: no tensor cache is written,
      // and main takes no parameter tuple.
      assertEquals(direct.params.length, 0);
      assert(!(await Deno.stat(`${dir}/vad.rvm.params`).then(() => true, () => false)));
      const run = async (v: VirtualMachine) => {
        using x = tensor(chunk, { shape: [1, 576] });
        using state = tensor(new Float32Array(256), { shape: [2, 1, 128] });
        const [prob, next] = await v.invoke("main", x, state) as NDArray[];
        const out = [...await prob.data(), ...await next.data()];
        prob.dispose();
        next.dispose();
        return out;
      };
      assertEquals(await run(vm), await run(new VirtualMachine(direct.executable)));
      // A --value for an input the model does not have is a usage error, not a crash.
      const wrong = await relaxvm(
        "import",
        file.pathname,
        "-o",
        `${dir}/wrong.rvm`,
        "--value",
        "rate=16000",
      );
      assertEquals(wrong.code, 1, wrong.stderr);
      assertStringIncludes(wrong.stderr, 'the model has no tensor input "rate"');
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
