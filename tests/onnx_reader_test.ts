/**
 * The ONNX importer's protobuf reader (onnx/wire_reader.ts, onnx/onnx_proto.ts,
 * onnx/onnx_tensor.ts): a model written by the benchmarks' independent writer
 * (bench/_onnx_writer.ts) decodes to the same graph, and every kind of
 * hostile input (truncation at every byte, wrong wire types, over-long
 * varints, lengths past the end, deep nesting, huge dims, data that does not
 * fill its dims) ends in an `ONNXImportError` with a byte offset.
 */

import { assert, assertEquals } from "@std/assert";
import {
  ElemType,
  Float,
  floatTensor,
  int64Tensor,
  message,
  model,
  node,
  valueInfo,
} from "../bench/_onnx_writer.ts";
import { ONNXImportError } from "../onnx/onnx_errors.ts";
import { decodeModel } from "../onnx/onnx_proto.ts";
import { decodeTensor, tensorFromProto } from "../onnx/onnx_tensor.ts";
import { MAX_DEPTH } from "../onnx/wire_reader.ts";

/** A small model: y = Gemm(x, w) with an attribute of each kind the writer has. */
function sample(): Uint8Array {
  return model({
    name: "g",
    nodes: [
      node("Gemm", ["x", "w"], ["h"], { transB: 1, alpha: new Float(0.5) }),
      node("Transpose", ["h"], ["y"], { perm: [1, 0] }),
    ],
    initializers: [
      floatTensor("w", [3, 2], new Float32Array([1, 2, 3, 4, 5, 6])),
      int64Tensor("k", [2], [-1, 2 ** 40]),
    ],
    inputs: [valueInfo("x", ["batch", 2])],
    outputs: [valueInfo("y", [3, "batch"])],
  }, 13);
}

Deno.test("onnx reader: decodes what an independent writer wrote", () => {
  const m = decodeModel(sample());
  assertEquals(m.irVersion, 8);
  assertEquals(m.opsets, [{ domain: "", version: 13 }]);
  const g = m.graph!;
  assertEquals(g.name, "g");
  assertEquals(g.nodes.map((n) => [n.opType, n.inputs, n.outputs]), [
    ["Gemm", ["x", "w"], ["h"]],
    ["Transpose", ["h"], ["y"]],
  ]);
  const [transB, alpha] = g.nodes[0].attributes;
  assertEquals([transB.name, transB.i, transB.type], ["transB", 1, 2]);
  assertEquals([alpha.name, alpha.f, alpha.type], ["alpha", 0.5, 1]);
  assertEquals(g.nodes[1].attributes[0].ints, [1, 0]);
  assertEquals(g.inputs[0].type, { kind: "tensor", elemType: ElemType.float, shape: ["batch", 2] });
  assertEquals(g.outputs[0].type?.shape, [3, "batch"]);
  using w = tensorFromProto(g.initializers[0], "w");
  assertEquals([w.dtype, w.shape, [...w.dataSync()]], ["float32", [3, 2], [1, 2, 3, 4, 5, 6]]);
  using k = tensorFromProto(g.initializers[1], "k");
  assertEquals([...k.dataSync()], [-1n, 2n ** 40n]);
});

Deno.test("onnx reader: packed and unpacked repeated fields read alike", () => {
  // TensorProto dims 1 (packed: 0a 02 02 03; unpacked: 08 02 08 03), data_type 2 = 6 (int32),
  // int32_data 5 packed in two runs: -1 (ten bytes), then 7.
  const int32Data = [0x2a, 10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
  const tail = [0x10, 6, ...int32Data];
  for (const dims of [[0x0a, 2, 1, 2], [0x08, 1, 0x08, 2]]) {
    using t = decodeTensor(new Uint8Array([...dims, ...tail, 0x2a, 1, 7]));
    assertEquals([t.shape, [...t.dataSync()]], [[1, 2], [-1, 7]]);
  }
});

/** The `ONNXImportError` `f` throws (failing the test if it throws something else or nothing). */
function importError(f: () => unknown): ONNXImportError {
  let caught: unknown;
  try {
    f();
  } catch (e) {
    caught = e;
  }
  if (!(caught instanceof ONNXImportError)) {
    throw new Error(`expected ONNXImportError, got ${caught}`);
  }
  assert(/byte offset \d+/.test(caught.message), caught.message);
  return caught;
}

Deno.test("onnx reader: a file cut at any byte is an error, never a crash", () => {
  const bytes = sample();
  let errors = 0;
  for (let n = 1; n < bytes.length; n++) {
    // A cut that falls between two top-level fields is a valid (smaller) model.
    try {
      decodeModel(bytes.subarray(0, n));
    } catch (e) {
      if (!(e instanceof ONNXImportError)) throw e;
      assert(e.offset >= 0 && e.offset <= n, `offset ${e.offset} of ${n}`);
      errors++;
    }
  }
  assert(errors > bytes.length / 2, `${errors} of ${bytes.length} cuts failed`);
});

Deno.test("onnx reader: each malformation names its problem and offset", () => {
  const cases: [string, number[], RegExp, number][] = [
    ["varint past 10 bytes", [0x08, ...new Array(11).fill(0x80), 0], /longer than 10 bytes/, 1],
    ["varint past 64 bits", [0x08, ...new Array(9).fill(0xff), 0x02], /overflows 64 bits/, 1],
    ["length past the end", [0x3a, 0x7f, 0x0a], /length 127 runs past the end/, 1],
    ["wrong wire type", [0x3d, 0, 0, 0, 0], /graph \(7\) has wire type 5, expected 2/, 1],
    ["group wire type", [0x0b], /wire type 3 of field 1/, 0],
    ["field number 0", [0x02, 0x00], /field number 0/, 0],
    ["bad UTF-8", [0x12, 0x02, 0xc3, 0x28], /not valid UTF-8/, 1],
  ];
  for (const [what, bytes, message, offset] of cases) {
    const e = importError(() => decodeModel(new Uint8Array(bytes)));
    assert(message.test(e.message), `${what}: ${e.message}`);
    assertEquals(e.offset, offset, what);
  }
});

Deno.test("onnx reader: nesting past the limit is an error, not a stack overflow", () => {
  // A graph whose node has a graph attribute whose node has one, … far past MAX_DEPTH.
  let graph: Uint8Array = message([[2, "leaf"]]);
  for (let i = 0; i < 200; i++) {
    const attr = message([[1, "body"], [6, graph], [20, 5]]);
    graph = message([[1, message([[4, "If"], [5, attr]])]]);
  }
  const e = importError(() => decodeModel(message([[7, graph]])));
  assert(e.message.includes(`nested more than ${MAX_DEPTH} deep`), e.message);
  // Sequence types nest too.
  let type: Uint8Array = message([[1, message([[1, 1]])]]);
  for (let i = 0; i < 200; i++) type = message([[4, message([[1, type]])]]);
  const input = message([[1, "x"], [2, type]]);
  importError(() => decodeModel(message([[7, message([[11, input]])]])));
});

Deno.test("onnx reader: too many nodes is an error before they are built", () => {
  const n = message([[4, "Relu"]]);
  const graph = message(Array.from({ length: 50 }, (): [number, Uint8Array] => [1, n]));
  const e = importError(() => decodeModel(message([[7, graph]]), { maxNodes: 10 }));
  assert(e.message.includes("more than 10 nodes"), e.message);
});

Deno.test("onnx reader: tensors whose data does not fill their dims are refused", () => {
  // dims [2, 3], float, raw_data of 4 bytes.
  const short = message([[1, 2], [1, 3], [2, 1], [8, "t"], [9, new Uint8Array(4)]]);
  let e = importError(() => decodeTensor(short));
  assert(e.message.includes("4 bytes of raw_data"), e.message);
  // dims past 2^31 elements: refused before any allocation.
  const huge = message([[1, 2 ** 20], [1, 2 ** 20], [2, 1], [8, "h"], [9, new Uint8Array(4)]]);
  e = importError(() => decodeTensor(huge));
  assert(e.message.includes("more than 2^31 elements"), e.message);
  // A negative dimension.
  e = importError(() => decodeTensor(message([[1, -3], [2, 1]])));
  assert(e.message.includes("dimension -3"), e.message);
  // A data type relaxvm lacks.
  e = importError(() => decodeTensor(message([[1, 1], [2, 8], [6, "abc"]])));
  assert(e.message.includes("STRING"), e.message);
  // float_data with too few values.
  e = importError(() => decodeTensor(message([[1, 3], [2, 1], [4, new Float(1)]])));
  assert(e.message.includes("1 values in float_data"), e.message);
});
