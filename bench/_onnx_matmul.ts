/**
 * The bytes of a one-node ONNX model, `C = MatMul(A, B)` with fixed float32
 * shapes, for the onnxruntime peers of bench/cpu_wasm_bench.ts. Written by
 * hand in protobuf's wire format (onnx.proto3: ModelProto, GraphProto,
 * NodeProto, ValueInfoProto, TypeProto.Tensor, TensorShapeProto) so the
 * benchmark needs no `onnx` package.
 *
 * @module
 */

/** A protobuf field: varint (wire type 0) or length-delimited (wire type 2). */
type Field = [number, number | string | Uint8Array | Field[]];

function varint(out: number[], v: number): void {
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
}

function message(fields: Field[]): Uint8Array {
  const out: number[] = [];
  for (const [num, value] of fields) {
    if (typeof value === "number") {
      varint(out, num << 3);
      varint(out, value);
      continue;
    }
    const bytes = typeof value === "string"
      ? new TextEncoder().encode(value)
      : value instanceof Uint8Array
      ? value
      : message(value);
    varint(out, (num << 3) | 2);
    varint(out, bytes.length);
    out.push(...bytes);
  }
  return new Uint8Array(out);
}

/** ValueInfoProto of a float32 tensor: name 1, type 2 → tensor_type 1 → elem_type 1, shape 2. */
function tensorInfo(name: string, dims: readonly number[]): Field[] {
  const shape: Field[] = dims.map((d) => [1, [[1, d]]]); // dim { dim_value }
  return [[1, name], [2, [[1, [[1, 1], [2, shape]]]]]];
}

/** An ONNX model computing `C[..., M, N] = A[..., M, K] @ B[K, N]` (opset 17). */
export function matmulModel(aDims: readonly number[], bDims: readonly number[]): Uint8Array {
  const cDims = [...aDims.slice(0, -1), bDims[bDims.length - 1]];
  const graph: Field[] = [
    [1, [[1, "A"], [1, "B"], [2, "C"], [4, "MatMul"]]], // node: input, input, output, op_type
    [2, "matmul"],
    [11, tensorInfo("A", aDims)],
    [11, tensorInfo("B", bDims)],
    [12, tensorInfo("C", cDims)],
  ];
  return message([
    [1, 8], // ir_version
    [8, [[1, ""], [2, 17]]], // opset_import
    [7, graph],
  ]);
}
