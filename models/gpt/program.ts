/**
 * The GPT-2-style decoder as a Relax VM program, written with `ExecBuilder`
 * as a guide to writing models with the DSL. `buildGPT(config)` returns one
 * executable with these functions:
 *
 * | function | arguments → result |
 * | --- | --- |
 * | `load_params` | `(url, device_type, device_id)` → the parameter tuple: loads a tensor cache onto the device and gathers its tensors with `param_array_from_cache` |
 * | `create_kv_caches` | `()` → a tuple of `2 × layers` empty KV caches (keys, values per layer) with room for the whole context |
 * | `prefill` | `(tokens: int32[n], caches, params)` → `(logits[1, vocab], caches)`: runs `n` tokens, any `n`, after those already cached |
 * | `decode` | `(token: int32[1], caches, params)` → `(logits[1, vocab], caches)`: one more token |
 * | `decode_n` | `(token: int32[1], caches, params, uniforms: float32[N], temperature, top_p)` → `(ids: int32[N], caches)`: generates N tokens in one call, sampling on the device (greedy when `temperature` is 0) and feeding each token to the next step |
 * | `forward`, `block` | the shared body: embeddings, then one `block` call per layer, then the last position's logits |
 *
 * The model (`forward`): token embedding + learned position embedding,
 * `layers` blocks of (layer norm → causal multi-head self-attention over the
 * KV cache → residual → layer norm → MLP with GELU → residual), a final layer
 * norm, and the logits of the last position through the token embedding
 * (tied weights, `vm.op.linear(x, wte)`).
 *
 * How the program uses the VM, in the order a reader meets it:
 *
 * - **Parameters** arrive as one tuple (`param_array_from_cache`); a block's
 *   sixteen weights are picked out with `vm.builtin.tuple_getitem` and passed
 *   to the `block` function.
 * - **Dynamic shapes**: `n` (tokens in this call) is matched into the shape
 *   heap with `vm.builtin.match_shape`; so is the number of cached tokens,
 *   from the shape of a KV cache view. Every shape that depends on them
 *   (heads `[n, H, Dh]`, the position rows `[past, past + n)`) is built with
 *   `vm.builtin.make_shape` from heap slots. Integer arithmetic on the heap
 *   (`past + n`) goes through prim values (`make_prim_value` reads a slot,
 *   `match_prim_value` stores one) and a packed function, `gpt.add`: TVM
 *   compiles such arithmetic into a shape function; here it is registered by
 *   `registerGPTFunctions()`.
 * - **KV caches** are TVM's `attention_kv_cache_*` objects: `append` writes
 *   this call's keys and values after the cached rows (on the device, no
 *   read back), `view` returns the rows so far as `[tokens, heads, head
 *   size]`, which `vm.op.attention` reads directly in its `"BSHD"` layout.
 * - **Memory**: every operator output comes from the VM's pooled allocator,
 *   and liveness releases each register after its last use, so a block's
 *   intermediates are reused by the next block. The caches' initial rows are
 *   one tensor placed with `alloc_storage` / `alloc_tensor`.
 * - **Control flow**: `decode_n` loops with `If` and `Goto` on a counter in
 *   a register; the sampled token stays on the device and is the next
 *   step's input, so N tokens cost one wait when the host reads the ids.
 *
 * @module
 */

import {
  dtype,
  ExecBuilder,
  type Executable,
  getGlobalFunc,
  MakeShapeCode,
  MatchShapeCode,
  type Operand,
  registerFunc,
  shape,
  tensor,
} from "../../mod.ts";
import { type GPTConfig, headSize } from "./config.ts";
import { BlockParam, layerBase, PARAM_PREFIX, PARAMS_PER_LAYER, paramSpecs } from "./weights.ts";

// Codes of vm.builtin.match_shape / match_prim_value and make_shape / make_prim_value
// (TVM's conventions).
const { AssertEqualToImm: ASSERT_EQUAL_TO_IMM, StoreToHeap: STORE_TO_HEAP } = MatchShapeCode;
const { UseImm: USE_IMM, LoadShape: LOAD_SHAPE } = MakeShapeCode;

/** Slots of the shape heap. */
const Slot = {
  /** Tokens in this call. */
  N: 0,
  /** Tokens already in the KV caches. */
  PAST: 1,
  /** `PAST + N`. */
  TOTAL: 2,
  /** `decode_n`: tokens to generate. */
  STEPS: 3,
  /** `decode_n`: the step being run, and the one after it. */
  STEP: 4,
  NEXT: 5,
} as const;
const HEAP_SIZE = 6;

/**
 * Registers the packed functions the program calls besides relaxvm's
 * builtins: integer addition and comparison of prim values, what TVM would
 * compile into the model's shape functions. Safe to call more than once.
 */
export function registerGPTFunctions(): void {
  if (getGlobalFunc("gpt.add") !== undefined) return;
  registerFunc("gpt.add", (a: unknown, b: unknown) => (a as number) + (b as number));
  registerFunc("gpt.less", (a: unknown, b: unknown) => (a as number) < (b as number));
}

/** Hands out fresh registers, so the code below never reuses one by accident. */
class Registers {
  #next: number;
  readonly #ib: ExecBuilder;
  constructor(ib: ExecBuilder, first: number) {
    this.#ib = ib;
    this.#next = first;
  }
  /** A register not used before in this function. */
  fresh(): Operand {
    return this.#ib.r(this.#next++);
  }
}

/**
 * Builds the decoder for `c` as one executable. Registers the program's
 * packed functions (`registerGPTFunctions`) too, since a VM loading the
 * executable resolves them by name.
 */
export function buildGPT(c: GPTConfig): Executable {
  registerGPTFunctions();
  const ib = new ExecBuilder();
  const H = c.heads, Dh = headSize(c), D = c.dModel;
  const f32 = dtype("float32");
  const eps = ib.convert_constant(c.eps);
  const paramCount = paramSpecs(c).length;
  const lnF = paramCount - 2; // the final layer norm's gamma; beta follows

  /** `call name(args) → fresh register`. */
  const call = (regs: Registers, name: string, args: Parameters<ExecBuilder["emit_call"]>[1]) => {
    const dst = regs.fresh();
    ib.emit_call(name, args, { dst });
    return dst;
  };
  /** A shape from heap slots and immediates: numbers are immediates, `{ slot }` loads one. */
  const makeShape = (regs: Registers, heap: Operand, dims: (number | { slot: number })[]) =>
    call(regs, "vm.builtin.make_shape", [
      heap,
      ib.imm(dims.length),
      ...dims.flatMap((d) =>
        typeof d === "number" ? [ib.imm(USE_IMM), ib.imm(d)] : [ib.imm(LOAD_SHAPE), ib.imm(d.slot)]
      ),
    ]);
  /** `heap[dst] = heap[a] + heap[b]`, through prim values and `gpt.add`. */
  const heapAdd = (regs: Registers, heap: Operand, dst: number, a: number, b: number) => {
    const x = call(regs, "vm.builtin.make_prim_value", [heap, ib.imm(LOAD_SHAPE), ib.imm(a)]);
    const y = call(regs, "vm.builtin.make_prim_value", [heap, ib.imm(LOAD_SHAPE), ib.imm(b)]);
    const sum = call(regs, "gpt.add", [x, y]);
    ib.emit_call("vm.builtin.match_prim_value", [sum, heap, ib.imm(STORE_TO_HEAP), ib.imm(dst)]);
  };

  // load_params(url, device_type, device_id) -> params
  ib.function(
    "load_params",
    { num_inputs: 3, param_names: ["url", "device_type", "device_id"] },
    () => {
      const regs = new Registers(ib, 3);
      ib.emit_call("vm.builtin.tensor_cache.load", [ib.r(0), ib.r(1), ib.r(2)]);
      const params = call(regs, "vm.builtin.param_array_from_cache", [
        PARAM_PREFIX,
        ib.imm(paramCount),
      ]);
      ib.emit_ret(params);
    },
  );

  // create_kv_caches() -> (k_0, v_0, k_1, v_1, ...), each [context, H, Dh], empty.
  ib.function("create_kv_caches", { num_inputs: 0 }, () => {
    const regs = new Registers(ib, 0);
    // One row of zeros gives every cache its dtype, device and row shape; it is placed
    // in a storage of its own with alloc_storage / alloc_tensor (device 0: the VM's).
    const storage = call(regs, "vm.builtin.alloc_storage", [
      ib.vm_state(),
      shape(1, H, Dh),
      ib.imm(0),
      f32,
      "global",
    ]);
    const init = call(regs, "vm.builtin.alloc_tensor", [storage, ib.imm(0), shape(1, H, Dh), f32]);
    const caches: Operand[] = [];
    for (let i = 0; i < 2 * c.layers; i++) {
      caches.push(
        call(regs, "vm.builtin.attention_kv_cache_create", [
          init,
          shape(c.context, H, Dh),
          ib.imm(0),
        ]),
      );
    }
    ib.emit_ret(call(regs, "vm.builtin.make_tuple", caches));
  });

  // block(x[n, D], k_cache, v_cache, heap, 16 weights) -> x[n, D]
  ib.function("block", { num_inputs: 4 + PARAMS_PER_LAYER }, () => {
    const regs = new Registers(ib, 4 + PARAMS_PER_LAYER);
    const [x, kCache, vCache, heap] = [ib.r(0), ib.r(1), ib.r(2), ib.r(3)];
    const p = (i: number) => ib.r(4 + i);
    const heads = makeShape(regs, heap, [{ slot: Slot.N }, H, Dh]); // [n, H, Dh]
    const flat = makeShape(regs, heap, [{ slot: Slot.N }, D]); // [n, D]

    // Attention: project, append keys and values to the caches, attend over all cached rows.
    const h = call(regs, "vm.op.layer_norm", [
      x,
      p(BlockParam.ln1Gamma),
      p(BlockParam.ln1Beta),
      eps,
    ]);
    const project = (w: number, b: number) =>
      call(regs, "vm.builtin.reshape", [call(regs, "vm.op.linear", [h, p(w), p(b)]), heads]);
    const q = project(BlockParam.wq, BlockParam.bq);
    const k = project(BlockParam.wk, BlockParam.bk);
    const v = project(BlockParam.wv, BlockParam.bv);
    ib.emit_call("vm.builtin.attention_kv_cache_append", [kCache, k]);
    ib.emit_call("vm.builtin.attention_kv_cache_append", [vCache, v]);
    const keys = call(regs, "vm.builtin.attention_kv_cache_view", [kCache]); // [past + n, H, Dh]
    const values = call(regs, "vm.builtin.attention_kv_cache_view", [vCache]);
    const attended = call(regs, "vm.op.attention", [
      q,
      keys,
      values,
      ib.imm(1), // causal, aligned bottom-right: query i sees the cache and itself
      ib.convert_constant(1 / Math.sqrt(Dh)),
      "BSHD",
    ]);
    const merged = call(regs, "vm.builtin.reshape", [attended, flat]);
    const projected = call(regs, "vm.op.linear", [merged, p(BlockParam.wo), p(BlockParam.bo)]);
    const x1 = call(regs, "vm.op.add", [x, projected]);

    // MLP.
    const h2 = call(regs, "vm.op.layer_norm", [
      x1,
      p(BlockParam.ln2Gamma),
      p(BlockParam.ln2Beta),
      eps,
    ]);
    const up = call(regs, "vm.op.linear", [h2, p(BlockParam.wFc), p(BlockParam.bFc)]);
    const act = call(regs, "vm.op.gelu", [up]);
    const down = call(regs, "vm.op.linear", [act, p(BlockParam.wProj), p(BlockParam.bProj)]);
    ib.emit_ret(call(regs, "vm.op.add", [x1, down]));
  });

  // forward(tokens[n], caches, params, heap) -> logits[1, vocab]; heap[N] holds n.
  ib.function("forward", { num_inputs: 4 }, () => {
    const regs = new Registers(ib, 4);
    const [tokens, caches, params, heap] = [ib.r(0), ib.r(1), ib.r(2), ib.r(3)];
    const param = (i: number) => call(regs, "vm.builtin.tuple_getitem", [params, ib.imm(i)]);

    // heap[PAST] = cached tokens (from a cache view's shape); heap[TOTAL] = PAST + N.
    const cache0 = call(regs, "vm.builtin.tuple_getitem", [caches, ib.imm(0)]);
    const cached = call(regs, "vm.builtin.attention_kv_cache_view", [cache0]);
    ib.emit_call("vm.builtin.match_shape", [
      cached,
      heap,
      ib.imm(3),
      ib.imm(STORE_TO_HEAP),
      ib.imm(Slot.PAST),
      ib.imm(ASSERT_EQUAL_TO_IMM),
      ib.imm(H),
      ib.imm(ASSERT_EQUAL_TO_IMM),
      ib.imm(Dh),
      "forward: KV cache rows",
    ]);
    heapAdd(regs, heap, Slot.TOTAL, Slot.PAST, Slot.N);

    // Embeddings: token rows plus position rows [PAST, TOTAL).
    const wte = param(0), wpe = param(1);
    const tokenRows = call(regs, "vm.op.take", [wte, tokens, ib.imm(0)]);
    const begin = makeShape(regs, heap, [{ slot: Slot.PAST }]);
    const end = makeShape(regs, heap, [{ slot: Slot.TOTAL }]);
    const positionRows = call(regs, "vm.op.strided_slice", [wpe, shape(0), begin, end]);
    let x = call(regs, "vm.op.add", [tokenRows, positionRows]);

    for (let l = 0; l < c.layers; l++) {
      const weights = Array.from({ length: PARAMS_PER_LAYER }, (_, j) => param(layerBase(l) + j));
      const kCache = call(regs, "vm.builtin.tuple_getitem", [caches, ib.imm(2 * l)]);
      const vCache = call(regs, "vm.builtin.tuple_getitem", [caches, ib.imm(2 * l + 1)]);
      x = call(regs, "block", [x, kCache, vCache, heap, ...weights]);
    }

    // Only the last position's logits are needed: slice it before the final norm.
    const last = call(regs, "vm.op.strided_slice", [x, shape(0), shape(-1), shape(2 ** 30)]);
    const h = call(regs, "vm.op.layer_norm", [last, param(lnF), param(lnF + 1), eps]);
    ib.emit_ret(call(regs, "vm.op.linear", [h, wte]));
  });

  // prefill(tokens[n], caches, params) -> (logits, caches)
  ib.function("prefill", { num_inputs: 3, param_names: ["tokens", "caches", "params"] }, () => {
    const regs = new Registers(ib, 3);
    const heap = call(regs, "vm.builtin.alloc_shape_heap", [ib.imm(HEAP_SIZE)]);
    ib.emit_call("vm.builtin.match_shape", [
      ib.r(0),
      heap,
      ib.imm(1),
      ib.imm(STORE_TO_HEAP),
      ib.imm(Slot.N),
      "prefill: tokens",
    ]);
    const logits = call(regs, "forward", [ib.r(0), ib.r(1), ib.r(2), heap]);
    ib.emit_ret(call(regs, "vm.builtin.make_tuple", [logits, ib.r(1)]));
  });

  // decode(token[1], caches, params) -> (logits, caches)
  ib.function("decode", { num_inputs: 3, param_names: ["token", "caches", "params"] }, () => {
    const regs = new Registers(ib, 3);
    const heap = call(regs, "vm.builtin.alloc_shape_heap", [ib.imm(HEAP_SIZE)]);
    ib.emit_call("vm.builtin.match_shape", [
      ib.r(0),
      heap,
      ib.imm(1),
      ib.imm(ASSERT_EQUAL_TO_IMM),
      ib.imm(1),
      "decode: token",
    ]);
    ib.emit_call("vm.builtin.match_prim_value", [
      ib.imm(1),
      heap,
      ib.imm(STORE_TO_HEAP),
      ib.imm(Slot.N),
    ]);
    const logits = call(regs, "forward", [ib.r(0), ib.r(1), ib.r(2), heap]);
    ib.emit_ret(call(regs, "vm.builtin.make_tuple", [logits, ib.r(1)]));
  });

  // decode_step(token[1], caches, params, heap, step, uniforms, temperature, top_p) -> token[1]
  // One step of decode_n: the forward pass, then the next token chosen on the device.
  ib.function("decode_step", { num_inputs: 8 }, () => {
    const regs = new Registers(ib, 8);
    const [token, caches, params, heap, step, uniforms, temperature, topP] = [
      0,
      1,
      2,
      3,
      4,
      5,
      6,
      7,
    ].map((i) => ib.r(i));
    // heap[STEP] = step, heap[NEXT] = step + 1: this step's uniform is uniforms[STEP:NEXT].
    ib.emit_call("vm.builtin.match_prim_value", [
      step,
      heap,
      ib.imm(STORE_TO_HEAP),
      ib.imm(Slot.STEP),
    ]); // 0
    const next = call(regs, "gpt.add", [step, ib.imm(1)]); // 1
    ib.emit_call("vm.builtin.match_prim_value", [
      next,
      heap,
      ib.imm(STORE_TO_HEAP),
      ib.imm(Slot.NEXT),
    ]); // 2
    const logits = call(regs, "forward", [token, caches, params, heap]); // 3
    ib.emit_if(temperature, 6); // 4: temperature 0 → greedy, at 10
    const from = makeShape(regs, heap, [{ slot: Slot.STEP }]); // 5
    const to = makeShape(regs, heap, [{ slot: Slot.NEXT }]); // 6
    const u = call(regs, "vm.op.strided_slice", [uniforms, shape(0), from, to]); // 7
    ib.emit_ret(call(regs, "vm.op.sample_top_p", [logits, u, temperature, topP])); // 8, 9
    ib.emit_ret(call(regs, "vm.op.argmax", [logits, ib.imm(-1)])); // 10, 11
  });

  // decode_n(token[1], caches, params, uniforms[N], temperature, top_p) -> (ids[N], caches)
  ib.function("decode_n", {
    num_inputs: 6,
    param_names: ["token", "caches", "params", "uniforms", "temperature", "top_p"],
  }, () => {
    const regs = new Registers(ib, 6);
    const [caches, params, uniforms, temperature, topP] = [1, 2, 3, 4, 5].map((i) => ib.r(i));
    const token = regs.fresh(), ids = regs.fresh(), step = regs.fresh(), more = regs.fresh();
    const both = regs.fresh();
    const heap = call(regs, "vm.builtin.alloc_shape_heap", [ib.imm(HEAP_SIZE)]);
    // heap[STEPS] = N (from the uniforms' shape); every step runs one token: heap[N] = 1.
    ib.emit_call("vm.builtin.match_shape", [
      uniforms,
      heap,
      ib.imm(1),
      ib.imm(STORE_TO_HEAP),
      ib.imm(Slot.STEPS),
      "decode_n: uniforms",
    ]);
    ib.emit_call("vm.builtin.match_prim_value", [
      ib.imm(1),
      heap,
      ib.imm(STORE_TO_HEAP),
      ib.imm(Slot.N),
    ]);
    const steps = call(regs, "vm.builtin.make_prim_value", [
      heap,
      ib.imm(LOAD_SHAPE),
      ib.imm(Slot.STEPS),
    ]);
    ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: token });
    // ids starts empty on the device (an int32 constant of shape [0]) and grows by concat.
    ib.emit_call("vm.builtin.copy", [tensor(new Int32Array(0), { dtype: "int32" })], { dst: ids });
    ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: step });
    // The loop; If and Goto offsets count instructions from the jump itself.
    ib.emit_call("gpt.less", [step, steps], { dst: more }); // 0: loop head
    ib.emit_if(more, 6); // 1: done → 7
    ib.emit_call("decode_step", [
      token,
      caches,
      params,
      heap,
      step,
      uniforms,
      temperature,
      topP,
    ], { dst: token }); // 2
    ib.emit_call("vm.builtin.make_tuple", [ids, token], { dst: both }); // 3
    ib.emit_call("vm.op.concat", [both, ib.imm(0)], { dst: ids }); // 4
    ib.emit_call("gpt.add", [step, ib.imm(1)], { dst: step }); // 5
    ib.emit_goto(-6); // 6: back to 0
    ib.emit_ret(call(regs, "vm.builtin.make_tuple", [ids, caches])); // 7, 8
  });

  return ib.get();
}
