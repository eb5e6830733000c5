/**
 * What the import-time rewrites (`conv_fusion.ts`, `gelu_fusion.ts`,
 * `residual_scale.ts`) look up about a graph before they rewrite it: its
 * constant tensors, who reads each value, and which values must keep their
 * names.
 *
 * @module
 */

import type { Graph, Node, TensorProto } from "./onnx_proto.ts";

/** A graph's lookups, built once per rewrite. */
export interface GraphIndex {
  /** Initializers and `Constant` nodes' tensors, by value name. */
  readonly constants: Map<string, TensorProto>;
  /** The nodes reading each value, each once. */
  readonly consumers: Map<string, Node[]>;
  /** Graph outputs and every value a subgraph reads: a rewrite must not drop or rename them. */
  readonly pinned: Set<string>;
}

/** The lookups of `graph`, over `nodes` (its own nodes unless given, e.g. an earlier rewrite's). */
export function indexGraph(graph: Graph, nodes: readonly Node[] = graph.nodes): GraphIndex {
  const constants = new Map<string, TensorProto>();
  for (const t of graph.initializers) constants.set(t.name, t);
  const consumers = new Map<string, Node[]>();
  for (const n of nodes) {
    if (n.opType === "Constant" && n.domain === "" && n.outputs.length === 1) {
      const t = n.attributes.find((a) => a.name === "value")?.t;
      if (t !== null && t !== undefined) constants.set(n.outputs[0], t);
    }
    for (const i of n.inputs) {
      if (i === "") continue;
      const list = consumers.get(i);
      if (list === undefined) consumers.set(i, [n]);
      else if (!list.includes(n)) list.push(n);
    }
  }
  const pinned = new Set(graph.outputs.map((o) => o.name));
  readInSubgraphs(graph, pinned);
  return { constants, consumers, pinned };
}

/** Every value name read inside `g`'s nodes' subgraphs, at any depth. */
export function readInSubgraphs(g: Graph, into: Set<string>): void {
  for (const n of g.nodes) {
    for (const a of n.attributes) {
      for (const sub of a.g === null ? a.graphs : [a.g, ...a.graphs]) {
        for (const m of sub.nodes) for (const i of m.inputs) into.add(i);
        readInSubgraphs(sub, into);
      }
    }
  }
}
