/**
 * `LSTM` through `importONNX` with weights known at import (`Constant`
 * nodes): each step's gates are one `vm.op.linear` of `[x_t | h]` by
 * `[W | R]` and the bias `Wb + Rb`, made at import (onnx/ops_recurrent.ts's
 * `gatesPart`). Checked against ONNX's definition of the operator, computed
 * here in float64, and against the same model with its weights as graph
 * inputs (two products a step, which the ONNX node tests check), over
 * several steps, both directions, with and without a bias or an initial
 * state (the first step then has no `h`).
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";
import { importONNX, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { type Field, floatTensor, model, node, valueInfo } from "../bench/_onnx_writer.ts";

const sigmoid = (v: number) => 1 / (1 + Math.exp(-v));

interface Case {
  steps: number;
  batch: number;
  input: number;
  hidden: number;
  reverse?: boolean;
  bias?: boolean;
  initialH?: boolean;
}

/** ONNX's LSTM (gates i, o, f, c), one direction: Y `[steps, 1, batch, hidden]` row-major. */
function reference(
  t: Case,
  x: Float32Array,
  w: Float32Array,
  r: Float32Array,
  b: Float32Array | null,
  h0: Float32Array | null,
): number[] {
  const { batch, input, hidden } = t, k = 4 * hidden;
  let h = Array.from({ length: batch * hidden }, (_, i) => h0 === null ? 0 : h0[i]);
  let c = new Array(batch * hidden).fill(0);
  const y: number[][] = [];
  const order = [...Array(t.steps).keys()];
  if (t.reverse) order.reverse();
  for (const s of order) {
    const h2 = new Array(batch * hidden), c2 = new Array(batch * hidden);
    for (let n = 0; n < batch; n++) {
      const g = new Array(k).fill(0);
      for (let j = 0; j < k; j++) {
        let acc = b === null ? 0 : b[j] + b[k + j];
        for (let i = 0; i < input; i++) acc += x[(s * batch + n) * input + i] * w[j * input + i];
        for (let i = 0; i < hidden; i++) acc += h[n * hidden + i] * r[j * hidden + i];
        g[j] = acc;
      }
      for (let u = 0; u < hidden; u++) {
        const ig = sigmoid(g[u]), og = sigmoid(g[hidden + u]);
        const fg = sigmoid(g[2 * hidden + u]), cell = Math.tanh(g[3 * hidden + u]);
        c2[n * hidden + u] = fg * c[n * hidden + u] + ig * cell;
        h2[n * hidden + u] = og * Math.tanh(c2[n * hidden + u]);
      }
    }
    h = h2;
    c = c2;
    y[s] = h2;
  }
  return y.flat();
}

const CASES: Case[] = [
  { steps: 1, batch: 1, input: 5, hidden: 3, bias: true, initialH: true },
  { steps: 3, batch: 2, input: 4, hidden: 5, bias: true, initialH: true },
  { steps: 3, batch: 1, input: 3, hidden: 2 },
  { steps: 2, batch: 3, input: 1, hidden: 1, reverse: true, initialH: true },
];

for (const t of CASES) {
  const name = `steps ${t.steps} batch ${t.batch} input ${t.input} hidden ${t.hidden}` +
    (t.reverse ? " reverse" : "") + (t.bias ? " bias" : "") + (t.initialH ? " initial_h" : "");
  Deno.test(`onnx import: LSTM ${name}, weights as Constants, one product a step`, async () => {
    const { steps, batch, input, hidden } = t, k = 4 * hidden;
    const wave = (n: number, f: number) =>
      Float32Array.from({ length: n }, (_, i) => Math.sin(i * f) * 0.6);
    const xs = wave(steps * batch * input, 0.9), ws = wave(k * input, 1.7);
    const rs = wave(k * hidden, 2.3), bs = t.bias ? wave(2 * k, 0.4) : null;
    const h0 = t.initialH ? wave(batch * hidden, 1.1) : null;
    const want = reference(t, xs, ws, rs, bs, h0);
    const tensors: [string, number[], Float32Array | null][] = [
      ["w", [1, k, input], ws],
      ["r", [1, k, hidden], rs],
      ["b", [2 * k], bs],
      ["h0", [1, batch, hidden], h0],
    ];
    const bytes = (asConstants: boolean) => {
      const present = tensors.filter(([, , v]) => v !== null);
      const nodes: Field[][] = asConstants
        ? present.map(([n, shape, v]) =>
          [
            ...node("Constant", [], [n]),
            [5, [
              [1, "value"],
              [5, floatTensor(n, shape.length === 1 ? [1, ...shape] : shape, v!)],
              [20, 4],
            ]],
          ] as Field[]
        )
        : [];
      const lstm = node(
        "LSTM",
        ["x", "w", "r", bs === null ? "" : "b", "", h0 === null ? "" : "h0"],
        ["y"],
        { hidden_size: hidden },
      );
      // AttributeProto: name 1, s 4, type 20 (STRING 3); the writer's `node` writes numbers only.
      if (t.reverse) lstm.push([5, [[1, "direction"], [4, "reverse"], [20, 3]]]);
      return model({
        name: "lstm",
        nodes: [...nodes, lstm],
        initializers: [],
        inputs: [
          valueInfo("x", [steps, batch, input]),
          ...(asConstants
            ? []
            : present.map(([n, shape]) =>
              valueInfo(n, shape.length === 1 ? [1, ...shape] : shape)
            )),
        ],
        outputs: [valueInfo("y", [steps, 1, batch, hidden])],
      }, 14);
    };
    const runs: number[][] = [];
    for (const asConstants of [true, false]) {
      using imported = await importONNX(bytes(asConstants));
      const linears = imported.executable.as_text().match(/call +vm\.op\.linear /g)?.length ?? 0;
      // Joined: one a step (a first step without h has the input's product only); else one for
      // x and one for h.
      assertEquals(linears, asConstants ? steps : 2 * steps - (t.initialH ? 0 : 1));
      const vm = new VirtualMachine(imported.executable);
      using x = tensor(xs, { shape: [steps, batch, input] });
      const feeds = asConstants
        ? []
        : tensors.filter(([, , v]) => v !== null).map(([, shape, v]) =>
          tensor(v!, { shape: shape.length === 1 ? [1, ...shape] : shape })
        );
      using y = await vm.invoke("main", x, ...feeds) as NDArray;
      for (const f of feeds) f.dispose();
      assertEquals(y.shape, [steps, 1, batch, hidden]);
      runs.push([...y.dataSync() as Float32Array]);
    }
    for (const got of runs) {
      assertEquals(got.length, want.length);
      for (let i = 0; i < want.length; i++) {
        assert(Math.abs(got[i] - want[i]) <= 1e-5, `[${i}] ${got[i]} vs ${want[i]}`);
      }
    }
  });
}
