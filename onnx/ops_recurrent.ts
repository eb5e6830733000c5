/**
 * ONNX's recurrent operators, `LSTM`, `GRU` and `RNN`, unrolled over a
 * sequence length known at import: each step is `vm.op.linear` of the input
 * and of the previous hidden state by the weights as stored, the gates
 * sliced out of one `[batch, k·hidden]` product, and the cell update in
 * elementwise operators, as ONNX's reference (`onnx/reference/ops/op_lstm.py`
 * and its siblings) computes it. Silero VAD's decoder (one step per 32 ms
 * chunk, its state carried across calls) is the case this is for; a sequence
 * length known only at run time (a loop the VM would have to run) is
 * unsupported, as are per-batch `sequence_lens`, peepholes, clipping and
 * activations other than the defaults.
 *
 * @module
 */

import { tensor } from "../devices/tensor.ts";
import { type Dim, Unsupported, type Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import { FLOAT, type OpSpec } from "./op_spec.ts";
import { binary, unary } from "./ops_elementwise.ts";
import { concatAlong, concatOrSelf, reshapeTo } from "./ops_shape.ts";

/** Longest sequence unrolled: each step is a dozen calls. */
const MAX_STEPS = 1024;

const add = (cx: NodeContext, a: Value, b: Value) => binary(cx, "add", a, b, FLOAT);
const mul = (cx: NodeContext, a: Value, b: Value) => binary(cx, "multiply", a, b, FLOAT);
const sub = (cx: NodeContext, a: Value, b: Value) => binary(cx, "subtract", a, b, FLOAT);

/** `x[begin:end]` along `axis`, the other axes whole. */
function slice(cx: NodeContext, x: Value, axis: number, begin: number, end: number): Value {
  const shape = [...x.shape];
  shape[axis] = end - begin;
  return cx.em.call(
    "vm.op.strided_slice",
    [cx.em.reg(x), [axis], [begin], [end], [1]],
    x.dtype,
    shape,
  );
}

function transpose(cx: NodeContext, x: Value, perm: number[]): Value {
  return cx.em.call("vm.op.transpose", [cx.em.reg(x), perm], x.dtype, perm.map((p) => x.shape[p]));
}

/** What the three operators share: the checked inputs, per direction, in ONNX's default layout. */
interface Recurrence {
  /** `[seq, batch, input]`. */
  x: Value;
  steps: number;
  batch: Dim;
  hidden: number;
  directions: number;
  /** Per direction: W `[k·hidden, input]` and R `[k·hidden, hidden]`, as ONNX stores them. */
  w: Value[];
  r: Value[];
  /** Per direction: Wb and Rb `[k·hidden]`, or undefined when `B` is absent. */
  wb: (Value | undefined)[];
  rb: (Value | undefined)[];
  /** Per direction: the initial states `[batch, hidden]` (`initial_h`, and `initial_c` for LSTM). */
  h0: Value[];
  c0: Value[];
  layout: number;
  /** Per direction: whether it runs from the last step to the first. */
  backward: boolean[];
}

/** Reads and checks what every recurrent operator has; `gates` is 4 (LSTM), 3 (GRU) or 1 (RNN). */
function recurrence(cx: NodeContext, gates: number, defaults: string[]): Recurrence {
  const layout = cx.int("layout", 0);
  const direction = cx.string("direction", "forward");
  const directions = direction === "bidirectional" ? 2 : 1;
  if (direction !== "forward" && direction !== "reverse" && direction !== "bidirectional") {
    throw new Unsupported(`direction ${direction}`);
  }
  if (cx.has("clip")) throw new Unsupported("clip");
  const acts = cx.ints("activation_alpha") ?? cx.ints("activation_beta");
  if (acts !== undefined) throw new Unsupported("activation_alpha/activation_beta");
  const given = cx.has("activations")
    ? cx.node.attributes.find((a) => a.name === "activations")
    : undefined;
  if (given !== undefined) {
    const names = given.strings.map((s) => new TextDecoder().decode(s));
    const want = [...Array(directions)].flatMap(() => defaults);
    if (names.join() !== want.join()) {
      throw new Unsupported(`activations ${names.join(", ")} (only ${defaults.join(", ")})`);
    }
  }
  let x = cx.input(0);
  cx.dtype(x, FLOAT);
  if (x.shape.length !== 3) throw new Unsupported(`X of rank ${x.shape.length}`);
  if (layout === 1) x = transpose(cx, x, [1, 0, 2]);
  const [steps, batch, inputSize] = x.shape;
  if (typeof steps !== "number") {
    throw new Unsupported("a sequence length known only at run time (it is unrolled at import)");
  }
  if (steps < 1 || steps > MAX_STEPS) throw new Unsupported(`${steps} steps (1 to ${MAX_STEPS})`);
  const hidden = cx.int("hidden_size", 0);
  const wAll = cx.input(1), rAll = cx.input(2);
  if (hidden <= 0 || typeof inputSize !== "number") {
    throw new Unsupported("hidden_size and the input size must be known");
  }
  const k = gates * hidden;
  const check = (v: Value, what: string, shape: number[]) => {
    cx.dtype(v, FLOAT, what);
    if (v.shape.join() !== shape.join()) {
      throw new Unsupported(`${what} of shape [${v.shape}], expected [${shape}]`);
    }
  };
  check(wAll, "W", [directions, k, inputSize]);
  check(rAll, "R", [directions, k, hidden]);
  const lens = cx.optional(4);
  if (lens !== undefined) {
    const known = lens.ints;
    if (known === undefined || !known.every((n) => n === steps)) {
      throw new Unsupported("sequence_lens other than the whole sequence");
    }
  }
  if (cx.optional(7) !== undefined) throw new Unsupported("peepholes (input P)");
  const b = cx.optional(3);
  if (b !== undefined) check(b, "B", [directions, 2 * k]);
  const perDirection = (v: Value, d: number, rows: number, cols: number) =>
    reshapeTo(cx, directions === 1 ? v : slice(cx, v, 0, d, d + 1), [rows, cols]);
  const state = (i: number, what: string): Value[] => {
    let v = cx.optional(i);
    if (v === undefined) {
      const zeros = cx.scalar(0);
      return [...Array(directions)].map(() => zeros);
    }
    cx.dtype(v, FLOAT, what);
    if (layout === 1) v = transpose(cx, v, [1, 0, 2]);
    return [...Array(directions)].map((_, d) =>
      reshapeTo(cx, directions === 1 ? v : slice(cx, v, 0, d, d + 1), [batch, hidden])
    );
  };
  const w: Value[] = [], r: Value[] = [], wb: (Value | undefined)[] = [];
  const rb: (Value | undefined)[] = [];
  for (let d = 0; d < directions; d++) {
    w.push(perDirection(wAll, d, k, inputSize));
    r.push(perDirection(rAll, d, k, hidden));
    const bd = b === undefined ? undefined : perDirection(b, d, 1, 2 * k);
    wb.push(bd === undefined ? undefined : reshapeTo(cx, slice(cx, bd, 1, 0, k), [k]));
    rb.push(bd === undefined ? undefined : reshapeTo(cx, slice(cx, bd, 1, k, 2 * k), [k]));
  }
  return {
    x,
    steps,
    batch,
    hidden,
    directions,
    w,
    r,
    wb,
    rb,
    h0: state(5, "initial_h"),
    c0: gates === 4 ? state(6, "initial_c") : [],
    layout,
    backward: directions === 2 ? [false, true] : [direction === "reverse"],
  };
}

/**
 * `x · Wᵀ + b` as `vm.op.linear`, which reads ONNX's `[k·hidden, size]`
 * weights as they are stored (no transpose per call) and adds the bias as
 * it stores the outputs.
 */
function linear(cx: NodeContext, x: Value, w: Value, b: Value | undefined): Value {
  const args = [cx.em.reg(x), cx.em.reg(w), ...(b === undefined ? [] : [cx.em.reg(b)])];
  return cx.em.call("vm.op.linear", args, "float32", [x.shape[0], w.shape[0]]);
}

/** Step `t`'s input `[batch, input]` (one step: the input itself, reshaped). */
function stepInput(cx: NodeContext, rc: Recurrence, t: number): Value {
  const xt = rc.steps === 1 ? rc.x : slice(cx, rc.x, 0, t, t + 1);
  return reshapeTo(cx, xt, [rc.batch, rc.x.shape[2]]);
}

/** `x_t · Wᵀ + Wb` for step `t` (the input's part of every gate at once), `[batch, k·hidden]`. */
function inputPart(cx: NodeContext, rc: Recurrence, d: number, t: number): Value {
  return linear(cx, stepInput(cx, rc, t), rc.w[d], rc.wb[d]);
}

/** Per recurrence, per direction: `[W | R]` and `Wb + Rb` made once at import, or null. */
const joinedWeights = new WeakMap<Recurrence, ({ w: Value; b?: Value } | null)[]>();

/**
 * Every gate's pre-activation `x_t · Wᵀ + Wb + h · Rᵀ + Rb` as one
 * `vm.op.linear` of `[x_t | h]` by `[W | R]` with the bias `Wb + Rb`, both
 * made at import, where the weights and biases are known then and `h` is a
 * tensor: one product whose weights stay sealed, in place of two and their
 * sum. Otherwise the two parts and their sum.
 */
function gatesPart(cx: NodeContext, rc: Recurrence, d: number, t: number, h: Value): Value {
  const joined = h.shape.length === 0 ? null : joinWeights(cx, rc, d);
  if (joined === null) {
    return binary(cx, "add", inputPart(cx, rc, d, t), statePart(cx, rc, d, h), FLOAT);
  }
  const xh = concatAlong(cx, [stepInput(cx, rc, t), h], 1);
  return linear(cx, xh, joined.w, joined.b);
}

function joinWeights(cx: NodeContext, rc: Recurrence, d: number): { w: Value; b?: Value } | null {
  const cache = joinedWeights.get(rc) ?? [];
  joinedWeights.set(rc, cache);
  if (cache[d] !== undefined) return cache[d];
  const wb = rc.wb[d], rb = rc.rb[d];
  // Constants only: a parameter (an initializer) may be replaced by `load_params` after import.
  const known = (v: Value | undefined) =>
    v === undefined || (v.tensor !== undefined && v.param === undefined);
  if (![rc.w[d], rc.r[d], wb, rb].every(known)) return cache[d] = null;
  const w = rc.w[d].tensor!, r = rc.r[d].tensor!;
  const [k, input] = w.shape, hidden = rc.hidden, wv = w.dataSync(), rv = r.dataSync();
  const data = new Float32Array(k * (input + hidden));
  for (let j = 0; j < k; j++) {
    data.set(wv.subarray(j * input, (j + 1) * input) as Float32Array, j * (input + hidden));
    data.set(
      rv.subarray(j * hidden, (j + 1) * hidden) as Float32Array,
      j * (input + hidden) + input,
    );
  }
  const made = (values: Float32Array, shape: number[]) => {
    const t = tensor(values, { shape });
    cx.made.push(t);
    return cx.fromTensor(t);
  };
  let b: Value | undefined;
  if (wb !== undefined || rb !== undefined) {
    const sum = new Float32Array(k);
    for (const v of [wb, rb]) {
      if (v === undefined) continue;
      const bv = v.tensor!.dataSync() as Float32Array;
      for (let j = 0; j < k; j++) sum[j] += bv[j];
    }
    b = made(sum, [k]);
  }
  return cache[d] = { w: made(data, [k, input + hidden]), b };
}

/**
 * `h · R + b`, `[batch, k·hidden]`; for a zero initial state (a 0-d zero,
 * as `recurrence` gives when it is absent) only the bias `[k·hidden]`, or 0.
 */
function statePart(cx: NodeContext, rc: Recurrence, d: number, h: Value): Value {
  if (h.shape.length === 0) return rc.rb[d] ?? h;
  return linear(cx, h, rc.r[d], rc.rb[d]);
}

/** Gate `g` of a `[batch, k·hidden]` product (or of a `[k·hidden]` bias; a 0-d zero is itself). */
function gate(cx: NodeContext, rc: Recurrence, v: Value, g: number): Value {
  if (v.shape.length === 0) return v;
  return slice(cx, v, v.shape.length - 1, g * rc.hidden, (g + 1) * rc.hidden);
}

/**
 * The outputs ONNX's recurrent operators give: Y `[seq, dirs, batch, hidden]`
 * of every step's hidden state, and the last (`Y_h`, and `Y_c` for LSTM)
 * `[dirs, batch, hidden]`, in `layout` 1 batch first.
 */
function outputs(cx: NodeContext, rc: Recurrence, hs: Value[][], last: Value[][]): Value[] {
  // Every step's state is [batch, hidden]: a step always adds the input's part, which is.
  const { batch, hidden } = rc;
  const rows = hs.map((perDir) =>
    concatOrSelf(cx, perDir.map((h) => reshapeTo(cx, h, [1, 1, batch, hidden])), 1)
  );
  let y = concatOrSelf(cx, rows, 0);
  let states = last.map((perDir) =>
    concatOrSelf(cx, perDir.map((h) => reshapeTo(cx, h, [1, batch, hidden])), 0)
  );
  if (rc.layout === 1) {
    y = transpose(cx, y, [2, 0, 1, 3]);
    states = states.map((s) => transpose(cx, s, [1, 0, 2]));
  }
  return [y, ...states];
}

/** One direction's steps, in order: `step(t, state)` gives the next state; returns each step's. */
function run<S>(rc: Recurrence, d: number, init: S, step: (t: number, s: S) => S): S[] {
  const out: S[] = [];
  let s = init;
  const order = [...Array(rc.steps).keys()];
  if (rc.backward[d]) order.reverse();
  for (const t of order) out[t] = s = step(t, s);
  return out;
}

/**
 * Every direction's steps from its initial state `init(d)`, then the
 * operator's outputs (`outputs`): `ends(state)` gives a step's states, the
 * hidden one first (`[h]`, or `[h, c]` for LSTM); each step's hidden state
 * goes to Y, each direction's last states to `Y_h` (and `Y_c`).
 */
function recurAll<S>(
  cx: NodeContext,
  rc: Recurrence,
  init: (d: number) => S,
  step: (d: number, t: number, s: S) => S,
  ends: (s: S) => Value[],
): Value[] {
  const hs: Value[][] = [...Array(rc.steps)].map(() => []);
  const last: Value[][] = [];
  for (let d = 0; d < rc.directions; d++) {
    const states = run(rc, d, init(d), (t, s) => step(d, t, s));
    states.forEach((s, t) => hs[t][d] = ends(s)[0]);
    ends(states[rc.backward[d] ? 0 : rc.steps - 1]).forEach((v, k) => (last[k] ??= [])[d] = v);
  }
  return outputs(cx, rc, hs, last);
}

/** The attributes LSTM, GRU and RNN all take (each adds its own). */
const RECURRENT_ATTRS = [
  "activation_alpha",
  "activation_beta",
  "activations",
  "clip",
  "direction",
  "hidden_size",
  "layout",
];

/** The recurrent operators by ONNX name. */
export const RECURRENT_OPS: Record<string, OpSpec> = {
  LSTM: {
    attrs: [...RECURRENT_ATTRS, "input_forget"],
    convert(cx) {
      if (cx.int("input_forget", 0) !== 0) throw new Unsupported("input_forget");
      const rc = recurrence(cx, 4, ["Sigmoid", "Tanh", "Tanh"]);
      return recurAll(cx, rc, (d) => [rc.h0[d], rc.c0[d]], (d, t, [h, c]) => {
        // Gates in ONNX's order: input, output, forget, cell.
        const g = gatesPart(cx, rc, d, t, h);
        const i = unary(cx, "sigmoid", gate(cx, rc, g, 0));
        const o = unary(cx, "sigmoid", gate(cx, rc, g, 1));
        const f = unary(cx, "sigmoid", gate(cx, rc, g, 2));
        const cell = unary(cx, "tanh", gate(cx, rc, g, 3));
        const c2 = add(cx, mul(cx, f, c), mul(cx, i, cell));
        return [mul(cx, o, unary(cx, "tanh", c2)), c2];
      }, (hc) => hc);
    },
  },
  GRU: {
    attrs: [...RECURRENT_ATTRS, "linear_before_reset"],
    convert(cx) {
      const rc = recurrence(cx, 3, ["Sigmoid", "Tanh"]);
      const lbr = cx.int("linear_before_reset", 0) !== 0;
      return recurAll(cx, rc, (d) => rc.h0[d], (d, t, h) => {
        // Gates in ONNX's order: update z, reset r, hidden h.
        const xw = inputPart(cx, rc, d, t);
        const hr = statePart(cx, rc, d, h);
        const z = unary(cx, "sigmoid", add(cx, gate(cx, rc, xw, 0), gate(cx, rc, hr, 0)));
        const r = unary(cx, "sigmoid", add(cx, gate(cx, rc, xw, 1), gate(cx, rc, hr, 1)));
        let hh: Value;
        if (lbr) {
          hh = mul(cx, r, gate(cx, rc, hr, 2));
        } else {
          // (r ⊙ h) · Rh + Rbh: the reset gate applies before the recurrence's product.
          // Rh: rows 2·hidden to 3·hidden of R as stored.
          const rh = slice(cx, rc.r[d], 0, 2 * rc.hidden, 3 * rc.hidden);
          hh = h.shape.length === 0 ? h : linear(cx, mul(cx, r, h), rh, undefined);
          const rb = rc.rb[d];
          if (rb !== undefined) hh = add(cx, hh, gate(cx, rc, rb, 2));
        }
        const cand = unary(cx, "tanh", add(cx, gate(cx, rc, xw, 2), hh));
        // h' = (1 − z) ⊙ ĥ + z ⊙ h
        return add(cx, mul(cx, sub(cx, cx.scalar(1), z), cand), mul(cx, z, h));
      }, (h) => [h]);
    },
  },
  RNN: {
    attrs: RECURRENT_ATTRS,
    convert(cx) {
      const rc = recurrence(cx, 1, ["Tanh"]);
      return recurAll(
        cx,
        rc,
        (d) => rc.h0[d],
        (d, t, h) => unary(cx, "tanh", add(cx, inputPart(cx, rc, d, t), statePart(cx, rc, d, h))),
        (h) => [h],
      );
    },
  },
};
