/**
 * `importONNX` (onnx/import_onnx.ts) on small models written with the
 * benchmarks' independent writer (bench/_onnx_writer.ts): results against
 * values computed by hand, symbolic dimensions bound at run time and checked,
 * shape arithmetic folded (`Shape` → `Gather` → `Concat` → `Reshape`),
 * initializers as a parameter tuple and through `load_params` from a tensor
 * cache, and every unsupported node listed in one error before anything is
 * built.
 */

import { assert, assertEquals, assertRejects } from "@std/assert";
import {
  dumpTensorCache,
  Executable,
  importONNX,
  type NDArray,
  ONNXImportError,
  tensor,
  UnsupportedONNXError,
  VirtualMachine,
  VMError,
} from "../mod.ts";
import {
  ElemType,
  type Field,
  Float,
  floatTensor,
  int64Tensor,
  message,
  model,
  node,
  valueInfo,
} from "../bench/_onnx_writer.ts";

const close = (got: ArrayLike<number>, want: readonly number[], tol = 1e-5) => {
  assertEquals(got.length, want.length);
  for (let i = 0; i < want.length; i++) {
    assert(Math.abs(got[i] - want[i]) <= tol, `[${i}] ${got[i]} vs ${want[i]}`);
  }
};

/** y = Relu(x·Wᵀ + b) for a batch of any size, then reshaped by shape arithmetic to [B, 2, 1]. */
function mlp(): Uint8Array {
  return model({
    name: "mlp",
    nodes: [
      node("Gemm", ["x", "w", "b"], ["h"], { transB: 1 }),
      node("Relu", ["h"], ["r"]),
      node("Shape", ["r"], ["s"]),
      node("Gather", ["s", "zero"], ["batch"], { axis: 0 }),
      node("Concat", ["batch", "tail"], ["target"], { axis: 0 }),
      node("Reshape", ["r", "target"], ["y"]),
    ],
    initializers: [
      floatTensor("w", [2, 3], new Float32Array([1, 0, -1, 0.5, 0.5, 0.5])),
      floatTensor("b", [2], new Float32Array([0, -1])),
      int64Tensor("zero", [1], [0]),
      int64Tensor("tail", [2], [2, 1]),
    ],
    inputs: [valueInfo("x", ["batch", 3])],
    outputs: [valueInfo("y", ["batch", 2, 1])],
  }, 13);
}

Deno.test("onnx import: a Gemm MLP with a symbolic batch runs and matches by hand", async () => {
  using imported = await importONNX(mlp());
  assertEquals(imported.inputs, [{ name: "x", dtype: "float32", shape: ["batch", 3] }]);
  assertEquals(imported.paramNames, ["w", "b", "zero", "tail"]);
  assertEquals(imported.outputs[0].shape, ["batch", 2, 1]);
  const vm = new VirtualMachine(imported.executable);
  for (const rows of [1, 3]) {
    const x = Array.from({ length: rows * 3 }, (_, i) => i - 2);
    using xt = tensor(new Float32Array(x), { shape: [rows, 3] });
    using y = await vm.invoke("main", xt, [...imported.params]) as NDArray;
    assertEquals(y.shape, [rows, 2, 1]);
    const want: number[] = [];
    for (let r = 0; r < rows; r++) {
      const [a, b, c] = x.slice(3 * r, 3 * r + 3);
      want.push(Math.max(0, a - c), Math.max(0, 0.5 * (a + b + c) - 1));
    }
    close(y.dataSync() as Float32Array, want);
  }
  // The shape arithmetic was folded: no Shape/Gather/Concat call remains, the reshape reads the heap.
  const text = imported.executable.as_text();
  assert(!text.includes("vm.op.take") && !text.includes("vm.op.concat"), text);
  assert(text.includes("vm.builtin.make_shape"), text);
});

Deno.test("onnx import: an input of the wrong shape or dtype fails naming the input", async () => {
  using imported = await importONNX(mlp());
  const vm = new VirtualMachine(imported.executable);
  using bad = tensor(new Float32Array(8), { shape: [2, 4] });
  const e = await assertRejects(() => vm.invoke("main", bad, [...imported.params]), VMError);
  assert(e.message.includes('input "x"'), e.message);
  using ints = tensor(new Int32Array(3), { shape: [1, 3] });
  await assertRejects(() => vm.invoke("main", ints, [...imported.params]), VMError);
  // The VM stays usable.
  using good = tensor(new Float32Array(3), { shape: [1, 3] });
  using y = await vm.invoke("main", good, [...imported.params]) as NDArray;
  assertEquals(y.shape, [1, 2, 1]);
});

Deno.test("onnx import: saved with its params as a tensor cache, loaded and run", async () => {
  using imported = await importONNX(mlp());
  const dir = await Deno.makeTempDir({ prefix: "relaxvm-onnx-" });
  try {
    await dumpTensorCache(imported.paramNames.map((n, i) => [n, imported.params[i]] as const), dir);
    const exe = Executable.load(imported.executable.save());
    const vm = new VirtualMachine(exe, undefined, { tensorCacheRoots: [dir] });
    const params = await vm.invoke("load_params", `file://${dir}/`, 1, 0);
    using x = tensor(new Float32Array([3, 0, 1]), { shape: [1, 3] });
    using y = await vm.invoke("main", x, params) as NDArray;
    close(y.dataSync() as Float32Array, [2, 1]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("onnx import: every unsupported node is listed in one error, before anything is built", async () => {
  const bytes = model({
    name: "bad",
    nodes: [
      node("Relu", ["x"], ["a"]),
      node("NoSuchOp", ["a"], ["b"]),
      node("Softmax", ["b"], ["c"], { axis: 1, bogus: 3 }),
      node("AlsoMissing", ["c"], ["y"]),
    ],
    initializers: [],
    inputs: [valueInfo("x", [2, 2])],
    outputs: [valueInfo("y", [2, 2])],
  });
  const e = await assertRejects(() => importONNX(bytes), UnsupportedONNXError);
  assertEquals(e.nodes.map((n: { op: string }) => n.op), ["NoSuchOp", "Softmax", "AlsoMissing"]);
  assert(e.nodes[1].reason.includes("bogus"), e.nodes[1].reason);
  assert(e.message.includes("3 nodes not supported"), e.message);
});

Deno.test("onnx import: conversion problems are collected too, not only the first", async () => {
  // Reshape by a shape of unknown length (the result's rank is unknown), and Softmax over an
  // axis the input lacks: both reported.
  const bytes = model({
    name: "late",
    nodes: [
      node("Reshape", ["x", "s"], ["a"]),
      node("Softmax", ["x"], ["b"], { axis: 3 }),
      node("Add", ["a", "b"], ["y"]),
    ],
    initializers: [],
    inputs: [valueInfo("x", ["n"]), valueInfo("s", ["k"], 7)],
    outputs: [valueInfo("y", ["n"])],
  }, 13);
  const e = await assertRejects(() => importONNX(bytes), UnsupportedONNXError);
  assertEquals(e.nodes.map((n: { op: string }) => n.op), ["Reshape", "Softmax"]);
  assert(e.nodes[0].reason.includes("unknown length"), e.nodes[0].reason);
  assert(e.nodes[1].reason.includes("axis 3 out of range"), e.nodes[1].reason);
});

Deno.test("onnx import: sizes known only at run time are read when the program runs", async () => {
  // Reshape of an input of unknown size by a shape given as an input (0 keeps, -1 infers), then
  // Slice by bounds given as inputs: the host operators read both when main runs.
  const bytes = model({
    name: "late",
    nodes: [
      node("Reshape", ["x", "s"], ["a"]),
      node("Slice", ["a", "starts", "ends", "axes"], ["y"]),
    ],
    initializers: [],
    inputs: [
      valueInfo("x", ["n"]),
      valueInfo("s", [2], 7),
      valueInfo("starts", [1], 7),
      valueInfo("ends", [1], 7),
      valueInfo("axes", [1], 7),
    ],
    outputs: [valueInfo("y", ["r", "c"])],
  }, 13);
  using imported = await importONNX(bytes);
  const vm = new VirtualMachine(imported.executable);
  const ints = (v: number[]) => tensor(new BigInt64Array(v.map(BigInt)), { shape: [v.length] });
  using x = tensor([0, 1, 2, 3, 4, 5]);
  using s = ints([2, -1]), starts = ints([-2]), ends = ints([1000]), axes = ints([1]);
  using y = await vm.invoke("main", x, s, starts, ends, axes) as NDArray;
  assertEquals(y.shape, [2, 2]);
  assertEquals([...y.dataSync()], [1, 2, 4, 5]);
});

Deno.test("onnx import: a Resize of an image whose sizes are symbols is planned when it runs", async () => {
  // Sizes [1, 1, 2, 3] for x [1, 1, h, w]: the scales follow h and w, so vm.op.resize plans it
  // when main runs (nearest, half_pixel, round_prefer_floor: ONNX's defaults).
  const bytes = model({
    name: "late_resize",
    nodes: [node("Resize", ["x", "", "", "sizes"], ["y"])],
    initializers: [int64Tensor("sizes", [4], [1, 1, 2, 3])],
    inputs: [valueInfo("x", [1, 1, "h", "w"])],
    outputs: [valueInfo("y", [1, 1, 2, 3])],
  }, 13);
  using imported = await importONNX(bytes);
  assert(imported.executable.functions.some((f) => f.name === "vm.op.resize"));
  const vm = new VirtualMachine(imported.executable);
  const run = async (x: NDArray) => {
    using y = await vm.invoke("main", x, imported.params) as NDArray;
    return [[...y.shape], [...y.dataSync()]];
  };
  // Width 2 → 3 reads sources −1/6, 1/2 (a tie, to the floor) and 7/6: columns 0, 0, 1.
  using a = tensor([1, 2, 3, 4], { shape: [1, 1, 2, 2] });
  assertEquals(await run(a), [[1, 1, 2, 3], [1, 1, 2, 3, 3, 4]]);
  // Height 1 → 2 repeats the row; width 4 → 3 reads 1/6, 3/2 (to the floor) and 17/6.
  using b = tensor([1, 2, 3, 4], { shape: [1, 1, 1, 4] });
  assertEquals(await run(b), [[1, 1, 2, 3], [1, 2, 4, 1, 2, 4]]);
});

Deno.test("onnx import: a cyclic graph and a missing output are import errors", async () => {
  const cyclic = model({
    name: "cycle",
    nodes: [node("Relu", ["b"], ["a"]), node("Relu", ["a"], ["b"])],
    initializers: [],
    inputs: [valueInfo("x", [1])],
    outputs: [valueInfo("a", [1])],
  });
  const e = await assertRejects(() => importONNX(cyclic), ONNXImportError);
  assert(e.message.includes("cyclic"), e.message);
  const missing = model({
    name: "missing",
    nodes: [node("Relu", ["x"], ["a"])],
    initializers: [],
    inputs: [valueInfo("x", [1])],
    outputs: [valueInfo("nowhere", [1])],
  });
  await assertRejects(() => importONNX(missing), ONNXImportError, "never written");
});

Deno.test("onnx import: softmax over a middle axis, LayerNormalization, ReduceMean", async () => {
  const bytes = model({
    name: "nn",
    nodes: [
      node("Softmax", ["x"], ["s"], { axis: 1 }),
      node("LayerNormalization", ["s", "g", "b"], ["l"], { epsilon: new Float(1e-5) }),
      node("ReduceMean", ["l"], ["y"], { axes: [1], keepdims: 0 }),
    ],
    initializers: [
      floatTensor("g", [2], new Float32Array([1, 2])),
      floatTensor("b", [2], new Float32Array([0, 1])),
    ],
    inputs: [valueInfo("x", [1, 3, 2])],
    outputs: [valueInfo("y", [1, 2])],
  }, 13);
  using imported = await importONNX(bytes);
  const vm = new VirtualMachine(imported.executable);
  const x = [0, 1, 2, 3, 4, 5];
  using xt = tensor(new Float32Array(x), { shape: [1, 3, 2] });
  using y = await vm.invoke("main", xt, [...imported.params]) as NDArray;
  // Softmax over axis 1 (the three rows), per column.
  const s = [...x];
  for (const c of [0, 1]) {
    const col = [0, 1, 2].map((r) => Math.exp(x[2 * r + c]));
    const sum = col.reduce((a, b) => a + b);
    for (const r of [0, 1, 2]) s[2 * r + c] = col[r] / sum;
  }
  // LayerNorm over the last axis (two values: ±1 after normalization), then the mean over rows.
  const ln = [0, 1, 2].flatMap((r) => {
    const [a, b] = [s[2 * r], s[2 * r + 1]];
    const m = (a + b) / 2, v = ((a - m) ** 2 + (b - m) ** 2) / 2;
    return [(a - m) / Math.sqrt(v + 1e-5) * 1 + 0, (b - m) / Math.sqrt(v + 1e-5) * 2 + 1];
  });
  close(y.dataSync() as Float32Array, [
    (ln[0] + ln[2] + ln[4]) / 3,
    (ln[1] + ln[3] + ln[5]) / 3,
  ], 1e-4);
});

Deno.test("onnx import: Equal, Not and Where make and use a bool mask", async () => {
  const bytes = model({
    name: "mask",
    nodes: [
      node("Equal", ["x", "zero"], ["is0"]),
      node("Not", ["is0"], ["keep"]),
      node("Where", ["keep", "x", "fill"], ["y"]),
    ],
    initializers: [
      floatTensor("zero", [], new Float32Array([0])),
      floatTensor("fill", [1], new Float32Array([-9])),
    ],
    inputs: [valueInfo("x", [4])],
    outputs: [valueInfo("y", [4])],
  }, 13);
  using imported = await importONNX(bytes);
  const vm = new VirtualMachine(imported.executable);
  using x = tensor([0, 2, 0, -3]);
  using y = await vm.invoke("main", x, imported.params) as NDArray;
  assertEquals([...y.dataSync()], [-9, 2, -9, -3]);
});

Deno.test("onnx import: a reduction whose axes are an input, negative ones included", async () => {
  const bytes = model({
    name: "reduce",
    nodes: [node("ReduceSum", ["x", "axes"], ["y"], { keepdims: 0 })],
    initializers: [],
    inputs: [valueInfo("x", [2, 3]), valueInfo("axes", [1], ElemType.int64)],
    outputs: [valueInfo("y", ["n"])],
  }, 13);
  using imported = await importONNX(bytes);
  const vm = new VirtualMachine(imported.executable);
  using x = tensor([[1, 2, 3], [4, 5, 6]]);
  for (const [axis, want] of [[-1, [6, 15]], [0, [5, 7, 9]], [1, [6, 15]]] as const) {
    using axes = tensor(new BigInt64Array([BigInt(axis)]));
    using y = await vm.invoke("main", x, axes) as NDArray;
    assertEquals([...y.dataSync()], want, `axis ${axis}`);
  }
});

Deno.test("onnx import: Concat's size along its axis is the sum of the inputs'", async () => {
  // [2, 3] ++ [2, 4] along axis 1 is [2, 7]: the Add after it must see 7 (it once saw 3 · 4).
  const bytes = model({
    name: "concat",
    nodes: [node("Concat", ["a", "b"], ["c"], { axis: 1 }), node("Add", ["c", "d"], ["y"])],
    initializers: [],
    inputs: [valueInfo("a", [2, 3]), valueInfo("b", [2, 4]), valueInfo("d", [2, 7])],
    outputs: [valueInfo("y", [2, 7])],
  }, 13);
  using imported = await importONNX(bytes);
  assertEquals(imported.outputs[0].shape, [2, 7]);
  const vm = new VirtualMachine(imported.executable);
  using a = tensor(new Float32Array(6).fill(1), { shape: [2, 3] });
  using b = tensor(new Float32Array(8).fill(2), { shape: [2, 4] });
  using d = tensor(new Float32Array(14).fill(10), { shape: [2, 7] });
  using y = await vm.invoke("main", a, b, d) as NDArray;
  assertEquals([...y.dataSync()], [11, 11, 11, 12, 12, 12, 12, 11, 11, 11, 12, 12, 12, 12]);
});

Deno.test("onnx import: an input dimension past 2^31 is unsupported, not a builder RangeError", async () => {
  // Found by the onnx fuzz family: the size went into match_shape's immediate.
  const bytes = model({
    name: "huge",
    nodes: [node("Relu", ["x"], ["y"])],
    initializers: [],
    inputs: [valueInfo("x", [2 ** 52])],
    outputs: [valueInfo("y", [1])],
  });
  const e = await assertRejects(() => importONNX(bytes), UnsupportedONNXError);
  assert(e.message.includes("a dimension of 4503599627370496"), e.message);
});

Deno.test("onnx import: a failed import leaves no tensor allocated", async () => {
  // A Gemm constant (alpha) interned, then an unsupported node: nothing may stay behind.
  const { defaultAllocator } = await import("../devices/allocation_context.ts");
  const { cpu } = await import("../mod.ts");
  const host = defaultAllocator(cpu());
  const bytes = model({
    name: "fails late",
    nodes: [
      node("Gemm", ["x", "w"], ["h"], { transB: 1, alpha: new Float(0.5) }),
      node("Softmax", ["h"], ["y"], { axis: 5 }),
    ],
    initializers: [floatTensor("w", [2, 3], new Float32Array(6))],
    inputs: [valueInfo("x", [1, 3])],
    outputs: [valueInfo("y", [1, 2])],
  });
  const before = host.stats().liveBytes;
  await assertRejects(() => importONNX(bytes), UnsupportedONNXError);
  assertEquals(host.stats().liveBytes, before);
});

Deno.test("onnx import: Conv (groups, stride, padding, bias) and MaxPool match direct loops", async () => {
  // x [1, 2, 5, 5], w [4, 1, 3, 3] in 2 groups, stride 2, pads 1; then a 2×2 max pool, stride 1.
  const xs = Float32Array.from({ length: 50 }, (_, i) => Math.sin(i));
  const ws = Float32Array.from({ length: 36 }, (_, i) => Math.cos(i));
  const bs = new Float32Array([0.5, -0.5, 1, 0]);
  const bytes = model({
    name: "cnn",
    nodes: [
      node("Conv", ["x", "w", "b"], ["c"], { group: 2, strides: [2, 2], pads: [1, 1, 1, 1] }),
      node("MaxPool", ["c"], ["y"], { kernel_shape: [2, 2] }),
    ],
    initializers: [floatTensor("w", [4, 1, 3, 3], ws), floatTensor("b", [4], bs)],
    inputs: [valueInfo("x", [1, 2, 5, 5])],
    outputs: [valueInfo("y", [1, 4, 2, 2])],
  }, 13);
  // The convolution by its definition: 3×3 output per channel.
  const conv = new Float32Array(4 * 9);
  for (let m = 0; m < 4; m++) {
    const c = m < 2 ? 0 : 1;
    for (let oy = 0; oy < 3; oy++) {
      for (let ox = 0; ox < 3; ox++) {
        let s = bs[m];
        for (let ky = 0; ky < 3; ky++) {
          for (let kx = 0; kx < 3; kx++) {
            const iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
            if (iy < 0 || iy >= 5 || ix < 0 || ix >= 5) continue;
            s += xs[c * 25 + iy * 5 + ix] * ws[m * 9 + ky * 3 + kx];
          }
        }
        conv[m * 9 + oy * 3 + ox] = s;
      }
    }
  }
  const want: number[] = [];
  for (let m = 0; m < 4; m++) {
    for (let oy = 0; oy < 2; oy++) {
      for (let ox = 0; ox < 2; ox++) {
        const at = (y: number, x: number) => conv[m * 9 + y * 3 + x];
        want.push(Math.max(at(oy, ox), at(oy, ox + 1), at(oy + 1, ox), at(oy + 1, ox + 1)));
      }
    }
  }
  using imported = await importONNX(bytes);
  const vm = new VirtualMachine(imported.executable);
  using x = tensor(xs, { shape: [1, 2, 5, 5] });
  using y = await vm.invoke("main", x, imported.params) as NDArray;
  assertEquals(y.shape, [1, 4, 2, 2]);
  close(y.dataSync() as Float32Array, want, 1e-5);
});

/** A model whose weight `w` [2, 2] lives in an external-data file at `location`. */
function externalModel(location: string, offset = 0): Uint8Array {
  // TensorProto: dims 1, data_type 2, name 8, external_data 13 (key 1, value 2), data_location 14.
  const w = [
    [1, 2],
    [1, 2],
    [2, ElemType.float],
    [8, "w"],
    [13, [[1, "location"], [2, location]]],
    [13, [[1, "offset"], [2, String(offset)]]],
    [13, [[1, "length"], [2, "16"]]],
    [14, 1],
  ] as Parameters<typeof model>[0]["initializers"][number];
  return model({
    name: "external",
    nodes: [node("MatMul", ["x", "w"], ["y"])],
    initializers: [w],
    inputs: [valueInfo("x", [1, 2])],
    outputs: [valueInfo("y", [1, 2])],
  }, 13);
}

Deno.test("onnx import: external data is read from beside the model, never outside it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm-onnx-ext-" });
  try {
    await Deno.mkdir(`${dir}/model`);
    // 4 bytes of padding, then w = [[1, 2], [3, 4]].
    const data = new Uint8Array(20);
    data.set(new Uint8Array(new Float32Array([1, 2, 3, 4]).buffer), 4);
    await Deno.writeFile(`${dir}/model/weights.bin`, data);
    await Deno.writeFile(`${dir}/secret.bin`, data);
    await Deno.writeFile(`${dir}/model/m.onnx`, externalModel("weights.bin", 4));
    using imported = await importONNX(`${dir}/model/m.onnx`);
    const vm = new VirtualMachine(imported.executable);
    using x = tensor([[1, 1]]);
    using y = await vm.invoke("main", x, imported.params) as NDArray;
    assertEquals([...y.dataSync()], [4, 6]);
    // From bytes there is no folder to read it from.
    await assertRejects(
      () => importONNX(externalModel("weights.bin", 4)),
      ONNXImportError,
      "needs the model's path or URL",
    );
    // A location that climbs out, an absolute one, a URL: refused before anything is read.
    for (
      const location of [
        "../secret.bin",
        "%2e%2e/secret.bin",
        `${dir}/secret.bin`,
        "file:///etc/passwd",
      ]
    ) {
      await Deno.writeFile(`${dir}/model/bad.onnx`, externalModel(location));
      await assertRejects(() => importONNX(`${dir}/model/bad.onnx`), ONNXImportError, location);
    }
    // Offsets past the end of the file.
    await Deno.writeFile(`${dir}/model/long.onnx`, externalModel("weights.bin", 8));
    await assertRejects(
      () => importONNX(`${dir}/model/long.onnx`),
      ONNXImportError,
      "fall outside",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("onnx import: ConvTranspose (stride, padding, output_padding) matches its definition", async () => {
  // 1-D: x [1, 2, 4], w [2, 3, 3] (C=2 in, 3 out), stride 2, pads [1, 1], output_padding 1.
  const xs = Float32Array.from({ length: 8 }, (_, i) => i - 3);
  const ws = Float32Array.from({ length: 18 }, (_, i) => Math.cos(i));
  const bytes = model({
    name: "deconv",
    nodes: [
      node("ConvTranspose", ["x", "w"], ["y"], {
        strides: [2],
        pads: [1, 1],
        output_padding: [1],
      }),
    ],
    initializers: [floatTensor("w", [2, 3, 3], ws)],
    inputs: [valueInfo("x", [1, 2, 4])],
    outputs: [valueInfo("y", [1, 3, 8])],
  }, 13);
  // y[m, i·2 + k − 1] += x[c, i] · w[c, m, k]: length 2·3 + 1 + 3 − 2 = 8.
  const want = new Array<number>(24).fill(0);
  for (let c = 0; c < 2; c++) {
    for (let m = 0; m < 3; m++) {
      for (let i = 0; i < 4; i++) {
        for (let k = 0; k < 3; k++) {
          const o = i * 2 + k - 1;
          if (o >= 0 && o < 8) want[m * 8 + o] += xs[c * 4 + i] * ws[c * 9 + m * 3 + k];
        }
      }
    }
  }
  using imported = await importONNX(bytes);
  assertEquals(imported.outputs[0].shape, [1, 3, 8]);
  const vm = new VirtualMachine(imported.executable);
  using x = tensor(xs, { shape: [1, 2, 4] });
  using y = await vm.invoke("main", x, imported.params) as NDArray;
  close(y.dataSync() as Float32Array, want, 1e-5);
});

Deno.test("onnx import: If branches at run time; a weight first used inside a branch works in both", async () => {
  // y = cond ? relu(x·w) : x·w·2, with w a parameter first read inside each branch.
  const then = message([
    [1, message(node("MatMul", ["x", "w"], ["t0"]))],
    [1, message(node("Relu", ["t0"], ["t"]))],
    [12, message(valueInfo("t", [1, 2]))],
  ]);
  const otherwise = message([
    [1, message(node("MatMul", ["x", "w"], ["e0"]))],
    [1, message(node("Add", ["e0", "e0"], ["e"]))],
    [12, message(valueInfo("e", [1, 2]))],
  ]);
  const ifNode: Parameters<typeof model>[0]["nodes"][number] = [
    [1, "cond"],
    [2, "y"],
    [4, "If"],
    [5, [[1, "then_branch"], [6, then], [20, 5]]],
    [5, [[1, "else_branch"], [6, otherwise], [20, 5]]],
  ];
  const bytes = model({
    name: "if",
    nodes: [ifNode],
    initializers: [floatTensor("w", [2, 2], new Float32Array([1, -1, 1, -1]))],
    inputs: [valueInfo("cond", [], 9), valueInfo("x", [1, 2])],
    outputs: [valueInfo("y", [1, 2])],
  }, 13);
  using imported = await importONNX(bytes);
  assert(imported.executable.as_text().includes("vm.builtin.read_if_cond"));
  const vm = new VirtualMachine(imported.executable);
  using x = tensor([[1, 2]]);
  for (const [c, want] of [[1, [3, 0]], [0, [6, -6]]] as const) {
    using cond = tensor(new Uint8Array([c]), { dtype: "bool", shape: [] });
    using y = await vm.invoke("main", cond, x, imported.params) as NDArray;
    assertEquals([...y.dataSync()], want, `cond ${c}`);
  }
});

/** y = x · scale, with `scale` a graph input: what inputShapes and inputValues specialize. */
function scaled(): Uint8Array {
  return model({
    name: "scaled",
    nodes: [
      node("Shape", ["x"], ["s"]),
      node("Mul", ["x", "scale"], ["y"]),
    ],
    initializers: [],
    inputs: [valueInfo("x", ["batch", "n"]), valueInfo("scale", [])],
    outputs: [valueInfo("y", ["batch", "n"]), valueInfo("s", [2], ElemType.int64)],
  });
}

Deno.test("onnx import: inputShapes fixes a shape at import and main checks it", async () => {
  using m = await importONNX(scaled(), { inputShapes: { x: [2, 3] } });
  assertEquals(m.inputs.map((i) => i.shape), [[2, 3], []]);
  const vm = new VirtualMachine(m.executable);
  using x = tensor([[1, 2, 3], [4, 5, 6]]);
  using scale = tensor([2], { shape: [] });
  const [y, s] = await vm.invoke("main", x, scale) as NDArray[];
  close(y.dataSync() as Float32Array, [2, 4, 6, 8, 10, 12]);
  assertEquals([...s.dataSync() as BigInt64Array], [2n, 3n]); // folded at import
  y.dispose();
  s.dispose();
  using wrong = tensor([[1, 2]]);
  await assertRejects(() => vm.invoke("main", wrong, scale), VMError, 'input "x"');
  await assertRejects(
    () => importONNX(scaled(), { inputShapes: { x: [6] } }),
    UnsupportedONNXError,
    "inputShapes gives rank 1, the file declares 2",
  );
});

Deno.test("onnx import: inputValues binds an input at import; main no longer takes it", async () => {
  using scale = tensor([3], { shape: [] });
  // (x's shape given too: a symbolic Shape as a graph output is not supported yet.)
  using m = await importONNX(scaled(), { inputValues: { scale }, inputShapes: { x: [1, 2] } });
  assertEquals(m.inputs.map((i) => i.name), ["x"]);
  const vm = new VirtualMachine(m.executable);
  using x = tensor([[1, 2]]);
  const [y, s] = await vm.invoke("main", x) as NDArray[];
  close(y.dataSync() as Float32Array, [3, 6]);
  y.dispose();
  s.dispose();
  using wrongType = tensor(new BigInt64Array([3n]), { shape: [] });
  await assertRejects(
    () => importONNX(scaled(), { inputValues: { scale: wrongType } }),
    UnsupportedONNXError,
    "inputValues gives int64, the file declares float32",
  );
});

/**
 * PyTorch's position ids: a 8-long buffer sliced by the token count
 * (`Shape`→`Gather`→`Unsqueeze` as `Slice`'s end) and expanded to
 * `[batch, tokens]` through `Where(Equal(shape, -1), 1, shape)`.
 */
function positionIds(): Uint8Array {
  return model({
    name: "position_ids",
    nodes: [
      node("Shape", ["ids"], ["s"]),
      node("Gather", ["s", "zero"], ["b"], { axis: 0 }),
      node("Gather", ["s", "one"], ["n"], { axis: 0 }),
      node("Unsqueeze", ["b", "axis0"], ["b1"]),
      node("Unsqueeze", ["n", "axis0"], ["n1"]),
      node("Slice", ["table", "axis0", "n1", "axis1", "step"], ["pos"]),
      node("Concat", ["b1", "n1"], ["bn"], { axis: 0 }),
      node("Equal", ["bn", "minus"], ["unset"]),
      node("Where", ["unset", "ones", "bn"], ["target"]),
      node("Expand", ["pos", "target"], ["y"]),
    ],
    initializers: [
      int64Tensor("table", [1, 8], [0, 1, 2, 3, 4, 5, 6, 7]),
      int64Tensor("zero", [], [0]),
      int64Tensor("one", [], [1]),
      int64Tensor("axis0", [1], [0]),
      int64Tensor("axis1", [1], [1]),
      int64Tensor("step", [1], [1]),
      int64Tensor("minus", [2], [-1, -1]),
      int64Tensor("ones", [2], [1, 1]),
    ],
    inputs: [valueInfo("ids", ["batch", "tokens"], ElemType.int64)],
    outputs: [valueInfo("y", ["batch", "tokens"], ElemType.int64)],
  });
}

Deno.test("onnx import: a Slice by a token count and an Expand to [batch, tokens] stay symbolic", async () => {
  using m = await importONNX(positionIds());
  const vm = new VirtualMachine(m.executable);
  for (const [b, n] of [[2, 3], [1, 5]]) {
    using ids = tensor(new BigInt64Array(b * n), { shape: [b, n] });
    using y = await vm.invokeTensor("main", ids, [...m.params]);
    assertEquals(y.shape, [b, n]);
    const row = Array.from({ length: n }, (_, i) => BigInt(i));
    assertEquals([...await y.data() as BigInt64Array], new Array(b).fill(row).flat());
  }
  // Past the buffer, strided_slice would clamp to 8: the import asserts the token count instead.
  using long = tensor(new BigInt64Array(9), { shape: [1, 9] });
  await assertRejects(
    () => vm.invokeTensor("main", long, [...m.params]),
    VMError,
    "dimension 1 is 8, expected 9",
  );
});

/** A `Constant` node whose value is a float32 tensor (AttributeProto: t 5, type TENSOR 4). */
function constantNode(name: string, dims: readonly number[], data: Float32Array): Field[] {
  return [[2, name], [4, "Constant"], [5, [[1, "value"], [5, floatTensor(name, dims, data)], [
    20,
    4,
  ]]]];
}

Deno.test("onnx import: BatchNormalization and per-channel Mul/Add after a Conv or ConvTranspose fold into its weights and bias", async () => {
  // Constant nodes: y = Sigmoid(Relu(BN(conv(x) + b))); u = Relu(BN(s ⊙ (convT(y) + t))), convT of
  // kernel = stride 2 (a detector's upsampling). Not folded: z = BN(conv(u) by w3), w3 an
  // initializer (a parameter a caller may replace), and v = conv(u) + r with r of shape [2W]
  // (it broadcasts along W, not the channels).
  const C = 2, M = 3, H = 3, W = 4;
  const xs = Float32Array.from({ length: C * H * W }, (_, i) => Math.sin(i) * 2);
  const w1 = Float32Array.from({ length: M * C * 3 * 3 }, (_, i) => Math.cos(i) / 2);
  const b1 = Float32Array.from([0.5, -0.25, 0.125]);
  const wt = Float32Array.from({ length: M * M * 2 * 2 }, (_, i) => Math.sin(i + 2) / 2);
  const t = Float32Array.from([0.1, -0.2, 0.3]), s = Float32Array.from([1.5, -0.5, 2]);
  const w3 = Float32Array.from({ length: 4 * M }, (_, i) => Math.cos(i + 1));
  const w5 = Float32Array.from({ length: 2 * M }, (_, i) => Math.sin(i + 3));
  const r = Float32Array.from({ length: 2 * W }, (_, i) => i / 8);
  const bn = (p: string, k: number) => [
    constantNode(`${p}_g`, [k], Float32Array.from({ length: k }, (_, i) => 0.5 + i / 3)),
    constantNode(`${p}_b`, [k], Float32Array.from({ length: k }, (_, i) => i / 4 - 0.3)),
    constantNode(`${p}_m`, [k], Float32Array.from({ length: k }, (_, i) => 0.2 - i / 5)),
    constantNode(`${p}_v`, [k], Float32Array.from({ length: k }, (_, i) => 0.4 + i / 2)),
  ];
  const bnInputs = (p: string) => [`${p}_g`, `${p}_b`, `${p}_m`, `${p}_v`];
  const bytes = model({
    name: "channel_folds",
    nodes: [
      constantNode("w1", [M, C, 3, 3], w1),
      constantNode("b1", [M], b1),
      constantNode("wt", [M, M, 2, 2], wt),
      constantNode("t", [M, 1, 1], t),
      constantNode("s", [1, M, 1, 1], s),
      constantNode("w5", [2, M, 1, 1], w5),
      constantNode("r", [2 * W], r),
      ...bn("n1", M),
      ...bn("n2", M),
      ...bn("n3", 4),
      node("Conv", ["x", "w1", "b1"], ["c1"], { kernel_shape: [3, 3], pads: [1, 1, 1, 1] }),
      node("BatchNormalization", ["c1", ...bnInputs("n1")], ["n1"], { epsilon: new Float(1e-3) }),
      node("Relu", ["n1"], ["y0"]),
      node("Sigmoid", ["y0"], ["y"]),
      node("ConvTranspose", ["y", "wt"], ["ct"], { kernel_shape: [2, 2], strides: [2, 2] }),
      node("Add", ["ct", "t"], ["ctt"]),
      node("Mul", ["s", "ctt"], ["cs"]),
      node("BatchNormalization", ["cs", ...bnInputs("n2")], ["n2"]),
      node("Relu", ["n2"], ["u"]),
      node("Conv", ["u", "w3"], ["c3"], { kernel_shape: [1, 1] }),
      node("BatchNormalization", ["c3", ...bnInputs("n3")], ["z"]),
      node("Conv", ["u", "w5"], ["c5"], { kernel_shape: [1, 1] }),
      node("Add", ["c5", "r"], ["v"]),
    ],
    initializers: [floatTensor("w3", [4, M, 1, 1], w3)],
    inputs: [valueInfo("x", [1, C, H, W])],
    outputs: [
      valueInfo("u", [1, M, 2 * H, 2 * W]),
      valueInfo("z", [1, 4, 2 * H, 2 * W]),
      valueInfo("v", [1, 2, 2 * H, 2 * W]),
    ],
  }, 13);
  // The definition, in float64.
  const norm = (v: number, k: number, eps = 1e-5) =>
    (v - (0.2 - k / 5)) / Math.sqrt(0.4 + k / 2 + eps) * (0.5 + k / 3) + (k / 4 - 0.3);
  const y: number[] = [];
  for (let m = 0; m < M; m++) {
    for (let i = 0; i < H; i++) {
      for (let j = 0; j < W; j++) {
        let acc = b1[m];
        for (let c = 0; c < C; c++) {
          for (let ky = 0; ky < 3; ky++) {
            for (let kx = 0; kx < 3; kx++) {
              const yy = i + ky - 1, xx = j + kx - 1;
              if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
              acc += w1[((m * C + c) * 3 + ky) * 3 + kx] * xs[(c * H + yy) * W + xx];
            }
          }
        }
        y.push(1 / (1 + Math.exp(-Math.max(0, norm(acc, m, 1e-3)))));
      }
    }
  }
  const OH = 2 * H, OW = 2 * W, u: number[] = [];
  for (let m = 0; m < M; m++) {
    for (let oy = 0; oy < OH; oy++) {
      for (let ox = 0; ox < OW; ox++) {
        let acc = 0;
        for (let c = 0; c < M; c++) {
          acc += wt[((c * M + m) * 2 + oy % 2) * 2 + ox % 2] *
            y[(c * H + (oy >> 1)) * W + (ox >> 1)];
        }
        u.push(Math.max(0, norm(s[m] * (acc + t[m]), m)));
      }
    }
  }
  /** z = BN(conv(u) by `w`), v = conv(u) by w5 + r. */
  const zv = (w: Float32Array) => {
    const z: number[] = [], v: number[] = [];
    for (let o = 0; o < 4; o++) {
      for (let p = 0; p < OH * OW; p++) {
        let acc = 0;
        for (let c = 0; c < M; c++) acc += w[o * M + c] * u[c * OH * OW + p];
        z.push(norm(acc, o));
      }
    }
    for (let o = 0; o < 2; o++) {
      for (let p = 0; p < OH * OW; p++) {
        let acc = r[p % OW];
        for (let c = 0; c < M; c++) acc += w5[o * M + c] * u[c * OH * OW + p];
        v.push(acc);
      }
    }
    return { z, v };
  };
  using imported = await importONNX(bytes);
  const text = imported.executable.as_text();
  // Both chains fold into their conv2d: its first two calls; the rest stays as written.
  const calls = [...text.matchAll(/call +vm\.op\.(\w+)/g)].map((m) => m[1]);
  assertEquals(calls.slice(0, 3), ["conv2d", "conv2d", "conv2d"], text);
  // Five: z's BatchNormalization, not folded, is a subtract and a depthwise 1×1 conv2d (ops_norm.ts).
  assertEquals(calls.filter((c) => c === "conv2d").length, 5, text);
  assert(calls.length > 4, text);
  const vm = new VirtualMachine(imported.executable);
  using x = tensor(xs, { shape: [1, C, H, W] });
  for (const scale of [1, 2]) {
    // The parameter w3 replaced (as `load_params` may): z follows it.
    using w3p = tensor(w3.map((v) => v * scale), { shape: [4, M, 1, 1] });
    const outs = await vm.invoke("main", x, [w3p]) as NDArray[];
    const want = zv(w3.map((v) => v * scale));
    close(outs[0].dataSync() as Float32Array, u, 1e-4);
    close(outs[1].dataSync() as Float32Array, want.z, 1e-4);
    close(outs[2].dataSync() as Float32Array, want.v, 1e-4);
    for (const o of outs) o.dispose();
  }
});

Deno.test("onnx import: the activation chains after a Conv fold into its epilogue, where nothing else reads them", async () => {
  // y = Relu(hs(2·conv(x) + 0.5)), hs written as paddle2onnx writes it: v · Clip(v + 3, 0, 6) / 6;
  // then z = HardSigmoid(conv2(y)) whose conv output is also a graph output (so nothing folds).
  const xs = Float32Array.from({ length: 2 * 3 * 5 }, (_, i) => Math.sin(i) * 4);
  const ws = Float32Array.from({ length: 3 * 2 }, (_, i) => Math.cos(i));
  const w2 = Float32Array.from({ length: 3 * 3 }, (_, i) => Math.sin(i + 1));
  const scalar = (name: string, v: number) => floatTensor(name, [], new Float32Array([v]));
  const bytes = model({
    name: "fused",
    nodes: [
      node("Conv", ["x", "w"], ["c"], { kernel_shape: [1, 1] }),
      node("Mul", ["two", "c"], ["s"]),
      node("Add", ["s", "half"], ["v"]),
      node("Add", ["v", "three"], ["v3"]),
      node("Clip", ["v3", "zero", "six"], ["cl"]),
      node("Mul", ["v", "cl"], ["vc"]),
      node("Div", ["vc", "six"], ["hs"]),
      node("Relu", ["hs"], ["y"]),
      node("Conv", ["y", "w2"], ["c2"], { kernel_shape: [1, 1] }),
      node("HardSigmoid", ["c2"], ["z"], { alpha: new Float(0.25), beta: new Float(0.5) }),
    ],
    initializers: [
      floatTensor("w", [3, 2, 1, 1], ws),
      floatTensor("w2", [3, 3, 1, 1], w2),
      scalar("two", 2),
      scalar("half", 0.5),
      scalar("three", 3),
      scalar("zero", 0),
      scalar("six", 6),
    ],
    inputs: [valueInfo("x", [1, 2, 3, 5])],
    outputs: [
      valueInfo("y", [1, 3, 3, 5]),
      valueInfo("c2", [1, 3, 3, 5]),
      valueInfo("z", [1, 3, 3, 5]),
    ],
  }, 13);
  const P = 15, y: number[] = [], c2: number[] = [], z: number[] = [];
  for (let m = 0; m < 3; m++) {
    for (let p = 0; p < P; p++) {
      const v = 2 * (ws[m * 2] * xs[p] + ws[m * 2 + 1] * xs[P + p]) + 0.5;
      y.push(Math.max(0, v * Math.min(Math.max(v + 3, 0), 6) / 6));
    }
  }
  for (let m = 0; m < 3; m++) {
    for (let p = 0; p < P; p++) {
      const c = w2[m * 3] * y[p] + w2[m * 3 + 1] * y[P + p] + w2[m * 3 + 2] * y[2 * P + p];
      c2.push(c);
      z.push(Math.max(0, Math.min(1, 0.25 * c + 0.5)));
    }
  }
  using imported = await importONNX(bytes);
  const text = imported.executable.as_text();
  // The first chain is one conv2d with its epilogue; the second Conv's output is a graph output.
  const calls = [...text.matchAll(/call +vm\.op\.(\w+)/g)].map((m) => m[1]);
  assertEquals(calls, ["conv2d", "conv2d", "multiply", "add", "minimum", "maximum"], text);
  const vm = new VirtualMachine(imported.executable);
  using x = tensor(xs, { shape: [1, 2, 3, 5] });
  const outs = await vm.invoke("main", x, imported.params) as NDArray[];
  close(outs[0].dataSync() as Float32Array, y, 1e-5);
  close(outs[1].dataSync() as Float32Array, c2, 1e-5);
  close(outs[2].dataSync() as Float32Array, z, 1e-5);
  for (const o of outs) o.dispose();
});

Deno.test("onnx import: a squeeze-and-excitation block's x + x·s runs as x·(1 + s), where nothing else reads x·s", async () => {
  // y = x1 + x1·s1 with s1 = HardSigmoid(GlobalAveragePool(x1)), x1 = conv(x) (PP-OCRv4's RSELayer);
  // z = x2 + x2·s2 the same after a second conv, but its product x2·s2 is also a graph output.
  const C = 2, H = 3, W = 5, P = H * W;
  const xs = Float32Array.from({ length: C * P }, (_, i) => Math.sin(i) * 3);
  const w1 = Float32Array.from({ length: C * C }, (_, i) => Math.cos(i) + 0.25);
  const w2 = Float32Array.from({ length: C * C }, (_, i) => Math.sin(i + 1));
  const hs = { alpha: new Float(0.2), beta: new Float(0.5) };
  const bytes = model({
    name: "residual_scale",
    nodes: [
      node("Conv", ["x", "w1"], ["x1"], { kernel_shape: [1, 1] }),
      node("GlobalAveragePool", ["x1"], ["p1"]),
      node("HardSigmoid", ["p1"], ["s1"], hs),
      node("Mul", ["x1", "s1"], ["m1"]),
      node("Add", ["m1", "x1"], ["y"]),
      node("Conv", ["y", "w2"], ["x2"], { kernel_shape: [1, 1] }),
      node("GlobalAveragePool", ["x2"], ["p2"]),
      node("HardSigmoid", ["p2"], ["s2"], hs),
      node("Mul", ["s2", "x2"], ["m2"]),
      node("Add", ["x2", "m2"], ["z"]),
    ],
    initializers: [floatTensor("w1", [C, C, 1, 1], w1), floatTensor("w2", [C, C, 1, 1], w2)],
    inputs: [valueInfo("x", [1, C, H, W])],
    outputs: [valueInfo("z", [1, C, H, W]), valueInfo("m2", [1, C, H, W])],
  }, 13);
  const block = (input: number[], w: Float32Array) => {
    const conv: number[] = [];
    for (let m = 0; m < C; m++) {
      for (let p = 0; p < P; p++) conv.push(w[m * C] * input[p] + w[m * C + 1] * input[P + p]);
    }
    const s = [0, 1].map((m) => {
      const mean = conv.slice(m * P, (m + 1) * P).reduce((a, b) => a + b, 0) / P;
      return Math.max(0, Math.min(1, 0.2 * mean + 0.5));
    });
    const product = conv.map((v, i) => v * s[Math.floor(i / P)]);
    return { out: conv.map((v, i) => v + product[i]), product };
  };
  const y = block([...xs], w1), z = block(y.out, w2);
  using imported = await importONNX(bytes);
  const text = imported.executable.as_text();
  // The first block adds 1 to s1 and multiplies once; the second, whose product is read, as written.
  const calls = [...text.matchAll(/call +vm\.op\.(\w+)/g)].map((m) => m[1]);
  const first = calls.slice(0, calls.indexOf("conv2d", 1));
  const second = calls.slice(calls.indexOf("conv2d", 1));
  assertEquals(first.slice(-2), ["add", "multiply"], text);
  assertEquals(second.slice(-2), ["multiply", "add"], text);
  const vm = new VirtualMachine(imported.executable);
  using x = tensor(xs, { shape: [1, C, H, W] });
  const outs = await vm.invoke("main", x, imported.params) as NDArray[];
  close(outs[0].dataSync() as Float32Array, z.out, 1e-4);
  close(outs[1].dataSync() as Float32Array, z.product, 1e-4);
  for (const o of outs) o.dispose();
});

Deno.test("onnx import: inference BatchNormalization of images is x − mean, then one depthwise 1×1 conv2d", async () => {
  // A mean far from zero and a small variance: folding the mean into the shift would cancel
  // (x·s + (B − mean·s) loses about 1e-4 relative here); subtracting first does not.
  const C = 3, P = 4 * 5;
  const xs = Float32Array.from({ length: 2 * C * P }, (_, i) => 1000 + Math.sin(i));
  const scale = new Float32Array([0.5, -2, 1.25]), bias = new Float32Array([0.1, 3, -7]);
  const mean = new Float32Array([1000, 999.5, 1000.25]),
    variance = new Float32Array([1e-4, 2, 0.5]);
  const eps = 1e-3;
  const bytes = model({
    name: "bn",
    nodes: [
      node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], { epsilon: new Float(eps) }),
    ],
    initializers: [
      floatTensor("s", [C], scale),
      floatTensor("b", [C], bias),
      floatTensor("m", [C], mean),
      floatTensor("v", [C], variance),
    ],
    inputs: [valueInfo("x", [2, C, 4, 5])],
    outputs: [valueInfo("y", [2, C, 4, 5])],
  }, 15);
  using imported = await importONNX(bytes);
  const text = imported.executable.as_text();
  const calls = [...text.matchAll(/call +vm\.op\.(\w+)/g)].map((m) => m[1]);
  assertEquals(calls.filter((c) => c !== "sqrt" && c !== "divide" && c !== "add"), [
    "subtract",
    "conv2d",
  ], text);
  const want: number[] = [];
  for (let i = 0; i < xs.length; i++) {
    const c = Math.floor(i / P) % C;
    want.push((xs[i] - mean[c]) / Math.sqrt(variance[c] + eps) * scale[c] + bias[c]);
  }
  const vm = new VirtualMachine(imported.executable);
  using x = tensor(xs, { shape: [2, C, 4, 5] });
  using y = await vm.invoke("main", x, imported.params) as NDArray;
  const got = y.dataSync() as Float32Array;
  for (let i = 0; i < want.length; i++) {
    const tol = 2e-5 * Math.abs(want[i]) + 1e-5;
    assert(Math.abs(got[i] - want[i]) <= tol, `[${i}] ${got[i]} against ${want[i]}`);
  }
});
