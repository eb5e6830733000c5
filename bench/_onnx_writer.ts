/**
 * A small ONNX writer for the benchmarks' onnxruntime peers: protobuf's
 * wire format by hand (onnx.proto3: ModelProto, GraphProto, NodeProto,
 * AttributeProto, TensorProto, ValueInfoProto), so no `onnx` package is
 * needed. Initializers carry their values as `raw_data` (little-endian, as
 * ONNX requires and every machine here is).
 *
 * Messages are built as lists of byte chunks and joined once: a model holds
 * tens of MB of weights, and `array.push(...bytes)` on a tensor that size
 * overflows the call stack.
 *
 * @module
 */

/** A protobuf field: varint (wire type 0), fixed32 float (5) or length-delimited (2). */
export type Field = [number, number | bigint | Float | string | Uint8Array | Field[]];

/** A float field value, written as fixed32 (wire type 5). */
export class Float {
  /** The value. */
  readonly value: number;
  constructor(value: number) {
    this.value = value;
  }
}

function varint(out: number[], v: number | bigint): void {
  // Negative int64 values are ten bytes of two's complement.
  let b = BigInt.asUintN(64, BigInt(v));
  while (b >= 0x80n) {
    out.push(Number(b & 0x7fn) | 0x80);
    b >>= 7n;
  }
  out.push(Number(b));
}

/** The bytes of a message with `fields`, in order. */
export function message(fields: Field[]): Uint8Array {
  const chunks: Uint8Array[] = [];
  let head: number[] = [];
  const flush = () => {
    if (head.length > 0) chunks.push(new Uint8Array(head));
    head = [];
  };
  for (const [num, value] of fields) {
    if (typeof value === "number" || typeof value === "bigint") {
      varint(head, num << 3);
      varint(head, value);
      continue;
    }
    if (value instanceof Float) {
      varint(head, (num << 3) | 5);
      head.push(...new Uint8Array(new Float32Array([value.value]).buffer));
      continue;
    }
    const bytes = typeof value === "string"
      ? new TextEncoder().encode(value)
      : value instanceof Uint8Array
      ? value
      : message(value);
    varint(head, (num << 3) | 2);
    varint(head, bytes.length);
    flush();
    chunks.push(bytes);
  }
  flush();
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** ONNX TensorProto.DataType codes used here. */
export const ElemType = { float: 1, int64: 7 } as const;

/** A dimension: a fixed size, or a name for a size given at run time. */
export type Dim = number | string;

/** ValueInfoProto of a tensor: name 1, type 2 → tensor_type 1 → elem_type 1, shape 2. */
export function valueInfo(
  name: string,
  dims: readonly Dim[],
  elemType: number = ElemType.float,
): Field[] {
  // TensorShapeProto.Dimension: dim_value 1 or dim_param 2.
  const shape: Field[] = dims.map((d) => [1, [typeof d === "number" ? [1, d] : [2, d]]]);
  return [[1, name], [2, [[1, [[1, elemType], [2, shape]]]]]];
}

/** A float32 initializer (TensorProto: dims 1, data_type 2, name 8, raw_data 9). */
export function floatTensor(name: string, dims: readonly number[], data: Float32Array): Field[] {
  const n = dims.reduce((a, b) => a * b, 1);
  if (n !== data.length) throw new RangeError(`${name}: ${data.length} values for [${dims}]`);
  const raw = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return [...dims.map((d): Field => [1, d]), [2, ElemType.float], [8, name], [9, raw]];
}

/** An int64 initializer. */
export function int64Tensor(
  name: string,
  dims: readonly number[],
  data: readonly number[],
): Field[] {
  const raw = new Uint8Array(new BigInt64Array(data.map(BigInt)).buffer);
  return [...dims.map((d): Field => [1, d]), [2, ElemType.int64], [8, name], [9, raw]];
}

/** An attribute value: an int, a float (`Float`) or a list of ints. */
export type Attribute = number | Float | readonly number[];

/** NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7. */
export function node(
  opType: string,
  inputs: readonly string[],
  outputs: readonly string[],
  attributes: Record<string, Attribute> = {},
): Field[] {
  const attrs: Field[] = Object.entries(attributes).map(([name, v]): Field => {
    // AttributeProto: name 1, f 2, i 3, ints 8, type 20 (FLOAT 1, INT 2, INTS 7).
    if (v instanceof Float) return [5, [[1, name], [2, v], [20, 1]]];
    if (typeof v === "number") return [5, [[1, name], [3, v], [20, 2]]];
    return [5, [[1, name], ...v.map((i): Field => [8, i]), [20, 7]]];
  });
  return [
    ...inputs.map((i): Field => [1, i]),
    ...outputs.map((o): Field => [2, o]),
    [4, opType],
    ...attrs,
  ];
}

/** The parts of a graph. */
export interface Graph {
  name: string;
  nodes: Field[][];
  initializers: Field[][];
  inputs: Field[][];
  outputs: Field[][];
}

/** A ModelProto (IR version 8) of `graph` in the default domain at `opset`. */
export function model(graph: Graph, opset = 17): Uint8Array {
  const g: Field[] = [
    ...graph.nodes.map((n): Field => [1, n]),
    [2, graph.name],
    ...graph.initializers.map((t): Field => [5, t]),
    ...graph.inputs.map((i): Field => [11, i]),
    ...graph.outputs.map((o): Field => [12, o]),
  ];
  return message([
    [1, 8], // ir_version
    [2, "relaxvm bench"], // producer_name
    [8, [[1, ""], [2, opset]]], // opset_import
    [7, g],
  ]);
}
