/**
 * Rewrites a squeeze-and-excitation block's residual scaling `x + x · s`
 * (`Add(x, Mul(x, s))`, PP-OCRv4's detector's `RSELayer`: `s` a channel's
 * `HardSigmoid` of the pooled `x`, `[N, C, 1, 1]`) as `x · (1 + s)`: the
 * `+ 1` on the small `s`, then one pass over `x` where there were two (the
 * product, then the sum, each over the whole activation: eight blocks of
 * up to 96 × 48 × 160 at a 640 × 192 input). The two differ in rounding
 * only (a float32 sum's last bit).
 *
 * Rewritten only where the product is read by that sum alone (not a graph
 * output, nor read in a subgraph) and `x` is a float32 `Conv` or
 * `ConvTranspose` output (its weight a float32 constant), so that `s` is
 * float32 too (`Mul` takes one type) and the constant 1 is of that type.
 *
 * @module
 */

import {
  AttributeType,
  emptyTensor,
  type Graph,
  type Node,
  type TensorProto,
} from "./onnx_proto.ts";
import { readInSubgraphs } from "./graph_index.ts";

const FLOAT = 1;

/**
 * `nodes` (`graph`'s, after `fuseConvEpilogues`) with each `Add(x, Mul(x,
 * s))` that qualifies replaced by a `Constant` 1, `Add(s, 1)` (under the
 * product's name) and `Mul(x, ·)` (under the sum's), in the same order: a
 * topological order stays one. The graph itself is unchanged.
 */
export function foldResidualScales(graph: Graph, nodes: readonly Node[]): Node[] {
  const float32 = new Set<string>();
  for (const t of graph.initializers) if (t.dataType === FLOAT) float32.add(t.name);
  const producer = new Map<string, Node>();
  const readers = new Map<string, number>();
  const names = new Set<string>(graph.inputs.map((v) => v.name));
  for (const t of graph.initializers) names.add(t.name);
  for (const n of nodes) {
    if (n.opType === "Constant" && n.domain === "" && n.outputs.length === 1) {
      const t = n.attributes.find((a) => a.name === "value")?.t;
      if (t?.dataType === FLOAT) float32.add(n.outputs[0]);
    }
    for (const o of n.outputs) {
      producer.set(o, n);
      names.add(o);
    }
    // A node reading a value twice counts twice: `Mul(x, x)` is no product of x by another.
    for (const i of n.inputs) if (i !== "") readers.set(i, (readers.get(i) ?? 0) + 1);
  }
  const pinned = new Set(graph.outputs.map((o) => o.name));
  readInSubgraphs(graph, pinned);
  /** Whether `name` is a float32 convolution's output. */
  const convOutput = (name: string) => {
    const p = producer.get(name);
    return p !== undefined && p.domain === "" &&
      (p.opType === "Conv" || p.opType === "ConvTranspose") && float32.has(p.inputs[1] ?? "");
  };

  const rewritten = new Map<Node, Node[]>();
  for (const add of nodes) {
    if (add.opType !== "Add" || add.domain !== "" || add.inputs.length !== 2) continue;
    if (add.outputs.length !== 1) continue;
    for (const side of [0, 1]) {
      const x = add.inputs[side], product = add.inputs[1 - side];
      const mul = producer.get(product);
      if (mul === undefined || mul.opType !== "Mul" || mul.domain !== "" || rewritten.has(mul)) {
        continue;
      }
      if (mul.inputs.length !== 2 || mul.inputs[0] === mul.inputs[1]) continue;
      if (!mul.inputs.includes(x) || pinned.has(product) || readers.get(product) !== 1) continue;
      if (!convOutput(x)) continue;
      const s = mul.inputs[mul.inputs[0] === x ? 1 : 0];
      let one = `${product}__one_plus`;
      while (names.has(one)) one += "_";
      names.add(one);
      const constant: Node = {
        name: `${mul.name}/one`,
        opType: "Constant",
        domain: "",
        inputs: [],
        outputs: [one],
        attributes: [valueAttribute(oneTensor(one, mul.offset))],
        offset: mul.offset,
      };
      rewritten.set(mul, [constant, { ...mul, opType: "Add", inputs: [s, one] }]);
      rewritten.set(add, [{ ...add, opType: "Mul", inputs: [x, product] }]);
      break;
    }
  }
  return rewritten.size === 0 ? [...nodes] : nodes.flatMap((n) => rewritten.get(n) ?? [n]);
}

/** A float32 scalar 1. */
function oneTensor(name: string, offset: number): TensorProto {
  return { ...emptyTensor(offset), name, dataType: FLOAT, floatData: [1] };
}

/** A `Constant` node's `value` attribute holding `t`. */
function valueAttribute(t: TensorProto) {
  return {
    name: "value",
    type: AttributeType.TENSOR,
    f: 0,
    i: 0,
    s: new Uint8Array(0),
    t,
    g: null,
    floats: [],
    ints: [],
    strings: [],
    tensors: [],
    graphs: [],
    refAttrName: "",
  };
}
