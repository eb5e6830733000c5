/**
 * The messages of onnx.proto that the importer reads, decoded from bytes by
 * `decodeModel` with the bounded `WireReader`: `ModelProto` → `GraphProto` →
 * `NodeProto`, `AttributeProto`, `TensorProto`, `ValueInfoProto`. Fields the
 * importer does not use are skipped (as protobuf readers do), but each known
 * field's wire type is checked. Tensor payloads stay views of the file
 * (`raw_data`) or typed arrays (`float_data`, …); `onnx_tensor.ts` turns them
 * into tensors.
 *
 * @module
 */

import { WireReader, WireType } from "./wire_reader.ts";

const { Varint: V, Fixed64: F64, Bytes: B, Fixed32: F32 } = WireType;

/** `OperatorSetIdProto`: an operator set the model uses (`""` is the standard `ai.onnx`). */
export interface OpsetId {
  domain: string;
  version: number;
}

/** `TensorShapeProto.Dimension`: a size, a symbol, or unknown (`null`). */
export type ProtoDim = number | string | null;

/** `TypeProto`, as far as the importer needs it. */
export interface ProtoType {
  /** `tensor` (its element type and shape), or the kind it is not: `sequence`, `map`, … */
  kind: "tensor" | "sequence" | "map" | "optional" | "sparse_tensor" | "none";
  /** `TensorProto.DataType` code (0: unknown). */
  elemType: number;
  /** Dimensions, or `null` when the shape is unknown. */
  shape: ProtoDim[] | null;
}

/** `ValueInfoProto`. */
export interface ValueInfo {
  name: string;
  type: ProtoType | null;
}

/** `TensorProto`: dims, data type and the data in whichever field holds it. */
export interface TensorProto {
  name: string;
  dims: number[];
  dataType: number;
  /** Offset of the message in the file, for errors about its data. */
  offset: number;
  rawData: Uint8Array | null;
  floatData: number[];
  int32Data: number[];
  int64Data: bigint[];
  uint64Data: bigint[];
  doubleData: number[];
  stringData: Uint8Array[];
  /** `external_data` key/value pairs (`location`, `offset`, `length`). */
  externalData: Map<string, string>;
  /** `data_location`: 1 EXTERNAL. */
  dataLocation: number;
}

/** `AttributeProto.AttributeType`. */
export const AttributeType = {
  UNDEFINED: 0,
  FLOAT: 1,
  INT: 2,
  STRING: 3,
  TENSOR: 4,
  GRAPH: 5,
  FLOATS: 6,
  INTS: 7,
  STRINGS: 8,
  TENSORS: 9,
  GRAPHS: 10,
  SPARSE_TENSOR: 11,
  SPARSE_TENSORS: 12,
  TYPE_PROTO: 13,
  TYPE_PROTOS: 14,
} as const;

/** `AttributeProto`. */
export interface Attribute {
  name: string;
  type: number;
  f: number;
  i: number;
  s: Uint8Array;
  t: TensorProto | null;
  g: Graph | null;
  floats: number[];
  ints: number[];
  strings: Uint8Array[];
  tensors: TensorProto[];
  graphs: Graph[];
  /** `ref_attr_name`: set inside function bodies only. */
  refAttrName: string;
}

/** `NodeProto`. */
export interface Node {
  name: string;
  opType: string;
  domain: string;
  inputs: string[];
  outputs: string[];
  attributes: Attribute[];
  /** Offset of the node's message in the file. */
  offset: number;
}

/** `GraphProto`. */
export interface Graph {
  name: string;
  nodes: Node[];
  initializers: TensorProto[];
  sparseInitializerCount: number;
  inputs: ValueInfo[];
  outputs: ValueInfo[];
  valueInfo: ValueInfo[];
}

/** `ModelProto`. */
export interface Model {
  irVersion: number;
  producerName: string;
  producerVersion: string;
  opsets: OpsetId[];
  graph: Graph | null;
  /** How many local functions (`functions`) the model defines. */
  functionCount: number;
  /** `metadata_props`: the exporter's key–value strings (a recognizer's character list, a label map). */
  metadata: Record<string, string>;
}

/** Limits on what a file may declare, against hostile input. */
export interface DecodeLimits {
  /** Most nodes in all graphs together (default 1,000,000). */
  maxNodes: number;
}

interface Counts {
  nodes: number;
  limits: DecodeLimits;
}

/** Decodes a `ModelProto` from `bytes`; malformed input throws `ONNXImportError`. */
export function decodeModel(
  bytes: Uint8Array,
  limits: DecodeLimits = { maxNodes: 1_000_000 },
): Model {
  const r = new WireReader(bytes);
  const counts: Counts = { nodes: 0, limits };
  const m: Model = {
    irVersion: 0,
    producerName: "",
    producerVersion: "",
    opsets: [],
    graph: null,
    functionCount: 0,
    metadata: {},
  };
  while (r.more()) {
    const [f, w] = r.tag();
    switch (f) {
      case 1:
        r.expect(f, w, V, "ir_version");
        m.irVersion = r.int64();
        break;
      case 2:
        r.expect(f, w, B, "producer_name");
        m.producerName = r.string();
        break;
      case 3:
        r.expect(f, w, B, "producer_version");
        m.producerVersion = r.string();
        break;
      case 7:
        r.expect(f, w, B, "graph");
        m.graph = readGraph(r.message("ModelProto.graph"), counts);
        break;
      case 8: {
        r.expect(f, w, B, "opset_import");
        const o = r.message(`ModelProto.opset_import[${m.opsets.length}]`);
        const id: OpsetId = { domain: "", version: 0 };
        while (o.more()) {
          const [g, v] = o.tag();
          if (g === 1) {
            o.expect(g, v, B, "domain");
            id.domain = o.string();
          } else if (g === 2) {
            o.expect(g, v, V, "version");
            id.version = o.int64();
          } else o.skip(v);
        }
        m.opsets.push(id);
        break;
      }
      case 14: {
        r.expect(f, w, B, "metadata_props");
        const [key, value] = readStringEntry(
          r.message(`ModelProto.metadata_props[${Object.keys(m.metadata).length}]`),
        );
        // A map: the last entry of a key wins, as protobuf's map fields do.
        Object.defineProperty(m.metadata, key, {
          value,
          enumerable: true,
          writable: true,
          configurable: true,
        });
        break;
      }
      case 25:
        r.expect(f, w, B, "functions");
        r.skip(w);
        m.functionCount++;
        break;
      default:
        r.skip(w);
    }
  }
  return m;
}

/** A `StringStringEntryProto` (`metadata_props`, `external_data`): its key and value, "" when absent. */
function readStringEntry(e: WireReader): [string, string] {
  let key = "", value = "";
  while (e.more()) {
    const [g, v] = e.tag();
    if (g === 1) {
      e.expect(g, v, B, "key");
      key = e.string();
    } else if (g === 2) {
      e.expect(g, v, B, "value");
      value = e.string();
    } else e.skip(v);
  }
  return [key, value];
}

function readGraph(r: WireReader, counts: Counts): Graph {
  const g: Graph = {
    name: "",
    nodes: [],
    initializers: [],
    sparseInitializerCount: 0,
    inputs: [],
    outputs: [],
    valueInfo: [],
  };
  while (r.more()) {
    const [f, w] = r.tag();
    switch (f) {
      case 1:
        r.expect(f, w, B, "node");
        if (++counts.nodes > counts.limits.maxNodes) {
          throw r.fail(`more than ${counts.limits.maxNodes} nodes (the maxNodes option)`);
        }
        g.nodes.push(readNode(r.message(`${r.section}.node[${g.nodes.length}]`), counts));
        break;
      case 2:
        r.expect(f, w, B, "name");
        g.name = r.string();
        break;
      case 5:
        r.expect(f, w, B, "initializer");
        g.initializers.push(
          readTensor(r.message(`${r.section}.initializer[${g.initializers.length}]`)),
        );
        break;
      case 11:
      case 12:
      case 13: {
        r.expect(f, w, B, "value info");
        const list = f === 11 ? g.inputs : f === 12 ? g.outputs : g.valueInfo;
        const field = f === 11 ? "input" : f === 12 ? "output" : "value_info";
        list.push(readValueInfo(r.message(`${r.section}.${field}[${list.length}]`)));
        break;
      }
      case 15:
        r.expect(f, w, B, "sparse_initializer");
        r.skip(w);
        g.sparseInitializerCount++;
        break;
      default:
        r.skip(w);
    }
  }
  return g;
}

function readNode(r: WireReader, counts: Counts): Node {
  const n: Node = {
    name: "",
    opType: "",
    domain: "",
    inputs: [],
    outputs: [],
    attributes: [],
    offset: r.pos,
  };
  while (r.more()) {
    const [f, w] = r.tag();
    switch (f) {
      case 1:
        r.expect(f, w, B, "input");
        n.inputs.push(r.string());
        break;
      case 2:
        r.expect(f, w, B, "output");
        n.outputs.push(r.string());
        break;
      case 3:
        r.expect(f, w, B, "name");
        n.name = r.string();
        break;
      case 4:
        r.expect(f, w, B, "op_type");
        n.opType = r.string();
        break;
      case 5:
        r.expect(f, w, B, "attribute");
        n.attributes.push(
          readAttribute(r.message(`${r.section}.attribute[${n.attributes.length}]`), counts),
        );
        break;
      case 7:
        r.expect(f, w, B, "domain");
        n.domain = r.string();
        break;
      default:
        r.skip(w);
    }
  }
  return n;
}

function readAttribute(r: WireReader, counts: Counts): Attribute {
  const a: Attribute = {
    name: "",
    type: 0,
    f: 0,
    i: 0,
    s: new Uint8Array(0),
    t: null,
    g: null,
    floats: [],
    ints: [],
    strings: [],
    tensors: [],
    graphs: [],
    refAttrName: "",
  };
  while (r.more()) {
    const [f, w] = r.tag();
    switch (f) {
      case 1:
        r.expect(f, w, B, "name");
        a.name = r.string();
        break;
      case 2:
        r.expect(f, w, F32, "f");
        a.f = r.float32();
        break;
      case 3:
        r.expect(f, w, V, "i");
        a.i = r.int64();
        break;
      case 4:
        r.expect(f, w, B, "s");
        a.s = r.bytesField();
        break;
      case 5:
        r.expect(f, w, B, "t");
        a.t = readTensor(r.message(`${r.section}.t`));
        break;
      case 6:
        r.expect(f, w, B, "g");
        a.g = readGraph(r.message(`${r.section}.g`), counts);
        break;
      case 7:
        r.repeated(w, F32, (x) => a.floats.push(x.float32()), "floats");
        break;
      case 8:
        r.repeated(w, V, (x) => a.ints.push(x.int64()), "ints");
        break;
      case 9:
        r.expect(f, w, B, "strings");
        a.strings.push(r.bytesField());
        break;
      case 10:
        r.expect(f, w, B, "tensors");
        a.tensors.push(readTensor(r.message(`${r.section}.tensors[${a.tensors.length}]`)));
        break;
      case 11:
        r.expect(f, w, B, "graphs");
        a.graphs.push(readGraph(r.message(`${r.section}.graphs[${a.graphs.length}]`), counts));
        break;
      case 20:
        r.expect(f, w, V, "type");
        a.type = r.int64();
        break;
      case 21:
        r.expect(f, w, B, "ref_attr_name");
        a.refAttrName = r.string();
        break;
      default:
        r.skip(w);
    }
  }
  return a;
}

/** A `TensorProto` with every field at its default, read at `offset` (for messages). */
export function emptyTensor(offset: number): TensorProto {
  return {
    name: "",
    dims: [],
    dataType: 0,
    offset,
    rawData: null,
    floatData: [],
    int32Data: [],
    int64Data: [],
    uint64Data: [],
    doubleData: [],
    stringData: [],
    externalData: new Map(),
    dataLocation: 0,
  };
}

/** Reads a `TensorProto`. */
export function readTensor(r: WireReader): TensorProto {
  const t = emptyTensor(r.pos);
  while (r.more()) {
    const [f, w] = r.tag();
    switch (f) {
      case 1:
        r.repeated(w, V, (x) => {
          const at = x.pos;
          const d = x.int64();
          if (d < 0 || !Number.isSafeInteger(d)) throw x.fail(`dimension ${d}`, at);
          t.dims.push(d);
        }, "dims");
        break;
      case 2:
        r.expect(f, w, V, "data_type");
        t.dataType = r.int64();
        break;
      case 4:
        r.repeated(w, F32, (x) => t.floatData.push(x.float32()), "float_data");
        break;
      case 5:
        r.repeated(w, V, (x) => t.int32Data.push(x.int64()), "int32_data");
        break;
      case 6:
        r.expect(f, w, B, "string_data");
        t.stringData.push(r.bytesField());
        break;
      case 7:
        r.repeated(w, V, (x) => t.int64Data.push(x.int64Big()), "int64_data");
        break;
      case 8:
        r.expect(f, w, B, "name");
        t.name = r.string();
        break;
      case 9:
        r.expect(f, w, B, "raw_data");
        t.rawData = r.bytesField();
        break;
      case 10:
        r.repeated(w, F64, (x) => t.doubleData.push(x.float64()), "double_data");
        break;
      case 11:
        r.repeated(w, V, (x) => t.uint64Data.push(x.uint64Big()), "uint64_data");
        break;
      case 13: {
        r.expect(f, w, B, "external_data");
        const [key, value] = readStringEntry(r.message(`${r.section}.external_data`));
        t.externalData.set(key, value);
        break;
      }
      case 14:
        r.expect(f, w, V, "data_location");
        t.dataLocation = r.int64();
        break;
      default:
        r.skip(w);
    }
  }
  return t;
}

function readValueInfo(r: WireReader): ValueInfo {
  const v: ValueInfo = { name: "", type: null };
  while (r.more()) {
    const [f, w] = r.tag();
    if (f === 1) {
      r.expect(f, w, B, "name");
      v.name = r.string();
    } else if (f === 2) {
      r.expect(f, w, B, "type");
      v.type = readType(r.message(`${r.section}.type`));
    } else r.skip(w);
  }
  return v;
}

const TYPE_KINDS: Record<number, ProtoType["kind"]> = {
  4: "sequence",
  5: "map",
  8: "sparse_tensor",
  9: "optional",
};

function readType(r: WireReader): ProtoType {
  const t: ProtoType = { kind: "none", elemType: 0, shape: null };
  while (r.more()) {
    const [f, w] = r.tag();
    if (f === 1) {
      r.expect(f, w, B, "tensor_type");
      t.kind = "tensor";
      const tt = r.message(`${r.section}.tensor_type`);
      while (tt.more()) {
        const [g, v] = tt.tag();
        if (g === 1) {
          tt.expect(g, v, V, "elem_type");
          t.elemType = tt.int64();
        } else if (g === 2) {
          tt.expect(g, v, B, "shape");
          t.shape = readShape(tt.message(`${tt.section}.shape`));
        } else tt.skip(v);
      }
    } else if (f in TYPE_KINDS) {
      r.expect(f, w, B, TYPE_KINDS[f]);
      t.kind = TYPE_KINDS[f];
      // Walk the element types too, so a hostile nesting is caught by the depth limit.
      const inner = r.message(`${r.section}.${TYPE_KINDS[f]}_type`);
      while (inner.more()) {
        const [g, v] = inner.tag();
        // sequence/optional: elem_type 1; map: value_type 2 (TypeProto); sparse: none nested.
        const nested = t.kind === "map" ? g === 2 : t.kind !== "sparse_tensor" && g === 1;
        if (nested) {
          inner.expect(g, v, B, "elem_type");
          readType(inner.message(`${inner.section}.elem_type`));
        } else inner.skip(v);
      }
    } else r.skip(w);
  }
  return t;
}

function readShape(r: WireReader): ProtoDim[] {
  const dims: ProtoDim[] = [];
  while (r.more()) {
    const [f, w] = r.tag();
    if (f !== 1) {
      r.skip(w);
      continue;
    }
    r.expect(f, w, B, "dim");
    const d = r.message(`${r.section}.dim[${dims.length}]`);
    let dim: ProtoDim = null;
    while (d.more()) {
      const [g, v] = d.tag();
      if (g === 1) {
        d.expect(g, v, V, "dim_value");
        dim = d.int64();
      } else if (g === 2) {
        d.expect(g, v, B, "dim_param");
        dim = d.string();
      } else d.skip(v);
    }
    dims.push(dim);
  }
  return dims;
}
