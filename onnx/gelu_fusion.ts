/**
 * Folds the exact GELU that exporters spell out, `x · ½ · (1 + Erf(x / √2))`,
 * into one `Gelu` node (ONNX's own, `approximate="none"`), which the
 * importer computes as `vm.op.gelu`: one pass on the WebAssembly kernel
 * instead of five operators, four of them elementwise passes in TypeScript
 * (`Erf` alone was a tenth of all-MiniLM-L6-v2's CPU time at batch 1).
 * Both orders torch.onnx writes are folded:
 *
 * - `Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5)` (`nn.GELU`, the MiniLM export);
 * - `Mul(Mul(x, 0.5), Add(Erf(Div(x, √2)), 1))` (Hugging Face's `gelu`);
 *
 * `Div` by √2 may be `Mul` by 1/√2, and each binary node's operands may
 * come in either order. A chain is folded only where nothing else reads its
 * intermediate values (none is a graph output, read twice, or read inside a
 * subgraph); `x` itself may have other readers.
 *
 * @module
 */

import type { Graph, Node, TensorProto } from "./onnx_proto.ts";
import { indexGraph } from "./graph_index.ts";

const FLOAT = 1, FLOAT_BYTES = 4;

/** The value of a one-element float32 tensor, or undefined. */
function scalarOf(t: TensorProto | undefined): number | undefined {
  if (t === undefined || t.dataType !== FLOAT || t.dataLocation === 1) return undefined;
  if (t.dims.reduce((a, b) => a * b, 1) !== 1) return undefined;
  if (t.rawData !== null && t.rawData.length === FLOAT_BYTES) {
    return new DataView(t.rawData.buffer, t.rawData.byteOffset, FLOAT_BYTES).getFloat32(0, true);
  }
  return t.floatData.length === 1 ? t.floatData[0] : undefined;
}

/** Whether float32 `c` is `want` rounded to float32. */
const isF32 = (c: number | undefined, want: number) => c === Math.fround(want);

/**
 * `graph`'s nodes with each spelled-out exact GELU replaced by one `Gelu`
 * node (in the place of the chain's last node, named as it is); the graph
 * itself is unchanged.
 */
export function fuseGelu(graph: Graph): Node[] {
  const { constants, consumers, pinned } = indexGraph(graph);
  /** The one node reading `name`, of `op` in the standard domain, where nothing else reads it. */
  const only = (name: string, op: string): Node | undefined => {
    const list = consumers.get(name);
    if (pinned.has(name) || list === undefined || list.length !== 1) return undefined;
    const n = list[0];
    return n.opType === op && n.domain === "" && n.outputs.length === 1 ? n : undefined;
  };
  /** For a binary node reading `name`: its other operand's name (undefined if both are `name`). */
  const other = (n: Node, name: string): string | undefined =>
    n.inputs.length !== 2 || n.inputs[0] === n.inputs[1]
      ? undefined
      : n.inputs[0] === name
      ? n.inputs[1]
      : n.inputs[1] === name
      ? n.inputs[0]
      : undefined;
  const scalar = (name: string | undefined) =>
    name === undefined ? undefined : scalarOf(constants.get(name));

  const dropped = new Set<Node>();
  const replaced = new Map<Node, Node>();
  for (const scale of graph.nodes) {
    // x / √2 or x · (1/√2): its x is the operand that is not the constant.
    if (scale.domain !== "" || scale.inputs.length !== 2 || scale.outputs.length !== 1) continue;
    // A Mul's constant may come first.
    const swap = scale.opType === "Mul" && scalar(scale.inputs[0]) !== undefined;
    const [x, c] = swap ? [scale.inputs[1], scale.inputs[0]] : scale.inputs;
    const byDiv = scale.opType === "Div" && isF32(scalar(c), Math.SQRT2);
    const byMul = scale.opType === "Mul" && isF32(scalar(c), Math.SQRT1_2);
    if ((!byDiv && !byMul) || dropped.has(scale)) continue;
    const erf = only(scale.outputs[0], "Erf");
    const add = erf && only(erf.outputs[0], "Add");
    if (add === undefined || scalar(other(add, erf!.outputs[0])) !== 1) continue;
    const mul = only(add.outputs[0], "Mul");
    const m = mul && other(mul, add.outputs[0]);
    if (mul === undefined || m === undefined) continue;
    let chain: Node[], last: Node;
    if (m === x) {
      // (x · (1 + erf)) · 0.5
      const half = only(mul.outputs[0], "Mul");
      if (half === undefined || scalar(other(half, mul.outputs[0])) !== 0.5) continue;
      chain = [scale, erf!, add, mul, half];
      last = half;
    } else {
      // (x · 0.5) · (1 + erf), the x · 0.5 read by this Mul alone
      const pre = (consumers.get(x) ?? []).find((n) =>
        n.opType === "Mul" && n.domain === "" && n.outputs[0] === m && n.outputs.length === 1
      );
      if (pre === undefined || only(m, "Mul") !== mul || scalar(other(pre, x)) !== 0.5) continue;
      chain = [scale, erf!, add, pre, mul];
      last = mul;
    }
    if (chain.some((n) => dropped.has(n))) continue;
    for (const n of chain) dropped.add(n);
    replaced.set(last, { ...last, opType: "Gelu", inputs: [x], attributes: [] });
  }
  return graph.nodes.filter((n) => !dropped.has(n) || replaced.has(n)).map((n) =>
    replaced.get(n) ?? n
  );
}
