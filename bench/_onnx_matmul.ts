/**
 * The bytes of a one-node ONNX model, `C = MatMul(A, B)` with fixed float32
 * shapes, for the onnxruntime peers of bench/cpu_wasm_bench.ts (written with
 * bench/_onnx_writer.ts, so the benchmark needs no `onnx` package).
 *
 * @module
 */

import { model, node, valueInfo } from "./_onnx_writer.ts";

/** An ONNX model computing `C[..., M, N] = A[..., M, K] @ B[K, N]` (opset 17). */
export function matmulModel(aDims: readonly number[], bDims: readonly number[]): Uint8Array {
  const cDims = [...aDims.slice(0, -1), bDims[bDims.length - 1]];
  return model({
    name: "matmul",
    nodes: [node("MatMul", ["A", "B"], ["C"])],
    initializers: [],
    inputs: [valueInfo("A", aDims), valueInfo("B", bDims)],
    outputs: [valueInfo("C", cDims)],
  });
}
