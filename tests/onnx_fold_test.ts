/**
 * `importONNX` folds data movement on tensors known at import (the
 * emitter's `FOLDABLE` calls on `Constant`s and bound inputs): exporters
 * reorder weights with `Slice`/`Concat`/`Transpose` chains (Silero VAD's
 * LSTM gates), which would otherwise run on every call. The folded program
 * must give the same results as the unfolded one, keep only the folded
 * constant (not the one it was sliced from), leave parameters (which
 * `load_params` may replace) and growth past the bound to run time, and
 * leave a call whose fold fails to fail at run time as before.
 */

import { assert, assertEquals, assertRejects } from "@std/assert";
import { importONNX, type NDArray, tensor, VirtualMachine, VMError } from "../mod.ts";
import { floatTensor, int64Tensor, model, node, valueInfo } from "../bench/_onnx_writer.ts";
import { ElemType } from "../bench/_onnx_writer.ts";

/** W [4, 3] with its two row halves swapped (Slice, Slice, Concat), transposed, then x · that. */
function swapped(wAsInitializer: boolean): Uint8Array {
  const w = new Float32Array(12).map((_, i) => i + 1);
  return model({
    name: "swapped",
    nodes: [
      node("Slice", ["w", "zero", "two", "axis0"], ["top"]),
      node("Slice", ["w", "two", "four", "axis0"], ["bottom"]),
      node("Concat", ["bottom", "top"], ["wr"], { axis: 0 }),
      node("Transpose", ["wr"], ["wt"], { perm: [1, 0] }),
      node("MatMul", ["x", "wt"], ["y"]),
    ],
    initializers: [
      int64Tensor("zero", [1], [0]),
      int64Tensor("two", [1], [2]),
      int64Tensor("four", [1], [4]),
      int64Tensor("axis0", [1], [0]),
      ...(wAsInitializer ? [floatTensor("w", [4, 3], w)] : []),
    ],
    inputs: [valueInfo("x", [1, 3]), ...(wAsInitializer ? [] : [valueInfo("w", [4, 3])])],
    outputs: [valueInfo("y", [1, 4])],
  }, 13);
}

/** x · (W with its halves swapped)ᵀ, by hand, for W = 1..12 row-major. */
function byHand(x: number[]): number[] {
  const w = [...Array(4)].map((_, r) => [0, 1, 2].map((c) => 3 * r + c + 1));
  const rows = [w[2], w[3], w[0], w[1]];
  return rows.map((row) => row.reduce((s, v, c) => s + v * x[c], 0));
}

Deno.test("onnx fold: Slice/Concat/Transpose of a known tensor run once at import", async () => {
  using w = tensor(new Float32Array(12).map((_, i) => i + 1), { shape: [4, 3] });
  using m = await importONNX(swapped(false), { inputValues: { w } });
  const text = m.executable.as_text();
  for (const op of ["strided_slice", "concat", "transpose", "make_tuple"]) {
    assert(!text.includes(`vm.op.${op}`) && !text.includes(`vm.builtin.${op}`), text);
  }
  // Only the folded [3, 4] weight is a constant, not the [4, 3] it came from.
  const tensors = m.executable.constants.filter((c) => typeof c === "object" && "shape" in c);
  assertEquals(tensors.map((t) => [...(t as NDArray).shape]), [[3, 4]]);
  const vm = new VirtualMachine(m.executable);
  using x = tensor(new Float32Array([1, -2, 0.5]), { shape: [1, 3] });
  // The Slices' starts and ends are parameters too; their values are read at import.
  using y = await vm.invoke("main", x, [...m.params]) as NDArray;
  assertEquals([...y.dataSync()], byHand([1, -2, 0.5]));
});

Deno.test("onnx fold: a parameter is not folded (load_params may replace it)", async () => {
  using m = await importONNX(swapped(true));
  const text = m.executable.as_text();
  assert(text.includes("vm.op.strided_slice") && text.includes("vm.op.concat"), text);
  const vm = new VirtualMachine(m.executable);
  using x = tensor(new Float32Array([1, -2, 0.5]), { shape: [1, 3] });
  using y = await vm.invoke("main", x, [...m.params]) as NDArray;
  assertEquals([...y.dataSync()], byHand([1, -2, 0.5]));
});

Deno.test("onnx fold: a Gather whose fold fails is left to fail at run time, the VM usable", async () => {
  // Indices as a bound input: an out-of-range index on a known table.
  const bytes = model({
    name: "gather",
    nodes: [
      node("Gather", ["table", "idx"], ["rows"], { axis: 0 }),
      node("Add", ["rows", "x"], ["y"]),
    ],
    initializers: [],
    inputs: [
      valueInfo("table", [3, 2]),
      valueInfo("idx", [2], ElemType.int64),
      valueInfo("x", [2, 2]),
    ],
    outputs: [valueInfo("y", [2, 2])],
  }, 13);
  using table = tensor(new Float32Array([0, 1, 10, 11, 20, 21]), { shape: [3, 2] });
  using bad = tensor(new BigInt64Array([2n, 7n]), { shape: [2] });
  using m = await importONNX(bytes, { inputValues: { table, idx: bad } });
  const vm = new VirtualMachine(m.executable);
  using x = tensor(new Float32Array(4), { shape: [2, 2] });
  const e = await assertRejects(() => vm.invoke("main", x), VMError);
  assert(e.message.includes("out of range"), e.message);
  // A good index folds: the table's rows are a constant, the Add the only operator.
  using good = tensor(new BigInt64Array([2n, -3n]), { shape: [2] });
  using m2 = await importONNX(bytes, { inputValues: { table, idx: good } });
  assert(!m2.executable.as_text().includes("vm.op.take"), m2.executable.as_text());
  using y = await new VirtualMachine(m2.executable).invoke("main", x) as NDArray;
  assertEquals([...y.dataSync()], [20, 21, 0, 1]);
});

Deno.test("onnx fold: a reshape of a reshape reads the first's input; one back to its input's shape is that input", async () => {
  // a = Relu(x) [2, 3] → [3, 2] → [6] → [2, 3] = a again; y = Neg of that. Two more outputs:
  // the identity reshape itself and a, which are one register: each must be a tensor of its own.
  const bytes = model({
    name: "reshapes",
    nodes: [
      node("Relu", ["x"], ["a"]),
      node("Reshape", ["a", "s32"], ["b"]),
      node("Reshape", ["b", "s6"], ["c"]),
      node("Reshape", ["c", "s23"], ["d"]),
      node("Neg", ["d"], ["y"]),
    ],
    initializers: [
      int64Tensor("s32", [2], [3, 2]),
      int64Tensor("s6", [1], [6]),
      int64Tensor("s23", [2], [2, 3]),
    ],
    inputs: [valueInfo("x", [2, 3])],
    outputs: [valueInfo("y", [2, 3]), valueInfo("d", [2, 3]), valueInfo("a", [2, 3])],
  }, 13);
  using m = await importONNX(bytes);
  const text = m.executable.as_text();
  assert(!text.includes("vm.builtin.reshape"), text);
  const vm = new VirtualMachine(m.executable);
  using x = tensor(new Float32Array([1, -2, 3, -4, 5, -6]), { shape: [2, 3] });
  const outs = await vm.invoke("main", x, [...m.params]) as NDArray[];
  assertEquals([...outs[0].dataSync()], [-1, -0, -3, -0, -5, -0]);
  for (const o of outs.slice(1)) assertEquals([...o.dataSync()], [1, 0, 3, 0, 5, 0]);
  assert(outs[1] !== outs[2]);
  for (const o of outs) o.dispose();
});

Deno.test("onnx fold: a Cast to the dtype its input has is that input; as an output, a copy", async () => {
  // ONNX's TensorProto.FLOAT is 1: Cast(to = FLOAT) of a float32 value, then its outputs.
  const cast = (outputs: string[]) =>
    model({
      name: "cast",
      nodes: [
        node("Relu", ["x"], ["a"]),
        node("Cast", ["a"], ["b"], { to: 1 }),
        node("Neg", ["b"], ["y"]),
      ],
      initializers: [],
      inputs: [valueInfo("x", [3])],
      outputs: outputs.map((o) => valueInfo(o, [3])),
    }, 13);
  using x = tensor(new Float32Array([-1, 2, -3]), { shape: [3] });
  {
    using m = await importONNX(cast(["y"]));
    assert(!/call\s+vm\.op\.cast/.test(m.executable.as_text()), m.executable.as_text());
    using y = await new VirtualMachine(m.executable).invoke("main", x) as NDArray;
    assertEquals([...y.dataSync()], [-0, -2, -0]);
  }
  // b and a are one value: the second output handed out is a copy, so each is a tensor of its own.
  using m = await importONNX(cast(["y", "b", "a"]));
  const outs = await new VirtualMachine(m.executable).invoke("main", x) as NDArray[];
  assertEquals(outs.map((o) => [...o.dataSync()]), [[-0, -2, -0], [0, 2, 0], [0, 2, 0]]);
  assert(outs[1] !== outs[2]);
  for (const o of outs) o.dispose();
});

Deno.test("onnx fold: the constants and parameters the import made are sealed (their copies may stay resident); a caller's tensor is not", async () => {
  using w = tensor(new Float32Array(12).map((_, i) => i + 1), { shape: [4, 3] });
  using folded = await importONNX(swapped(false), { inputValues: { w } });
  const weights = folded.executable.constants.filter((c): c is NDArray =>
    typeof c === "object" && c !== null && "shape" in c
  );
  assertEquals(weights.map((t) => t.sealed), [true]);
  // Bound and read as it is, the caller's own tensor becomes the constant: the caller may hold a
  // view of it, so it stays unsealed.
  const direct = model({
    name: "direct",
    nodes: [node("MatMul", ["x", "w"], ["y"])],
    initializers: [],
    inputs: [valueInfo("x", [1, 4]), valueInfo("w", [4, 3])],
    outputs: [valueInfo("y", [1, 3])],
  }, 13);
  using m = await importONNX(direct, { inputValues: { w } });
  assert(m.executable.constants.includes(w));
  assertEquals(w.sealed, false);
  // Nor a fold that views the caller's memory: a reshape of it.
  const reshaped = model({
    name: "reshaped",
    nodes: [node("Reshape", ["w", "s26"], ["wr"]), node("MatMul", ["x", "wr"], ["y"])],
    initializers: [int64Tensor("s26", [2], [2, 6])],
    inputs: [valueInfo("x", [1, 2]), valueInfo("w", [4, 3])],
    outputs: [valueInfo("y", [1, 6])],
  }, 13);
  using r = await importONNX(reshaped, { inputValues: { w } });
  const views = r.executable.constants.filter((c): c is NDArray =>
    typeof c === "object" && c !== null && "shape" in c && c.dtype === "float32"
  );
  assertEquals(views.map((t) => [[...t.shape], t.sealed]), [[[2, 6], false]]);
  using x = tensor(new Float32Array([1, 2]), { shape: [1, 2] });
  using y = await new VirtualMachine(r.executable).invoke("main", x, [...r.params]) as NDArray;
  assertEquals([...y.dataSync()], [1 + 14, 2 + 16, 3 + 18, 4 + 20, 5 + 22, 6 + 24]);
  // The parameters the import made are sealed as a tensor cache's are; a view a caller takes
  // later ends the seal (devices/storage.ts), so writing through it stays safe.
  using p = await importONNX(swapped(true));
  assert(p.params.every((t) => t.sealed));
  p.params[4].cpuView();
  assertEquals(p.params[4].sealed, false);
});
