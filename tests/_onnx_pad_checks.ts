/**
 * `Pad` on ONNX's own node tests, whose pads (and constant value, axes)
 * are graph inputs: bound at import with `inputValues` from the tests'
 * `input_1.pb`…, as a model whose pads are initializers or `Constant`s has
 * them, then run and compared with ONNX's tolerances (tests/onnx/node_tests.ts).
 * Shared by `onnx_pad_test.ts` (CPU) and `webgpu/onnx_pad_suite.ts`. Needs
 * `tools/onnx/.venv`; ignored without it unless RELAXVM_REQUIRE_ONNX=1.
 *
 * @module
 */

import { type Device, importONNX, type NDArray, VirtualMachine } from "../mod.ts";
// Issue 32 took decodeONNXTensor out of mod.ts; the tests read tensors through the decoder itself.
import { decodeTensor as decodeONNXTensor } from "../onnx/onnx_tensor.ts";
import { decodeModel } from "../onnx/onnx_proto.ts";
import { compare, nodeTestRoot } from "./onnx/node_tests.ts";

/** The node tests' folder in the pinned venv, or null. */
export const root = await nodeTestRoot(new URL("../", import.meta.url));
/** Whether the checks are ignored: no venv, and not required. */
export const ignorePad = root === null && Deno.env.get("RELAXVM_REQUIRE_ONNX") !== "1";
/** The node tests of Pad. */
export const PAD_TESTS = [
  "test_constant_pad",
  "test_constant_pad_axes",
  "test_constant_pad_negative_axes",
  "test_edge_pad",
  "test_reflect_pad",
  "test_wrap_pad",
];

/** Runs one node test with every input but the first bound at import; null when it matches. */
async function run(name: string, device: Device | undefined): Promise<string | null> {
  const dir = `${root}${name}/`;
  const bytes = await Deno.readFile(`${dir}model.onnx`);
  const names = decodeModel(bytes).graph!.inputs.map((v) => v.name);
  const read = (f: string) => Deno.readFile(`${dir}test_data_set_0/${f}`).then(decodeONNXTensor);
  const inputs = await Promise.all(names.map((_, i) => read(`input_${i}.pb`)));
  const want = await read("output_0.pb");
  const bound = Object.fromEntries(names.slice(1).map((n, i) => [n, inputs[i + 1]]));
  try {
    using model = await importONNX(bytes, { inputValues: bound });
    const vm = new VirtualMachine(model.executable, device);
    using got = await vm.invoke("main", inputs[0]) as NDArray;
    return await compare(got, want);
  } finally {
    for (const t of [...inputs, want]) t.dispose();
  }
}

/** Every Pad node test's problem on `device` (default the CPU); empty when all match. */
export async function padProblems(device?: Device): Promise<string[]> {
  if (root === null) throw new Error("RELAXVM_REQUIRE_ONNX=1 but tools/onnx/.venv is missing");
  const problems: string[] = [];
  for (const name of PAD_TESTS) {
    const p = await run(name, device);
    if (p !== null) problems.push(`${name}: ${p}`);
  }
  return problems;
}
