/**
 * Fuzz family "onnx": bytes that are almost ONNX models. Each case takes a
 * model of the corpus (written by the benchmarks' writer: an MLP with
 * initializers and shape arithmetic, an attention block, masks, reductions)
 * and cuts it short, flips bytes, writes edge varints (ten-byte negatives,
 * 2^53, lengths past the end) at random places, splices in pieces of another
 * model, or nests it deeper. `importONNX` must return an executable (which
 * then loads into a VM and is disposed with its parameters) or reject the
 * bytes with `ONNXImportError` or `UnsupportedONNXError`; any other
 * exception, a slow case or memory left allocated is a bug.
 *
 * @module
 */

import {
  cpu,
  importONNX,
  ONNXImportError,
  UnsupportedONNXError,
  VirtualMachine,
  VMError,
} from "../../mod.ts";
import { defaultAllocator } from "../../devices/allocation_context.ts";
import {
  Float,
  floatTensor,
  int64Tensor,
  message,
  model,
  node,
  valueInfo,
} from "../../bench/_onnx_writer.ts";
import { mutate } from "./loader_family.ts";
import type { Random } from "./random.ts";
import { emptyReport, type FamilyReport, recordBug } from "./report.ts";

/** A case slower than this counts as a hang. */
const HANG_MS = 2000;

/** Models that import, covering the readers' messages and the converters. */
function corpus(): Uint8Array[] {
  const mlp = model({
    name: "mlp",
    nodes: [
      node("Gemm", ["x", "w", "b"], ["h"], { transB: 1, alpha: new Float(1) }),
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
  const attention = model({
    name: "attn",
    nodes: [
      node("MatMul", ["q", "kT"], ["scores"]),
      node("Mul", ["scores", "scale"], ["scaled"]),
      node("Softmax", ["scaled"], ["p"], { axis: -1 }),
      node("MatMul", ["p", "v"], ["o"]),
      node("Transpose", ["o"], ["t"], { perm: [0, 2, 1, 3] }),
      node("LayerNormalization", ["t", "g", "beta"], ["y"], { axis: -1 }),
    ],
    initializers: [
      floatTensor("scale", [], new Float32Array([0.5])),
      floatTensor("g", [4], new Float32Array([1, 1, 1, 1])),
      floatTensor("beta", [4], new Float32Array(4)),
    ],
    inputs: [
      valueInfo("q", [1, 2, "s", 4]),
      valueInfo("kT", [1, 2, 4, "s"]),
      valueInfo("v", [1, 2, "s", 4]),
    ],
    outputs: [valueInfo("y", [1, "s", 2, 4])],
  }, 17);
  const masks = model({
    name: "mask",
    nodes: [
      node("Equal", ["x", "zero"], ["z"]),
      node("Not", ["z"], ["keep"]),
      node("Where", ["keep", "x", "fill"], ["w"]),
      node("ReduceSum", ["w", "axes"], ["y"], { keepdims: 0 }),
      node("Slice", ["x", "st", "en"], ["sl"]),
      node("Unsqueeze", ["sl", "ax"], ["y2"]),
    ],
    initializers: [
      floatTensor("zero", [], new Float32Array([0])),
      floatTensor("fill", [1], new Float32Array([-9])),
      int64Tensor("axes", [1], [-1]),
      int64Tensor("st", [1], [1]),
      int64Tensor("en", [1], [-1]),
      int64Tensor("ax", [1], [0]),
    ],
    inputs: [valueInfo("x", [3, 4])],
    outputs: [valueInfo("y", [3]), valueInfo("y2", [1, 2, 4])],
  }, 13);
  return [mlp, attention, masks];
}

/** Edge varints: ten-byte negatives, 2^53, 2^31, a length far past any end. */
const EDGE_VARINTS = [
  [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
  [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10],
  [0x80, 0x80, 0x80, 0x80, 0x08],
  [0xff, 0xff, 0xff, 0xff, 0x0f],
  [0x00],
];

/** One mutated copy of `bytes`: the loader family's mutations, edge varints, or deeper nesting. */
function mutateModel(rand: Random, bytes: Uint8Array, other: Uint8Array): Uint8Array {
  switch (rand.int(4)) {
    case 0: { // an edge varint written over a few bytes somewhere
      const v = rand.pick(EDGE_VARINTS), at = rand.int(bytes.length);
      const out = new Uint8Array(Math.max(bytes.length, at + v.length));
      out.set(bytes);
      out.set(v, at);
      return out;
    }
    case 1: // the whole model wrapped as the graph of a graph attribute, a few levels deep
      return message([[
        7,
        message([[1, message([[4, "If"], [5, message([[1, "g"], [6, bytes]])]])]]),
      ]]);
    default:
      return mutate(rand, bytes, other);
  }
}

/** Runs `cases` import cases from `rand`'s sequence. */
export async function onnxFamily(rand: Random, cases: number): Promise<FamilyReport> {
  const report = emptyReport("onnx");
  const models = corpus();
  const host = defaultAllocator(cpu());
  for (let i = 0; i < cases; i++) {
    const bytes = mutateModel(rand, rand.pick(models), rand.pick(models));
    report.tried++;
    const liveBefore = host.stats().liveBytes;
    const t0 = performance.now();
    try {
      using imported = await importONNX(bytes, { maxNodes: 1000 });
      report.loaded++;
      try {
        new VirtualMachine(imported.executable).dispose();
      } catch (e) {
        if (!(e instanceof VMError)) {
          recordBug(report, "otherExceptions", `case ${i} (VM): ${String(e).slice(0, 200)}`);
        }
      }
      imported.executable.dispose();
    } catch (e) {
      if (e instanceof ONNXImportError || e instanceof UnsupportedONNXError) report.rejected++;
      else recordBug(report, "otherExceptions", `case ${i}: ${String(e).slice(0, 300)}`);
    }
    const elapsed = performance.now() - t0;
    if (elapsed > HANG_MS) recordBug(report, "hangs", `case ${i}: ${elapsed.toFixed(0)} ms`);
    if (host.stats().liveBytes !== liveBefore) {
      recordBug(report, "leaks", `case ${i}: ${host.stats().liveBytes - liveBefore} bytes left`);
      if (Deno.env.get("ONNX_FUZZ_DUMP")) Deno.writeFileSync(`/tmp/leak_${i}.onnx`, bytes);
    }
  }
  return report;
}
