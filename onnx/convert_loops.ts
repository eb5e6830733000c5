/**
 * ONNX's `Loop` and `Scan`, whose bodies are graphs converted in a scope of
 * their own (as `If`'s branches are, import_onnx.ts):
 *
 * - `Loop` runs through the VM's control flow: the carried values, the
 *   condition and the iteration count live in registers the body's
 *   outputs are copied back into, a label at the top, `If` on
 *   `count < M and cond` to leave, `Goto` back; each scan output is
 *   stacked by `vm.op.stack_append`. So the trip count and condition may be
 *   known only at run time. A carried value must keep its dtype and rank;
 *   sizes the body leaves unknown are checked against it when it runs.
 * - `Scan` is unrolled at import: its sequence length is the scan inputs'
 *   known size, and each step is the body converted on that step's slices.
 *   Opset 8's batch axis (without `sequence_lens`) is unrolled too.
 *
 * @module
 */

import { tensor } from "../devices/tensor.ts";
import type { NDArray } from "../devices/ndarray.ts";
import type { Emitter } from "./emitter.ts";
import { type Dim, Unsupported, type Value } from "./graph_values.ts";
import { NodeContext } from "./node_context.ts";
import type { UnsupportedNode } from "./onnx_errors.ts";
import type { Graph, Node } from "./onnx_proto.ts";
import { reshapeTo } from "./ops_shape.ts";

/** Converts one node into `values` (import_onnx.ts's `convertNode`). */
export type ConvertNode = (
  n: Node,
  opset: number,
  em: Emitter,
  values: Map<string, Value | null>,
  made: NDArray[],
  problems: UnsupportedNode[],
) => void;

/** What a loop converter needs of the graph converter. */
export interface LoopContext {
  readonly opset: number;
  readonly em: Emitter;
  readonly values: Map<string, Value | null>;
  readonly made: NDArray[];
  readonly problems: UnsupportedNode[];
  readonly convertNode: ConvertNode;
}

/** The graph attribute `name` of `n`. */
function body(n: Node, name = "body"): Graph {
  const g = n.attributes.find((a) => a.name === name)?.g;
  if (g === null || g === undefined) throw new Unsupported(`no ${name}`);
  if (g.initializers.length > 0) throw new Unsupported(`a ${name} with initializers`);
  return g;
}

/** Runs `g`'s nodes in a scope over `lc.values` with `inputs` bound; its outputs. */
function runBody(lc: LoopContext, g: Graph, inputs: Value[]): Value[] {
  if (inputs.length !== g.inputs.length) {
    throw new Unsupported(`a body of ${g.inputs.length} inputs given ${inputs.length}`);
  }
  const scope = new Map(lc.values);
  g.inputs.forEach((v, i) => scope.set(v.name, inputs[i]));
  const before = lc.problems.length;
  for (const node of g.nodes) lc.convertNode(node, lc.opset, lc.em, scope, lc.made, lc.problems);
  if (lc.problems.length > before) throw new Unsupported("a body that cannot be imported");
  return g.outputs.map((o) => {
    const v = scope.get(o.name);
    if (v === undefined || v === null) {
      throw new Unsupported(`body output "${o.name}" is not written`);
    }
    return v;
  });
}

/** A known scalar of `dtype` as a value (a constant of the executable). */
function constant(lc: LoopContext, x: number | boolean, dtype: "int64" | "bool"): Value {
  const t = dtype === "int64"
    ? tensor(new BigInt64Array([BigInt(x)]), { shape: [] })
    : tensor(new Uint8Array([x ? 1 : 0]), { dtype: "bool", shape: [] });
  lc.made.push(t);
  return { dtype, shape: [], reg: null, tensor: t };
}

/** `Loop(M?, cond?, v_initial...)` through the VM's control flow. */
export function convertLoop(n: Node, lc: LoopContext, inputs: (Value | undefined)[]): Value[] {
  const g = body(n);
  const { em } = lc;
  const [trips, cond, ...initial] = inputs;
  if (initial.some((v) => v === undefined)) throw new Unsupported("an absent loop-carried value");
  const carried = initial as Value[];
  const scanCount = g.outputs.length - 1 - carried.length;
  if (scanCount < 0) throw new Unsupported("a body with too few outputs");
  // Registers the body's outputs are copied back into.
  const count = em.newReg(), going = em.newReg();
  const carriedRegs = carried.map(() => em.newReg());
  // Scan outputs start as null: the first append makes the tensor.
  const scanRegs = Array.from({ length: scanCount }, () => em.record("vm.builtin.null_value", [])!);
  em.recordCopy(constant(lc, 0, "int64"), count);
  em.recordCopy(cond ?? constant(lc, true, "bool"), going);
  carried.forEach((v, k) => em.recordCopy(v, carriedRegs[k]));
  // Values not yet in registers are materialized inside the body only on its path.
  const lazy = [...lc.values.values()].filter((v): v is Value => v !== null && v.reg === null);
  const top = em.newLabel(), end = em.newLabel();
  em.recordLabel(top);
  let go: Value = { dtype: "bool", shape: [], reg: going };
  if (trips !== undefined) {
    const below = em.call("vm.op.less", [count, em.reg(trips)], "bool", []);
    go = em.call("vm.op.logical_and", [below.reg!, going], "bool", []);
  }
  em.recordIf(em.record("vm.builtin.read_if_cond", [go.reg!])!, end);
  const outs = runBody(lc, g, [
    { dtype: "int64", shape: [], reg: count },
    { dtype: "bool", shape: [], reg: going },
    ...carried.map((v, k): Value => ({ dtype: v.dtype, shape: [...v.shape], reg: carriedRegs[k] })),
  ]);
  // Scan outputs first, then the carried values through fresh registers: an output may be a
  // carried register itself (Identity), or another one's (a swap).
  const scans = outs.slice(1 + carried.length);
  scans.forEach((v, k) => {
    const stacked = em.call(
      "vm.op.stack_append",
      [scanRegs[k], em.reg(v)],
      v.dtype,
      [null, ...v.shape],
    );
    em.recordCopy(stacked, scanRegs[k]);
  });
  const moved = outs.slice(0, 1 + carried.length).map((out, k) => {
    const v = k === 0 ? { dtype: "bool", shape: [] as Dim[] } : carried[k - 1];
    // Sizes known on both sides must agree; those the body leaves unknown are checked below.
    const clash = (d: Dim, i: number) =>
      typeof d === "number" && typeof v.shape[i] === "number" && d !== v.shape[i];
    if (out.dtype !== v.dtype || out.shape.length !== v.shape.length || out.shape.some(clash)) {
      throw new Unsupported("a loop-carried value whose dtype or shape changes");
    }
    const r = em.newReg();
    em.recordCopy(out, r);
    em.matchShape(r, [...v.shape], "a loop-carried value");
    return r;
  });
  moved.forEach((r, k) =>
    em.recordCopy({ dtype: "bool", shape: [], reg: r }, k === 0 ? going : carriedRegs[k - 1])
  );
  const next = em.call("vm.op.add", [count, em.reg(constant(lc, 1, "int64"))], "int64", []);
  em.recordCopy(next, count);
  em.recordGoto(top);
  em.recordLabel(end);
  for (const v of lazy) v.reg = null;
  const results: Value[] = carried.map((v, k) => ({
    dtype: v.dtype,
    shape: [...v.shape],
    reg: carriedRegs[k],
  }));
  for (const [k, v] of scans.entries()) {
    const shape: Dim[] = [null, ...v.shape];
    em.matchShape(scanRegs[k], shape, "");
    results.push({ dtype: v.dtype, shape, reg: scanRegs[k] });
  }
  return results;
}

/** `v`'s slice `i` along axis 0, without that axis. */
function step(cx: NodeContext, v: Value, i: number): Value {
  const idx = cx.scalar(i, "int64");
  return cx.em.call(
    "vm.op.take",
    [cx.em.reg(v), cx.em.reg(idx), cx.em.imm(0)],
    v.dtype,
    v.shape.slice(1),
  );
}

/** `parts` stacked along a new axis 0. */
function stack(cx: NodeContext, parts: Value[]): Value {
  const rows = parts.map((p) => reshapeTo(cx, p, [1, ...p.shape]));
  const tuple = cx.em.record("vm.builtin.make_tuple", rows.map((r) => cx.em.reg(r)))!;
  return cx.em.call(
    "vm.op.concat",
    [tuple, cx.em.imm(0)],
    parts[0].dtype,
    [parts.length, ...parts[0].shape],
  );
}

/** The steps of `Scan`'s body over `scanned` (each stepped along axis 0) from `states`. */
function unroll(
  lc: LoopContext,
  cx: NodeContext,
  g: Graph,
  states: Value[],
  scanned: Value[],
  reverse: readonly boolean[],
): Value[] {
  const length = scanned[0]?.shape[0];
  if (typeof length !== "number" || scanned.some((v) => v.shape[0] !== length)) {
    throw new Unsupported("scan inputs whose length is not known at import");
  }
  if (length === 0) throw new Unsupported("a scan of length 0");
  let current = states;
  const outputs: Value[][] = [];
  for (let t = 0; t < length; t++) {
    const slices = scanned.map((v, k) => step(cx, v, reverse[k] ? length - 1 - t : t));
    const outs = runBody(lc, g, [...current, ...slices]);
    current = outs.slice(0, states.length);
    outputs.push(outs.slice(states.length));
  }
  const scanOuts = outputs[0].map((_, k) => stack(cx, outputs.map((o) => o[k])));
  return [...current, ...scanOuts];
}

/** `Scan` unrolled at import (opset 9 and later; opset 8 without `sequence_lens`). */
export function convertScan(n: Node, lc: LoopContext, inputs: (Value | undefined)[]): Value[] {
  const g = body(n);
  const cx = new NodeContext(n, lc.opset, lc.em, inputs, lc.made);
  const k = cx.int("num_scan_inputs", 0);
  const zeros = (name: string) => (cx.ints(name) ?? []).every((v) => v === 0);
  if (!zeros("scan_output_axes") || !zeros("scan_output_directions")) {
    throw new Unsupported("scan outputs along another axis or backwards");
  }
  if (lc.opset < 9) {
    // Opset 8: input 0 is sequence_lens; every input has a batch axis 0, scanned along axis 1.
    if (inputs[0] !== undefined) throw new Unsupported("sequence_lens");
    const rest = inputs.slice(1) as Value[];
    const batch = rest[0]?.shape[0];
    if (typeof batch !== "number") throw new Unsupported("a batch not known at import");
    const reverse = (cx.ints("directions") ?? []).map((d) => d === 1);
    const perBatch = Array.from({ length: batch }, (_, b) => {
      const taken = rest.map((v) => step(cx, v, b));
      return unroll(
        lc,
        cx,
        g,
        taken.slice(0, taken.length - k),
        taken.slice(taken.length - k),
        reverse,
      );
    });
    return perBatch[0].map((_, i) => stack(cx, perBatch.map((r) => r[i])));
  }
  if (!zeros("scan_input_axes")) throw new Unsupported("scan inputs along another axis than 0");
  const all = inputs as Value[];
  const reverse = (cx.ints("scan_input_directions") ?? []).map((d) => d === 1);
  return unroll(lc, cx, g, all.slice(0, all.length - k), all.slice(all.length - k), reverse);
}
