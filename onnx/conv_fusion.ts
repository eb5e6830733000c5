/**
 * Folds the elementwise chains an exporter writes after a `Conv` into the
 * convolution's epilogue (`vm.op.conv2d`'s `epilogue`, computed while the
 * output is in cache): scalings by constants (`Mul`, `Add`, `Sub`, `Div` by
 * a one-element constant: PaddleOCR's learnable affine blocks), `Relu`,
 * `Clip` by constants, `HardSigmoid`, `HardSwish`, `Sigmoid` (a detector's
 * probability map after its last upsampling), and the hard-swish
 * paddle2onnx spells out, `y · Clip(y + 3, 0, 6) / 6`. In PP-OCRv4 these
 * were a third of the recognizer's CPU time: up to eight passes over each
 * activation, where onnxruntime fuses them into its convolutions.
 *
 * Per-channel steps right after the convolution, before any of those,
 * fold into its weights and bias instead (`convChannelAffines`, applied
 * by ops_conv.ts at import, as onnxruntime's Conv+BatchNormalization and
 * Conv+Add fusions do): inference-mode `BatchNormalization`, and `Mul` or
 * `Add` by a constant of one value a channel (`[M, 1, 1]`, `[1, M, 1,
 * 1]`), where the weights, bias and statistics are `Constant` nodes (as
 * paddle2onnx writes them), not initializers: those are the parameter
 * tuple, which a caller may load anew, and a folded copy of a weight would
 * also be held beside it. `ConvTranspose` folds the same chains where it becomes one
 * `vm.op.conv2d` (no `output_shape` or `auto_pad`, pads within the
 * kernel): PP-OCRv4's detector ends in two of them, each followed by its
 * bias `Add`, a `BatchNormalization` and a `Relu` (three passes over its
 * largest activations, 24 × 96 × 320 at a 640 × 192 input).
 *
 * A chain is folded only where nothing else reads its intermediate values:
 * each has the one consumer the pattern needs (the spelled-out hard-swish's
 * input two), none is a graph output or read inside a subgraph. The folded
 * `Conv` takes the chain's last output; the chain's nodes are dropped.
 *
 * @module
 */

import type { Conv2dEpilogueStep } from "../builtins/operators/conv_epilogue.ts";
import type { Graph, Node, TensorProto } from "./onnx_proto.ts";
import { indexGraph } from "./graph_index.ts";

/** The epilogue steps of each `Conv` that `fuseConvEpilogues` folded a chain into. */
export const convEpilogues: WeakMap<Node, readonly Conv2dEpilogueStep[]> = new WeakMap();

/**
 * `y[n, m] = scale[m] · conv(x)[n, m] + shift[m]`: what a fused convolution's
 * weights (row `m` times `scale[m]`) and bias (`bias · scale + shift`) take
 * at import, for the per-channel steps `fuseConvEpilogues` folded.
 */
export interface ChannelAffine {
  readonly scale: Float64Array;
  readonly shift: Float64Array;
}

/** The per-channel steps of each `Conv` or `ConvTranspose` that `fuseConvEpilogues` folded. */
export const convChannelAffines: WeakMap<Node, ChannelAffine> = new WeakMap();

const FLOAT = 1, FLOAT_BYTES = 4;

/** The value of a one-element float32 tensor, or undefined. */
function scalarOf(t: TensorProto | null | undefined): number | undefined {
  if (t === null || t === undefined || t.dataType !== FLOAT) return undefined;
  // At most 4-D: broadcast against a convolution's [N, M, OH, OW] output, it keeps that shape.
  if (t.dims.length > 4 || t.dims.reduce((a, b) => a * b, 1) !== 1 || t.dataLocation === 1) {
    return undefined;
  }
  if (t.rawData !== null && t.rawData.length === FLOAT_BYTES) {
    return new DataView(t.rawData.buffer, t.rawData.byteOffset, FLOAT_BYTES).getFloat32(0, true);
  }
  return t.floatData.length === 1 ? t.floatData[0] : undefined;
}

/** A float32 constant's values (all of them), or undefined. */
function floatsOf(t: TensorProto | null | undefined): Float32Array | undefined {
  if (t === null || t === undefined || t.dataType !== FLOAT || t.dataLocation === 1) {
    return undefined;
  }
  const n = t.dims.reduce((a, b) => a * b, 1);
  if (t.rawData !== null && t.rawData.length > 0) {
    if (t.rawData.length !== n * FLOAT_BYTES) return undefined;
    const view = new DataView(t.rawData.buffer, t.rawData.byteOffset, t.rawData.length);
    return Float32Array.from({ length: n }, (_, i) => view.getFloat32(i * FLOAT_BYTES, true));
  }
  return t.floatData.length === n ? Float32Array.from(t.floatData) : undefined;
}

/**
 * The `M` values of a constant that broadcasts one value a channel against
 * a convolution's `[N, M, H, W]` output (`[M, 1, 1]` or `[1, M, 1, 1]`), or
 * undefined.
 */
function perChannelOf(t: TensorProto | null | undefined, M: number): Float32Array | undefined {
  if (t === null || t === undefined || M < 2) return undefined;
  const d = t.dims, r = d.length;
  if (r < 3 || r > 4 || d[r - 3] !== M || d.some((v, i) => i !== r - 3 && v !== 1)) {
    return undefined;
  }
  return floatsOf(t);
}

/** Multiplies `v` by `a` and adds `b` after `steps`: merged into a last affine step if any. */
function pushAffine(steps: Conv2dEpilogueStep[], a: number, b: number): void {
  const last = steps.at(-1);
  if (last?.op === "affine") {
    steps[steps.length - 1] = { op: "affine", a: last.a * a, b: last.b * a + b };
  } else steps.push({ op: "affine", a, b });
}

/**
 * `graph`'s nodes with each foldable chain after a 4-D `Conv` folded into it
 * (`convEpilogues` holds the steps, keyed by the new `Conv` node); the
 * graph itself is unchanged.
 */
export function fuseConvEpilogues(graph: Graph, opset: number): Node[] {
  const { constants, consumers, pinned } = indexGraph(graph);
  // Initializers are the parameter tuple `main` takes, which a caller may load anew
  // (`load_params`): the per-channel folds, which rewrite weights, read `Constant` nodes only.
  const params = new Set(graph.initializers.map((t) => t.name));
  const fixed = (name: string) => name !== "" && !params.has(name) && constants.has(name);
  const scalar = (name: string | undefined) =>
    name === undefined || name === "" ? undefined : scalarOf(constants.get(name));
  /** The one node reading `name`, where nothing else may. */
  const only = (name: string): Node | undefined => {
    const list = consumers.get(name);
    return pinned.has(name) || list === undefined || list.length !== 1 ? undefined : list[0];
  };
  const attr = (n: Node, name: string, fallback: number) =>
    n.attributes.find((a) => a.name === name)?.f ?? fallback;

  const dropped = new Set<Node>();
  const replaced = new Map<Node, Node>();
  for (const conv of graph.nodes) {
    const transposed = conv.opType === "ConvTranspose";
    if (
      (conv.opType !== "Conv" && !transposed) || conv.domain !== "" || conv.outputs.length !== 1
    ) continue;
    // Float32 weights of four axes: a float32 image convolution, which `vm.op.conv2d` computes.
    const weight = constants.get(conv.inputs[1]);
    if (weight?.dims.length !== 4 || weight.dataType !== FLOAT) continue;
    if (transposed && !oneConv2d(conv)) continue;
    // Output channels: [M, C/G, KH, KW] for a Conv, [C, M/G, KH, KW] for a ConvTranspose.
    const M = transposed ? weight.dims[1] * groupOf(conv) : weight.dims[0];
    // Per-channel steps change the weights and bias at import: both must be constants.
    const biasName = conv.inputs[2] ?? "";
    const channel: { scale: Float64Array; shift: Float64Array } | undefined =
      fixed(conv.inputs[1]) &&
        (biasName === "" || (fixed(biasName) && floatsOf(constants.get(biasName))?.length === M))
        ? { scale: new Float64Array(M).fill(1), shift: new Float64Array(M) }
        : undefined;
    let channelSteps = 0;
    const steps: Conv2dEpilogueStep[] = [];
    const chain: Node[] = [];
    let y = conv.outputs[0];
    for (;;) {
      if (channel !== undefined && steps.length === 0) {
        const n = only(y);
        if (
          n !== undefined && n.domain === "" && !dropped.has(n) && foldChannel(n, y, M, channel)
        ) {
          channelSteps++;
          chain.push(n);
          y = n.outputs[0];
          continue;
        }
      }
      const swish = spelledHardSwish(y);
      if (swish !== undefined) {
        steps.push({ op: "hardswish", a: swish.shift, b: swish.cap });
        chain.push(...swish.nodes);
        y = swish.out;
        continue;
      }
      const n = only(y);
      if (n === undefined || n.domain !== "" || n.outputs.length !== 1 || dropped.has(n)) break;
      const other = n.inputs.length === 2 ? n.inputs[n.inputs[0] === y ? 1 : 0] : undefined;
      const c = n.inputs.length === 2 && n.inputs[0] !== n.inputs[1] ? scalar(other) : undefined;
      if (n.opType === "Mul" && c !== undefined) pushAffine(steps, c, 0);
      else if (n.opType === "Add" && c !== undefined) pushAffine(steps, 1, c);
      else if (n.opType === "Sub" && c !== undefined) {
        if (n.inputs[0] === y) pushAffine(steps, 1, -c);
        else pushAffine(steps, -1, c);
      } else if (n.opType === "Div" && c !== undefined && n.inputs[0] === y) {
        pushAffine(steps, 1 / c, 0);
      } else if (n.opType === "Relu" && n.inputs.length === 1) {
        steps.push({ op: "relu", a: 0, b: 0 });
      } else if (n.opType === "HardSigmoid" && n.inputs.length === 1) {
        steps.push({ op: "hardsigmoid", a: attr(n, "alpha", 0.2), b: attr(n, "beta", 0.5) });
      } else if (n.opType === "HardSwish" && n.inputs.length === 1) {
        steps.push({ op: "hardswish", a: 3, b: 6 });
      } else if (n.opType === "Sigmoid" && n.inputs.length === 1) {
        steps.push({ op: "sigmoid", a: 0, b: 0 });
      } else if (n.opType === "Clip" && n.inputs[0] === y) {
        const bounds = clipBounds(n);
        if (bounds === undefined) break;
        steps.push({ op: "clip", a: bounds[0], b: bounds[1] });
      } else break;
      chain.push(n);
      y = n.outputs[0];
    }
    if (steps.length === 0 && channelSteps === 0) continue;
    const fused: Node = { ...conv, outputs: [y] };
    if (steps.length > 0) convEpilogues.set(fused, steps);
    if (channelSteps > 0) convChannelAffines.set(fused, channel!);
    replaced.set(conv, fused);
    for (const n of chain) dropped.add(n);
  }
  return graph.nodes.filter((n) => !dropped.has(n)).map((n) => replaced.get(n) ?? n);

  /** A node's `group` attribute (1 where absent). */
  function groupOf(n: Node): number {
    return Number(n.attributes.find((a) => a.name === "group")?.i ?? 1);
  }

  /**
   * Whether a `ConvTranspose` becomes one `vm.op.conv2d` whatever its input's
   * size (ops_conv.ts's `convTranspose2d`): no `output_shape` or `auto_pad`,
   * and each pad at most the dilated kernel's reach, so that the conv form's
   * padding is not negative.
   */
  function oneConv2d(n: Node): boolean {
    const ints = (name: string) => n.attributes.find((a) => a.name === name)?.ints.map(Number);
    const autoPad = n.attributes.find((a) => a.name === "auto_pad")?.s;
    if (ints("output_shape") !== undefined) return false;
    if (autoPad !== undefined && new TextDecoder().decode(autoPad) !== "NOTSET") return false;
    const w = constants.get(n.inputs[1])!.dims.map(Number);
    const kernel = ints("kernel_shape") ?? [w[2], w[3]];
    const d = ints("dilations") ?? [1, 1], p = ints("pads") ?? [0, 0, 0, 0];
    const out = ints("output_padding") ?? [0, 0];
    return kernel.length === 2 &&
      [0, 1].every((i) =>
        (kernel[i] - 1) * d[i] - p[i] >= 0 && (kernel[i] - 1) * d[i] - p[i + 2] + out[i] >= 0
      );
  }

  /**
   * Folds `n`, the one reader of the convolution's output so far `y`, into
   * `channel` where it is a per-channel step: inference-mode
   * `BatchNormalization` with constant statistics, or `Mul`/`Add` by one
   * constant a channel. False (nothing changed) otherwise.
   */
  function foldChannel(
    n: Node,
    y: string,
    M: number,
    channel: { scale: Float64Array; shift: Float64Array },
  ): boolean {
    if (n.outputs.length < 1 || n.outputs.slice(1).some((o) => o !== "")) return false;
    const { scale, shift } = channel;
    if ((n.opType === "Mul" || n.opType === "Add") && n.inputs.length === 2) {
      const other = n.inputs[n.inputs[0] === y ? 1 : 0];
      if (n.inputs[0] === n.inputs[1] || !fixed(other)) return false;
      const c = perChannelOf(constants.get(other), M);
      if (c === undefined) return false;
      for (let m = 0; m < M; m++) {
        if (n.opType === "Add") shift[m] += c[m];
        else {
          scale[m] *= c[m];
          shift[m] *= c[m];
        }
      }
      return true;
    }
    if (n.opType !== "BatchNormalization" || n.inputs[0] !== y || n.inputs.length !== 5) {
      return false;
    }
    if (Number(n.attributes.find((a) => a.name === "training_mode")?.i ?? 0) !== 0) return false;
    if (!n.inputs.slice(1).every(fixed)) return false;
    const [gamma, beta, mean, variance] = n.inputs.slice(1).map((name) =>
      floatsOf(constants.get(name))
    );
    if ([gamma, beta, mean, variance].some((v) => v?.length !== M)) return false;
    const eps = Math.fround(attr(n, "epsilon", 1e-5));
    for (let m = 0; m < M; m++) {
      // As the unfused BatchNormalization computes it, in float32: scale / sqrt(var + eps).
      const s = Math.fround(gamma![m] / Math.fround(Math.sqrt(Math.fround(variance![m] + eps))));
      scale[m] *= s;
      shift[m] = shift[m] * s + beta![m] - mean![m] * s;
    }
    return true;
  }

  /** `[lo, hi]` of a `Clip` whose bounds are constants (±Infinity where absent), or undefined. */
  function clipBounds(n: Node): [number, number] | undefined {
    if (opset < 11) {
      const has = (name: string) => n.attributes.some((a) => a.name === name);
      return [
        has("min") ? attr(n, "min", 0) : -Infinity,
        has("max") ? attr(n, "max", 0) : Infinity,
      ];
    }
    const lo = n.inputs[1] ?? "", hi = n.inputs[2] ?? "";
    const l = lo === "" ? -Infinity : scalar(lo), h = hi === "" ? Infinity : scalar(hi);
    return l === undefined || h === undefined ? undefined : [l, h];
  }

  /**
   * `y · Clip(y + shift, 0, cap) / cap` as paddle2onnx writes hard-swish:
   * `y` read by that `Add` and `Mul` alone, the `Clip` by the `Mul`, the
   * `Mul` by the `Div`; its nodes and output, or undefined.
   */
  function spelledHardSwish(
    y: string,
  ): { shift: number; cap: number; nodes: Node[]; out: string } | undefined {
    const readers = consumers.get(y);
    if (pinned.has(y) || readers === undefined || readers.length !== 2) return undefined;
    const add = readers.find((n) => n.opType === "Add" && n.domain === "");
    const mul = readers.find((n) => n.opType === "Mul" && n.domain === "");
    if (add === undefined || mul === undefined || add.inputs.length !== 2) return undefined;
    const shift = scalar(add.inputs[add.inputs[0] === y ? 1 : 0]);
    const clip = only(add.outputs[0]);
    if (shift === undefined || clip?.opType !== "Clip" || clip.domain !== "") return undefined;
    const bounds = clipBounds(clip);
    if (bounds === undefined || bounds[0] !== 0 || !(bounds[1] > 0) || !isFinite(bounds[1])) {
      return undefined;
    }
    const cap = bounds[1];
    const pair = [mul.inputs[0], mul.inputs[1]];
    if (only(clip.outputs[0]) !== mul || !pair.includes(y) || !pair.includes(clip.outputs[0])) {
      return undefined;
    }
    const div = only(mul.outputs[0]);
    if (div?.opType !== "Div" || div.domain !== "" || div.inputs[0] !== mul.outputs[0]) {
      return undefined;
    }
    if (scalar(div.inputs[1]) !== cap) return undefined;
    return { shift, cap, nodes: [add, clip, mul, div], out: div.outputs[0] };
  }
}
