/**
 * all-MiniLM-L6-v2 as a Relax VM program, written with `ExecBuilder`.
 * `buildMiniLM()` returns one executable with these functions:
 *
 * | function | arguments → result |
 * | --- | --- |
 * | `load_params` | `(url, device_type, device_id)` → the parameter tuple, from a tensor cache (`vm.builtin.tensor_cache.load`, then `param_array_from_cache`) |
 * | `embed` | `(ids: int32[B, S], mask: int32[B, S], params)` → `float32[B, 384]`: one unit-length sentence embedding per row |
 * | `layer` | one encoder layer, called six times by `embed` |
 *
 * The model is BERT's encoder: word + position + token-type (type 0)
 * embeddings and a layer norm, then per layer (multi-head self-attention →
 * output projection → residual → layer norm → linear → GELU → linear →
 * residual → layer norm), then sentence-transformers' head: the mean of
 * the token states where `mask` is 1, divided by its L2 norm.
 *
 * Any batch size `B` and sequence length `S` run through one executable:
 * both are matched from `ids` into the shape heap and every shape built
 * from them with `make_shape`. Rows shorter than `S` are padded (any id,
 * mask 0): attention adds `(mask − 1) · 10³⁰` to the scores of padded keys,
 * so they get no weight, and pooling counts only unmasked tokens, as the
 * reference implementation does. Attention is written with matmul and
 * softmax (`vm.op.attention` has no mask argument): scores are
 * `[B, H, S, S]`.
 *
 * @module
 */

import {
  dtype,
  ExecBuilder,
  type Executable,
  MakeShapeCode,
  MatchShapeCode,
  type Operand,
  shape,
  tensor,
} from "../../mod.ts";
import { MINILM_L6, type MiniLMConfig } from "./config.ts";
import {
  EmbeddingParam,
  layerBase,
  LayerParam,
  MINILM_PARAM_NAMES,
  MINILM_PARAM_PREFIX,
  PARAMS_PER_LAYER,
} from "./weights.ts";

const { StoreToHeap: STORE_TO_HEAP, AssertEqualToLoad: ASSERT_EQUAL_TO_LOAD } = MatchShapeCode;
const { UseImm: USE_IMM, LoadShape: LOAD_SHAPE } = MakeShapeCode;

/** Slots of the shape heap: the batch size and the sequence length. */
const Slot = { B: 0, S: 1 } as const;
const HEAP_SIZE = 2;

/** The additive mask of padded keys: large enough that exp() of it is 0 after softmax. */
const MASKED = 1e30;

/** Builds the encoder for `c` (default all-MiniLM-L6-v2) as one executable. */
export function buildMiniLM(c: MiniLMConfig = MINILM_L6): Executable {
  const ib = new ExecBuilder();
  const H = c.heads, D = c.hidden, Dh = D / c.heads;
  const eps = ib.convert_constant(c.eps);
  const f32 = dtype("float32");
  const made: { dispose(): void }[] = [];
  /** A float32 0-d constant (the constant pool keeps its own reference). */
  const scalar = (x: number) => {
    const t = tensor(new Float32Array([x]), { shape: [] });
    made.push(t);
    return t;
  };
  const paramCount = MINILM_PARAM_NAMES.length;

  let next = 0;
  /** `call name(args) → fresh register`. */
  const call = (name: string, args: Parameters<ExecBuilder["emit_call"]>[1]) => {
    const dst = ib.r(next++);
    ib.emit_call(name, args, { dst });
    return dst;
  };
  /** A shape from heap slots and immediates: numbers are immediates, strings name a slot. */
  const makeShape = (heap: Operand, dims: (number | keyof typeof Slot)[]) =>
    call("vm.builtin.make_shape", [
      heap,
      ib.imm(dims.length),
      ...dims.flatMap((d) =>
        typeof d === "number" ? [ib.imm(USE_IMM), ib.imm(d)] : [ib.imm(LOAD_SHAPE), ib.imm(Slot[d])]
      ),
    ]);

  ib.function(
    "load_params",
    { num_inputs: 3, param_names: ["url", "device_type", "device_id"] },
    () => {
      next = 3;
      ib.emit_call("vm.builtin.tensor_cache.load", [ib.r(0), ib.r(1), ib.r(2)]);
      ib.emit_ret(
        call("vm.builtin.param_array_from_cache", [MINILM_PARAM_PREFIX, ib.imm(paramCount)]),
      );
    },
  );

  // layer(x[B, S, D], mask_bias[B, 1, 1, S], heap, 16 weights) -> x[B, S, D]
  ib.function("layer", { num_inputs: 3 + PARAMS_PER_LAYER }, () => {
    next = 3 + PARAMS_PER_LAYER;
    const [x, maskBias, heap] = [ib.r(0), ib.r(1), ib.r(2)];
    const p = (i: number) => ib.r(3 + i);
    const split = makeShape(heap, ["B", "S", H, Dh]);
    const merged = makeShape(heap, ["B", "S", D]);
    // [B, S, D] -> [B, H, S, Dh] (or [B, H, Dh, S] for the keys, ready for q kᵀ).
    const heads = (w: number, b: number, axes: number[]) =>
      call("vm.op.transpose", [
        call("vm.builtin.reshape", [call("vm.op.linear", [x, p(w), p(b)]), split]),
        shape(...axes),
      ]);
    const q = heads(LayerParam.wq, LayerParam.bq, [0, 2, 1, 3]);
    const kT = heads(LayerParam.wk, LayerParam.bk, [0, 2, 3, 1]);
    const v = heads(LayerParam.wv, LayerParam.bv, [0, 2, 1, 3]);
    const scores = call("vm.op.multiply", [
      call("vm.op.matmul", [q, kT]),
      scalar(1 / Math.sqrt(Dh)),
    ]);
    const weights = call("vm.op.softmax", [call("vm.op.add", [scores, maskBias])]);
    const context = call("vm.op.transpose", [
      call("vm.op.matmul", [weights, v]),
      shape(0, 2, 1, 3),
    ]);
    const attended = call("vm.op.linear", [
      call("vm.builtin.reshape", [context, merged]),
      p(LayerParam.wo),
      p(LayerParam.bo),
    ]);
    const x1 = call("vm.op.layer_norm", [
      call("vm.op.add", [attended, x]),
      p(LayerParam.ln1Gamma),
      p(LayerParam.ln1Beta),
      eps,
    ]);
    const up = call("vm.op.gelu", [
      call("vm.op.linear", [x1, p(LayerParam.wUp), p(LayerParam.bUp)]),
    ]);
    const down = call("vm.op.linear", [up, p(LayerParam.wDown), p(LayerParam.bDown)]);
    ib.emit_ret(
      call("vm.op.layer_norm", [
        call("vm.op.add", [down, x1]),
        p(LayerParam.ln2Gamma),
        p(LayerParam.ln2Beta),
        eps,
      ]),
    );
  });

  // embed(ids[B, S], mask[B, S], params) -> embeddings[B, D]
  ib.function("embed", { num_inputs: 3, param_names: ["ids", "mask", "params"] }, () => {
    next = 3;
    const [ids, mask, params] = [ib.r(0), ib.r(1), ib.r(2)];
    const param = (i: number) => call("vm.builtin.tuple_getitem", [params, ib.imm(i)]);
    const heap = call("vm.builtin.alloc_shape_heap", [ib.imm(HEAP_SIZE)]);
    ib.emit_call("vm.builtin.match_shape", [
      ids,
      heap,
      ib.imm(2),
      ib.imm(STORE_TO_HEAP),
      ib.imm(Slot.B),
      ib.imm(STORE_TO_HEAP),
      ib.imm(Slot.S),
      "embed: ids",
    ]);
    ib.emit_call("vm.builtin.match_shape", [
      mask,
      heap,
      ib.imm(2),
      ib.imm(ASSERT_EQUAL_TO_LOAD),
      ib.imm(Slot.B),
      ib.imm(ASSERT_EQUAL_TO_LOAD),
      ib.imm(Slot.S),
      "embed: mask (the shape of ids)",
    ]);

    // Embeddings: word rows + position rows [0, S) + the token-type-0 row, then a layer norm.
    const words = call("vm.op.take", [param(EmbeddingParam.word), ids, ib.imm(0)]); // [B, S, D]
    const positions = call("vm.op.strided_slice", [
      param(EmbeddingParam.position),
      shape(0),
      shape(0),
      makeShape(heap, ["S"]),
    ]);
    const type0 = call("vm.op.strided_slice", [
      param(EmbeddingParam.tokenType),
      shape(0),
      shape(0),
      shape(1),
    ]);
    let x = call("vm.op.layer_norm", [
      call("vm.op.add", [call("vm.op.add", [words, positions]), type0]),
      param(EmbeddingParam.lnGamma),
      param(EmbeddingParam.lnBeta),
      eps,
    ]);

    // mask as float32; the attention bias (mask - 1) * 1e30, [B, 1, 1, S].
    const m = call("vm.op.cast", [mask, f32]);
    const bias = call("vm.op.multiply", [
      call("vm.op.subtract", [m, scalar(1)]),
      scalar(MASKED),
    ]);
    const maskBias = call("vm.builtin.reshape", [bias, makeShape(heap, ["B", 1, 1, "S"])]);

    for (let l = 0; l < c.layers; l++) {
      const weights = Array.from({ length: PARAMS_PER_LAYER }, (_, j) => param(layerBase(l) + j));
      x = call("layer", [x, maskBias, heap, ...weights]);
    }

    // Mean pooling over unmasked tokens (sentence-transformers clamps the count at 1e-9),
    // then x / max(‖x‖, 1e-12) (torch.nn.functional.normalize).
    const m3 = call("vm.builtin.reshape", [m, makeShape(heap, ["B", "S", 1])]);
    const summed = call("vm.op.sum", [call("vm.op.multiply", [x, m3]), shape(1)]); // [B, D]
    const count = call("vm.op.maximum", [
      call("vm.op.sum", [m, shape(1), ib.imm(1)]),
      scalar(1e-9),
    ]); // [B, 1]
    const mean = call("vm.op.divide", [summed, count]);
    const norm = call("vm.op.maximum", [
      call("vm.op.sqrt", [
        call("vm.op.sum", [call("vm.op.multiply", [mean, mean]), shape(1), ib.imm(1)]),
      ]),
      scalar(1e-12),
    ]);
    ib.emit_ret(call("vm.op.divide", [mean, norm]));
  });

  try {
    return ib.get();
  } finally {
    for (const t of made) t.dispose();
  }
}
