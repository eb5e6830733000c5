/**
 * `importONNX` folds the exact GELU exporters spell out,
 * `x · ½ · (1 + Erf(x / √2))`, into one `vm.op.gelu` (onnx/gelu_fusion.ts),
 * in both orders torch.onnx writes, and leaves a chain whose intermediate
 * value something else reads as it is; each gives GELU to float32 rounding
 * (against erf by its Taylor series in float64).
 */

import { assert, assertEquals } from "@std/assert";
import { importONNX, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { floatTensor, model, node, valueInfo } from "../bench/_onnx_writer.ts";

/** erf by its Maclaurin series, in float64 (|x| ≤ 4 here: the terms fall below 1e-17). */
function erf(x: number): number {
  let term = x, sum = x;
  for (let n = 1; n < 80; n++) {
    term *= -x * x / n;
    sum += term / (2 * n + 1);
  }
  return 2 / Math.sqrt(Math.PI) * sum;
}
const gelu = (x: number) => 0.5 * x * (1 + erf(x / Math.SQRT2));

const constants = [
  floatTensor("sqrt2", [], new Float32Array([Math.SQRT2])),
  floatTensor("inv_sqrt2", [], new Float32Array([Math.SQRT1_2])),
  floatTensor("one", [], new Float32Array([1])),
  floatTensor("half", [], new Float32Array([0.5])),
];

/** y = GELU(Relu-free x + 0) spelled out in one of the exporters' orders; `extra` outputs too. */
function spelled(order: "nn" | "hf", extra: string[] = []): Uint8Array {
  const head = order === "nn"
    ? [node("Div", ["x", "sqrt2"], ["d"])]
    : [node("Mul", ["inv_sqrt2", "x"], ["d"])];
  const tail = order === "nn"
    ? [node("Mul", ["x", "a"], ["m"]), node("Mul", ["half", "m"], ["y"])]
    : [node("Mul", ["x", "half"], ["m"]), node("Mul", ["a", "m"], ["y"])];
  return model({
    name: "gelu",
    nodes: [...head, node("Erf", ["d"], ["e"]), node("Add", ["one", "e"], ["a"]), ...tail],
    initializers: constants,
    inputs: [valueInfo("x", [2, 5])],
    outputs: [valueInfo("y", [2, 5]), ...extra.map((n) => valueInfo(n, [2, 5]))],
  }, 13);
}

const xs = [-4, -2.5, -1, -0.3, -1e-3, 0, 1e-3, 0.7, 1.5, 3.9];

async function run(bytes: Uint8Array): Promise<{ text: string; y: number[] }> {
  using m = await importONNX(bytes);
  const vm = new VirtualMachine(m.executable);
  using x = tensor(new Float32Array(xs), { shape: [2, 5] });
  const out = await vm.invoke("main", x, [...m.params]) as NDArray | NDArray[];
  const outs = Array.isArray(out) ? out : [out];
  const y = [...outs[0].dataSync() as Float32Array];
  for (const o of outs) o.dispose();
  return { text: m.executable.as_text(), y };
}

for (const order of ["nn", "hf"] as const) {
  Deno.test(`onnx gelu fusion: the ${order === "nn" ? "nn.GELU" : "Hugging Face"} order becomes one vm.op.gelu`, async () => {
    const { text, y } = await run(spelled(order));
    assert(text.includes("vm.op.gelu"), text);
    for (const op of ["erf", "divide", "multiply", "add"]) {
      assert(!text.includes(`vm.op.${op}`), text);
    }
    y.forEach((v, i) =>
      assert(Math.abs(v - gelu(xs[i])) <= 1e-6, `gelu(${xs[i]}) = ${v}, want ${gelu(xs[i])}`)
    );
  });
}

Deno.test("onnx gelu fusion: a chain whose Erf or product is read elsewhere stays as it is", async () => {
  for (const extra of [["e"], ["m"]]) {
    const { text, y } = await run(spelled("nn", extra));
    assert(!text.includes("vm.op.gelu") && text.includes("vm.op.erf"), text);
    y.forEach((v, i) => assert(Math.abs(v - gelu(xs[i])) <= 1e-6, `${v} vs ${gelu(xs[i])}`));
  }
});

Deno.test("onnx gelu fusion: a constant other than √2, 1 and ½ is not GELU", async () => {
  const bytes = model({
    name: "not_gelu",
    nodes: [
      node("Div", ["x", "two"], ["d"]),
      node("Erf", ["d"], ["e"]),
      node("Add", ["e", "one"], ["a"]),
      node("Mul", ["x", "a"], ["m"]),
      node("Mul", ["m", "half"], ["y"]),
    ],
    initializers: [...constants, floatTensor("two", [], new Float32Array([2]))],
    inputs: [valueInfo("x", [2, 5])],
    outputs: [valueInfo("y", [2, 5])],
  }, 13);
  const { text, y } = await run(bytes);
  assert(!text.includes("vm.op.gelu"), text);
  const want = xs.map((x) => 0.5 * x * (1 + erf(x / 2)));
  y.forEach((v, i) => assert(Math.abs(v - want[i]) <= 1e-6, `${v} vs ${want[i]}`));
  assertEquals(y.length, 10);
});
