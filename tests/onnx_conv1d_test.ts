/**
 * 1-D `Conv` through `importONNX`: a convolution of one group by weights
 * known at import runs as `vm.op.linear` of its windows (onnx/ops_conv.ts's
 * `conv1dByLinear`), every other one through the index path; both against
 * the convolution's definition, at widths, channels and kernels that are
 * not multiples of anything, of 1, with odd strides, paddings and
 * dilations.
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";
import { importONNX, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import {
  type Attribute,
  type Field,
  floatTensor,
  model,
  node,
  valueInfo,
} from "../bench/_onnx_writer.ts";

interface Case {
  n: number;
  c: number;
  m: number;
  k: number;
  w: number;
  strides?: number;
  dilations?: number;
  pads?: [number, number];
  autoPad?: string;
  group?: number;
  bias?: boolean;
}

/** The convolution by its definition, with the padding `auto_pad` or `pads` gives. */
function reference(
  t: Case,
  x: Float32Array,
  wt: Float32Array,
  b: Float32Array | null,
): { out: number; y: number[] } {
  const s = t.strides ?? 1, d = t.dilations ?? 1, g = t.group ?? 1;
  const span = (t.k - 1) * d + 1;
  let [begin, end] = t.pads ?? [0, 0];
  if (t.autoPad === "SAME_UPPER" || t.autoPad === "SAME_LOWER") {
    const total = Math.max(0, (Math.ceil(t.w / s) - 1) * s + span - t.w);
    begin = t.autoPad === "SAME_UPPER" ? Math.floor(total / 2) : Math.ceil(total / 2);
    end = total - begin;
  }
  const out = Math.floor((t.w + begin + end - span) / s) + 1;
  const cg = t.c / g, mg = t.m / g, y: number[] = [];
  for (let n = 0; n < t.n; n++) {
    for (let m = 0; m < t.m; m++) {
      const gi = Math.floor(m / mg);
      for (let o = 0; o < out; o++) {
        let acc = b === null ? 0 : b[m];
        for (let i = 0; i < cg; i++) {
          for (let j = 0; j < t.k; j++) {
            const at = o * s - begin + j * d;
            if (at < 0 || at >= t.w) continue;
            acc += x[(n * t.c + gi * cg + i) * t.w + at] * wt[(m * cg + i) * t.k + j];
          }
        }
        y.push(acc);
      }
    }
  }
  return { out, y };
}

const CASES: Case[] = [
  // Silero's shapes, scaled down: kernel 3 padded by 1, strides 1 and 2; its STFT (no padding).
  { n: 1, c: 5, m: 7, k: 3, w: 9, pads: [1, 1], bias: true },
  { n: 1, c: 6, m: 3, k: 3, w: 8, strides: 2, pads: [1, 1], bias: true },
  { n: 1, c: 1, m: 10, k: 16, w: 40, strides: 8 },
  // One output position (a reshape, no transpose), one channel, one output channel, kernel 1.
  { n: 1, c: 4, m: 5, k: 3, w: 1, pads: [1, 1], bias: true },
  { n: 2, c: 3, m: 1, k: 1, w: 7 },
  // A batch, uneven padding, dilation, odd stride; auto_pad both ways.
  { n: 3, c: 3, m: 4, k: 4, w: 11, strides: 3, dilations: 2, pads: [2, 1], bias: true },
  { n: 2, c: 2, m: 3, k: 4, w: 10, strides: 3, autoPad: "SAME_UPPER" },
  { n: 1, c: 2, m: 2, k: 2, w: 5, autoPad: "SAME_LOWER", bias: true },
  { n: 1, c: 3, m: 2, k: 5, w: 5, autoPad: "VALID" },
  // Groups keep the index path.
  { n: 2, c: 4, m: 6, k: 3, w: 7, group: 2, pads: [1, 1], bias: true },
];

for (const [t, weightsAs] of CASES.flatMap((t) => [[t, "Constant"], [t, "initializer"]] as const)) {
  const name = `c${t.c} m${t.m} k${t.k} w${t.w} n${t.n}` +
    (t.strides ? ` s${t.strides}` : "") + (t.dilations ? ` d${t.dilations}` : "") +
    (t.pads ? ` pads ${t.pads}` : "") + (t.autoPad ? ` ${t.autoPad}` : "") +
    (t.group ? ` g${t.group}` : "") + (t.bias ? " bias" : "") + `, weights as ${weightsAs}`;
  Deno.test(`onnx import: 1-D Conv ${name} matches its definition`, async () => {
    const g = t.group ?? 1;
    const xs = Float32Array.from({ length: t.n * t.c * t.w }, (_, i) => Math.sin(i * 0.7 + 0.3));
    const ws = Float32Array.from({ length: t.m * (t.c / g) * t.k }, (_, i) => Math.cos(i * 1.3));
    const bs = t.bias ? Float32Array.from({ length: t.m }, (_, i) => 0.25 * i - 0.5) : null;
    const { out, y: want } = reference(t, xs, ws, bs);
    const attrs: Record<string, Attribute> = { kernel_shape: [t.k] };
    if (t.strides) attrs.strides = [t.strides];
    if (t.dilations) attrs.dilations = [t.dilations];
    if (t.pads) attrs.pads = t.pads;
    if (t.group) attrs.group = t.group;
    const weights = floatTensor("w", [t.m, t.c / g, t.k], ws);
    const initializers = weightsAs === "initializer" ? [weights] : [];
    if (bs !== null) initializers.push(floatTensor("b", [t.m], bs));
    // A constant is sealed at import; an initializer is a parameter, read at run time.
    const constants = weightsAs === "Constant"
      ? [[...node("Constant", [], ["w"]), [5, [[1, "value"], [5, weights], [20, 4]]]] as Field[]]
      : [];
    const conv = node("Conv", bs === null ? ["x", "w"] : ["x", "w", "b"], ["y"], attrs);
    // AttributeProto: name 1, s 4, type 20 (STRING 3); the writer's `node` writes numbers only.
    if (t.autoPad) conv.push([5, [[1, "auto_pad"], [4, t.autoPad], [20, 3]]]);
    const bytes = model({
      name: "conv1d",
      nodes: [...constants, conv],
      initializers,
      inputs: [valueInfo("x", [t.n, t.c, t.w])],
      outputs: [valueInfo("y", [t.n, t.m, out])],
    }, 13);
    using imported = await importONNX(bytes);
    const text = imported.executable.as_text();
    // One group: the windows' product is vm.op.linear; groups: the batched matmul.
    assertEquals(text.includes("vm.op.linear"), g === 1);
    assertEquals(text.includes("vm.op.matmul"), g !== 1);
    const vm = new VirtualMachine(imported.executable);
    using x = tensor(xs, { shape: [t.n, t.c, t.w] });
    using y = await vm.invoke(
      "main",
      ...(imported.params.length > 0 ? [x, imported.params] : [x]),
    ) as NDArray;
    assertEquals(y.shape, [t.n, t.m, out]);
    const got = y.dataSync() as Float32Array;
    assertEquals(got.length, want.length);
    for (let i = 0; i < want.length; i++) {
      assert(Math.abs(got[i] - want[i]) <= 1e-5, `[${i}] ${got[i]} vs ${want[i]}`);
    }
  });
}
