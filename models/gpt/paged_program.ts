/**
 * The GPT of program.ts over a paged KV cache: one call runs a batch of sequences of
 * any lengths (prefill chunks and decodes together), as MLC LLM's `batch_prefill` /
 * `batch_decode` do. `buildPagedGPT(config)` returns one executable with:
 *
 * | function | arguments → result |
 * | --- | --- |
 * | `load_params` | `(url, device_type, device_id)` → the parameter tuple (as program.ts) |
 * | `batch_forward` | `(tokens: int32[T], cache, params, last_rows: int32[B], positions: int32[T])` → `logits[B, vocab]`: the `T` tokens of the forward the host began on `cache` (`kv_state_begin_forward(cache, ids, lengths)`, sequence after sequence) at their positions in their sequences (`attention_kv_cache_get_query_positions`, on the model's device); the logits of the rows `last_rows` (each sequence's last token) |
 * | `paged_block` | the shared body of one layer |
 *
 * What changes from program.ts is the attention: the block concatenates q, k and v
 * into one `[T, 3H, Dh]` tensor and calls `vm.op.paged_attention(cache, layer, scale,
 * qkv)`, which appends k and v to the layer's pages and attends each token to its own
 * sequence; and the position embedding rows are each token's position in its own
 * sequence (what the cache's `attention_kv_cache_get_query_positions` returns; the host
 * passes them on the model's device, as it does the tokens) instead of one
 * `[past, past + n)` range. The host drives the cache with TVM's
 * global functions (models/gpt/paged_session.ts).
 *
 * @module
 */

import {
  ExecBuilder,
  type Executable,
  MakeShapeCode,
  MatchShapeCode,
  type Operand,
} from "../../mod.ts";
import { type GPTConfig, headSize } from "./config.ts";
import { BlockParam, layerBase, PARAM_PREFIX, PARAMS_PER_LAYER, paramSpecs } from "./weights.ts";

const { StoreToHeap: STORE_TO_HEAP } = MatchShapeCode;
const { LoadShape: LOAD_SHAPE } = MakeShapeCode;

/** Slot of the shape heap holding `T`, the tokens of the forward. */
const N = 0;

/**
 * Builds the paged decoder for `c` as one executable (its weights are program.ts's, in
 * the same tensor cache format).
 */
export function buildPagedGPT(c: GPTConfig): Executable {
  const ib = new ExecBuilder();
  const H = c.heads, Dh = headSize(c), D = c.dModel;
  const eps = ib.convert_constant(c.eps);
  const paramCount = paramSpecs(c).length;
  const lnF = paramCount - 2;
  let next = 0;
  const fresh = (): Operand => ib.r(next++);
  const call = (name: string, args: Parameters<ExecBuilder["emit_call"]>[1]) => {
    const dst = fresh();
    ib.emit_call(name, args, { dst });
    return dst;
  };
  const tokensBy = (heap: Operand, ...dims: number[]) =>
    call("vm.builtin.make_shape", [
      heap,
      ib.imm(1 + dims.length),
      ib.imm(LOAD_SHAPE),
      ib.imm(N),
      ...dims.flatMap((d) => [ib.imm(MakeShapeCode.UseImm), ib.imm(d)]),
    ]);

  ib.function(
    "load_params",
    { num_inputs: 3, param_names: ["url", "device_type", "device_id"] },
    () => {
      next = 3;
      ib.emit_call("vm.builtin.tensor_cache.load", [ib.r(0), ib.r(1), ib.r(2)]);
      ib.emit_ret(call("vm.builtin.param_array_from_cache", [PARAM_PREFIX, ib.imm(paramCount)]));
    },
  );

  // paged_block(x[T, D], cache, layer, heap, 16 weights) -> x[T, D]
  ib.function("paged_block", { num_inputs: 4 + PARAMS_PER_LAYER }, () => {
    next = 4 + PARAMS_PER_LAYER;
    const [x, cache, layer, heap] = [ib.r(0), ib.r(1), ib.r(2), ib.r(3)];
    const p = (i: number) => ib.r(4 + i);
    const heads = tokensBy(heap, H, Dh);
    const flat = tokensBy(heap, D);
    const h = call("vm.op.layer_norm", [x, p(BlockParam.ln1Gamma), p(BlockParam.ln1Beta), eps]);
    const project = (w: number, b: number) =>
      call("vm.builtin.reshape", [call("vm.op.linear", [h, p(w), p(b)]), heads]);
    const q = project(BlockParam.wq, BlockParam.bq);
    const k = project(BlockParam.wk, BlockParam.bk);
    const v = project(BlockParam.wv, BlockParam.bv);
    const qkv = call("vm.op.concat", [call("vm.builtin.make_tuple", [q, k, v]), ib.imm(1)]);
    const attended = call("vm.op.paged_attention", [
      cache,
      layer,
      ib.convert_constant(1 / Math.sqrt(Dh)),
      qkv,
    ]);
    const merged = call("vm.builtin.reshape", [attended, flat]);
    const projected = call("vm.op.linear", [merged, p(BlockParam.wo), p(BlockParam.bo)]);
    const x1 = call("vm.op.add", [x, projected]);
    const h2 = call("vm.op.layer_norm", [x1, p(BlockParam.ln2Gamma), p(BlockParam.ln2Beta), eps]);
    const up = call("vm.op.linear", [h2, p(BlockParam.wFc), p(BlockParam.bFc)]);
    const down = call("vm.op.linear", [
      call("vm.op.gelu", [up]),
      p(BlockParam.wProj),
      p(BlockParam.bProj),
    ]);
    ib.emit_ret(call("vm.op.add", [x1, down]));
  });

  // batch_forward(tokens[T], cache, params, last_rows[B], positions[T]) -> logits[B, vocab]
  ib.function("batch_forward", {
    num_inputs: 5,
    param_names: ["tokens", "cache", "params", "last_rows", "positions"],
  }, () => {
    next = 5;
    const [tokens, cache, params, lastRows, positions] = [0, 1, 2, 3, 4].map((i) => ib.r(i));
    const heap = call("vm.builtin.alloc_shape_heap", [ib.imm(1)]);
    ib.emit_call("vm.builtin.match_shape", [
      tokens,
      heap,
      ib.imm(1),
      ib.imm(STORE_TO_HEAP),
      ib.imm(N),
      "batch_forward: tokens",
    ]);
    const param = (i: number) => call("vm.builtin.tuple_getitem", [params, ib.imm(i)]);
    const wte = param(0), wpe = param(1);
    // Each token's position in its own sequence picks its position embedding row.
    const positionRows = call("vm.op.take", [wpe, positions, ib.imm(0)]);
    let x = call("vm.op.add", [call("vm.op.take", [wte, tokens, ib.imm(0)]), positionRows]);
    for (let l = 0; l < c.layers; l++) {
      const weights = Array.from({ length: PARAMS_PER_LAYER }, (_, j) => param(layerBase(l) + j));
      x = call("paged_block", [x, cache, ib.imm(l), heap, ...weights]);
    }
    // Only each sequence's last row needs logits.
    const last = call("vm.op.take", [x, lastRows, ib.imm(0)]);
    const h = call("vm.op.layer_norm", [last, param(lnF), param(lnF + 1), eps]);
    ib.emit_ret(call("vm.op.linear", [h, wte]));
  });

  return ib.get();
}
