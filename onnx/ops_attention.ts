/**
 * ONNX's `Attention` (opset 23): spelled out with `vm.op.matmul`,
 * `vm.op.softmax` and friends as ONNX's reference does it
 * (onnx/reference/ops/op_attention.py): 3-D inputs split into heads, the
 * past keys and values concatenated in front (the present ones are outputs
 * too), grouped-query heads repeated, both operands scaled by `√scale`, the
 * mask (bool: kept or −∞; float: added; shorter than the keys: padded with
 * −∞), the causal triangle (offset by the past length) and the keys past
 * each batch's `nonpad_kv_seqlen` (−∞) added as a bias,
 * `softcap`, softmax over the keys, times the values. The shapes must be
 * known at import (the causal triangle is a constant). And `RotaryEmbedding`
 * (opset 23): the cos/sin caches gathered at the positions, the first
 * `rotary_embedding_dim` of each head rotated by halves or interleaved pairs.
 *
 * @module
 */

import { tensor } from "../devices/tensor.ts";
import { Unsupported, type Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";
import { FLOAT, type OpSpec } from "./op_spec.ts";
import { binary, unary } from "./ops_elementwise.ts";
import { reshapeTo } from "./ops_shape.ts";

function transpose(cx: NodeContext, x: Value, perm: number[]): Value {
  return cx.em.call("vm.op.transpose", [cx.em.reg(x), perm], x.dtype, perm.map((p) => x.shape[p]));
}

function concat(cx: NodeContext, xs: Value[], axis: number): Value {
  const shape = [...xs[0].shape];
  shape[axis] = xs.reduce((n, x) => n + (x.shape[axis] as number), 0);
  const tuple = cx.em.record("vm.builtin.make_tuple", xs.map((x) => cx.em.reg(x)))!;
  return cx.em.call("vm.op.concat", [tuple, cx.em.imm(axis)], xs[0].dtype, shape);
}

/** `[B, S, H·D]` → `[B, H, S, D]`. */
function heads(cx: NodeContext, x: Value, h: number): Value {
  const [b, s, hidden] = x.shape as number[];
  return transpose(cx, reshapeTo(cx, x, [b, s, h, hidden / h]), [0, 2, 1, 3]);
}

/** A float32 constant of `shape` from `data`. */
function constant(cx: NodeContext, data: number[], shape: number[]): Value {
  const t = tensor(new Float32Array(data), { shape });
  cx.made.push(t);
  return cx.fromTensor(t);
}

/** The Attention operator. */
export const ATTENTION_OPS: Record<string, OpSpec> = {
  Attention: {
    attrs: [
      "is_causal",
      "kv_num_heads",
      "q_num_heads",
      "qk_matmul_output_mode",
      "scale",
      "softcap",
      "softmax_precision",
    ],
    convert(cx) {
      let q = cx.input(0), k = cx.input(1), v = cx.input(2);
      const mask = cx.optional(3), pastK = cx.optional(4), pastV = cx.optional(5);
      const nonpad = cx.optional(6);
      for (const x of [q, k, v]) {
        cx.dtype(x, FLOAT);
        if (!x.shape.every((d) => typeof d === "number")) {
          throw new Unsupported("Attention of shapes not known at import");
        }
      }
      const threeD = q.shape.length === 3;
      if (threeD) {
        const qh = cx.int("q_num_heads", 0), kvh = cx.int("kv_num_heads", 0);
        if (qh <= 0 || kvh <= 0) {
          throw new Unsupported("3-D inputs without q_num_heads and kv_num_heads");
        }
        [q, k, v] = [heads(cx, q, qh), heads(cx, k, kvh), heads(cx, v, kvh)];
      }
      const hd = q.shape[3] as number;
      const scale = Math.sqrt(cx.has("scale") ? cx.float("scale", 1) : 1 / Math.sqrt(hd));
      const past = pastK === undefined ? 0 : pastK.shape[2] as number;
      if (pastK !== undefined) k = concat(cx, [pastK, k], 2);
      if (pastV !== undefined) v = concat(cx, [pastV, v], 2);
      const presentK = k, presentV = v;
      const [batch, qHeads, s] = q.shape as number[];
      const kvHeads = k.shape[1] as number, L = k.shape[2] as number;
      // Grouped-query attention: each key/value head serves qHeads / kvHeads query heads.
      if (qHeads !== kvHeads) {
        if (qHeads % kvHeads !== 0) throw new Unsupported(`${qHeads} query heads over ${kvHeads}`);
        const rep = qHeads / kvHeads;
        const repeat = (x: Value) => {
          const d = x.shape[3] as number;
          const one = reshapeTo(cx, x, [batch, kvHeads, 1, L, d]);
          return reshapeTo(cx, concat(cx, new Array(rep).fill(one), 2), [batch, qHeads, L, d]);
        };
        [k, v] = [repeat(k), repeat(v)];
      }
      const sq = cx.scalar(scale);
      const scores = cx.em.call(
        "vm.op.matmul",
        [
          cx.em.reg(binary(cx, "multiply", q, sq, FLOAT)),
          cx.em.reg(transpose(cx, binary(cx, "multiply", k, sq, FLOAT), [0, 1, 3, 2])),
        ],
        "float32",
        [batch, qHeads, s, L],
      );
      // The bias: the mask (bool → 0 or −∞, padded with −∞ to L keys) plus the causal triangle.
      let biased = scores;
      if (mask !== undefined) {
        let m = mask;
        if (m.dtype === "bool") {
          m = cx.em.call(
            "vm.op.where",
            [cx.em.reg(m), cx.em.reg(cx.scalar(0)), cx.em.reg(cx.scalar(-Infinity))],
            "float32",
            m.shape,
          );
        } else cx.dtype(m, FLOAT, "attn_mask");
        const short = L - (m.shape[m.shape.length - 1] as number);
        if (short > 0) {
          const padShape = [...m.shape.slice(0, -1), short] as number[];
          const n = padShape.reduce((a, b) => a * b, 1);
          m = concat(
            cx,
            [m, constant(cx, new Array(n).fill(-Infinity), padShape)],
            m.shape.length - 1,
          );
        }
        biased = binary(cx, "add", biased, m, FLOAT);
      }
      if (cx.int("is_causal", 0) === 1) {
        const tri = Array.from(
          { length: s * L },
          (_, i) => (i % L) - past > Math.floor(i / L) ? -Infinity : 0,
        );
        biased = binary(cx, "add", biased, constant(cx, tri, [s, L]), FLOAT);
      }
      if (nonpad !== undefined) {
        // Keys at or past each batch's nonpad_kv_seqlen are padding: −∞ in the bias.
        if (nonpad.shape.length !== 1) throw new Unsupported("nonpad_kv_seqlen not of rank 1");
        const lengths = reshapeTo(
          cx,
          cx.em.call("vm.op.cast", [cx.em.reg(nonpad), "float32"], "float32", nonpad.shape),
          [batch, 1, 1, 1],
        );
        const positions = constant(cx, Array.from({ length: L }, (_, i) => i), [L]);
        const kept = cx.em.call(
          "vm.op.less",
          [cx.em.reg(positions), cx.em.reg(lengths)],
          "bool",
          [batch, 1, 1, L],
        );
        const padding = cx.em.call(
          "vm.op.where",
          [cx.em.reg(kept), cx.em.reg(cx.scalar(0)), cx.em.reg(cx.scalar(-Infinity))],
          "float32",
          [batch, 1, 1, L],
        );
        biased = binary(cx, "add", biased, padding, FLOAT);
      }
      const mode = cx.int("qk_matmul_output_mode", 0);
      let qkOut = mode === 0 ? scores : biased;
      const softcap = cx.float("softcap", 0);
      if (softcap > 0) {
        const c = cx.scalar(softcap);
        biased = binary(
          cx,
          "multiply",
          unary(cx, "tanh", binary(cx, "divide", biased, c, FLOAT)),
          c,
          FLOAT,
        );
        if (mode === 2) qkOut = biased;
      }
      const probs = unary(cx, "softmax", biased);
      if (mode === 3) qkOut = probs;
      let y = cx.em.call("vm.op.matmul", [cx.em.reg(probs), cx.em.reg(v)], "float32", [
        batch,
        qHeads,
        s,
        v.shape[3],
      ]);
      if (threeD) {
        y = reshapeTo(cx, transpose(cx, y, [0, 2, 1, 3]), [
          batch,
          s,
          qHeads * (v.shape[3] as number),
        ]);
      }
      return [y, presentK, presentV, qkOut];
    },
  },
};

function slice(
  cx: NodeContext,
  x: Value,
  axis: number,
  begin: number,
  end: number,
  step = 1,
): Value {
  const shape = [...x.shape];
  shape[axis] = Math.ceil((end - begin) / step);
  return cx.em.call(
    "vm.op.strided_slice",
    [cx.em.reg(x), [axis], [begin], [end], [step]],
    x.dtype,
    shape,
  );
}

/** ONNX's `RotaryEmbedding` (opset 23), as its reference computes it. */
export const ROTARY_OPS: Record<string, OpSpec> = {
  RotaryEmbedding: {
    attrs: ["interleaved", "num_heads", "rotary_embedding_dim"],
    convert(cx) {
      let x = cx.input(0);
      let cos = cx.input(1), sin = cx.input(2);
      const positions = cx.optional(3);
      cx.dtype(x, FLOAT);
      if (!x.shape.every((d) => typeof d === "number")) {
        throw new Unsupported("RotaryEmbedding of a shape not known at import");
      }
      const original = x.shape as number[];
      // [B, S, H, D]: 4-D inputs are [B, H, S, D]; 3-D ones [B, S, H·D].
      if (original.length === 4) x = transpose(cx, x, [0, 2, 1, 3]);
      else {
        const h = cx.int("num_heads", 0);
        if (h <= 0) throw new Unsupported("3-D input without num_heads");
        x = reshapeTo(cx, x, [original[0], original[1], h, original[2] / h]);
      }
      const [b, s, h, d] = x.shape as number[];
      const rot = cx.int("rotary_embedding_dim", 0) || d, half = rot / 2;
      if (positions !== undefined) {
        const take = (c: Value) =>
          cx.em.call("vm.op.take", [cx.em.reg(c), cx.em.reg(positions), cx.em.imm(0)], c.dtype, [
            ...positions.shape,
            half,
          ]);
        [cos, sin] = [take(cos), take(sin)];
      }
      [cos, sin] = [cos, sin].map((c) => reshapeTo(cx, c, [b, s, 1, half]));
      const rotate = rot === d ? x : slice(cx, x, 3, 0, rot);
      const interleaved = cx.int("interleaved", 0) === 1;
      const x1 = interleaved ? slice(cx, rotate, 3, 0, rot, 2) : slice(cx, rotate, 3, 0, half);
      const x2 = interleaved ? slice(cx, rotate, 3, 1, rot, 2) : slice(cx, rotate, 3, half, rot);
      const mul = (a: Value, c: Value) => binary(cx, "multiply", a, c, FLOAT);
      const real = binary(cx, "subtract", mul(cos, x1), mul(sin, x2), FLOAT);
      const imag = binary(cx, "add", mul(sin, x1), mul(cos, x2), FLOAT);
      let rotated: Value;
      if (interleaved) {
        const pairs = concat(cx, [
          reshapeTo(cx, real, [b, s, h, half, 1]),
          reshapeTo(cx, imag, [b, s, h, half, 1]),
        ], 4);
        rotated = reshapeTo(cx, pairs, [b, s, h, rot]);
      } else rotated = concat(cx, [real, imag], 3);
      let y = rot === d ? rotated : concat(cx, [rotated, slice(cx, x, 3, rot, d)], 3);
      y = original.length === 4 ? transpose(cx, y, [0, 2, 1, 3]) : reshapeTo(cx, y, original);
      return [y];
    },
  },
};
