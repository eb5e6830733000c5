/**
 * What each builtin takes, roughly, for the "builtins" fuzz family: most
 * random arguments are rejected at the first type check, so most cases give
 * a builtin arguments of the right kinds with values at the edges (shapes
 * with zero, negative and huge dimensions, tensors of every dtype and odd
 * shapes, indices out of range, NaN and infinite numbers), and then replace
 * one argument, or change how many there are.
 *
 * @module
 */

import { cpu, DataType, shape, tensor } from "../../mod.ts";
import type { TensorDType } from "../../mod.ts";
import { Closure } from "../../ground/closure.ts";
import { Tuple } from "../../ground/tuple.ts";
import { AttentionKVCache } from "../../devices/attention_kv_cache.ts";
import { PagedKVCache } from "../../builtins/kv_state/paged_kv_cache.ts";
import { defaultAllocator } from "../../devices/allocation_context.ts";
import type { MemoryScope } from "../../devices/memory_scope.ts";
import { Random } from "./random.ts";
import { EDGE_NUMBERS, randomRecipe, type Recipe } from "./values.ts";

/** Kinds of argument; a trailing `*` repeats the kind 0 to 4 times. */
type Kind =
  | "any"
  | "tensor"
  | "tensor2"
  | "float"
  | "int32"
  | "vector"
  | "heap"
  | "shape"
  | "axes"
  | "int"
  | "index"
  | "num"
  | "dtype"
  | "dtype?"
  | "string"
  | "name"
  | "names"
  | "vm"
  | "storage"
  | "cache"
  | "rows"
  | "caches"
  | "kv"
  | "tuple"
  | "callable"
  | "null"
  | "ctx";

const BINARY: Kind[] = ["tensor", "tensor2"];
const UNARY: Kind[] = ["tensor"];
const REDUCE: Kind[] = ["tensor", "axes", "int"];

/** Each builtin's arguments, by registry name. */
export const SIGNATURES: Record<string, (Kind | `${Kind}*`)[]> = {
  "vm.builtin.copy": ["any"],
  "vm.builtin.move": ["any"],
  "vm.builtin.print": ["any"],
  "vm.builtin.null_value": [],
  "vm.builtin.make_tuple": ["any*"],
  "vm.builtin.tuple_getitem": ["tuple", "index"],
  "vm.builtin.tuple_reset_item": ["tuple", "index"],
  "vm.builtin.read_if_cond": ["tensor"],
  "vm.builtin.make_closure": ["callable", "any*"],
  "vm.builtin.invoke_closure": ["callable", "any*"],
  "vm.builtin.to_device": ["tensor", "int", "int"],
  "vm.builtin.alloc_shape_heap": ["vm", "int"],
  "vm.builtin.shape_of": ["tensor"],
  "vm.builtin.store_shape": ["shape", "heap", "index*"],
  "vm.builtin.load_shape": ["heap", "index*"],
  "vm.builtin.match_shape": ["tensor", "heap", "index", "index*"],
  "vm.builtin.make_shape": ["heap", "index", "index*"],
  "vm.builtin.reshape": ["tensor", "shape"],
  "vm.builtin.tensor_to_shape": ["vector"],
  "vm.builtin.match_prim_value": ["int", "heap", "index", "index", "ctx"],
  "vm.builtin.make_prim_value": ["heap", "index", "index"],
  "vm.builtin.check_tensor_info": ["tensor", "int", "dtype?", "ctx"],
  "vm.builtin.check_shape_info": ["shape", "int", "ctx"],
  "vm.builtin.check_tuple_info": ["tuple", "int", "ctx"],
  "vm.builtin.check_func_info": ["callable", "ctx"],
  "vm.builtin.check_prim_value_info": ["num", "dtype", "ctx"],
  "vm.builtin.alloc_storage": ["vm", "shape", "index", "dtype", "string"],
  "vm.builtin.alloc_tensor": ["storage", "int", "shape", "dtype"],
  "vm.builtin.kill": ["any"],
  "vm.builtin.ensure_zero_offset": ["tensor"],
  "vm.builtin.call_tir_dyn": ["callable", "tensor*", "shape"],
  "vm.builtin.invoke_debug_func": ["null", "name", "string", "any*"],
  "vm.builtin.debug_print": ["string", "any"],
  "vm.builtin.attention_kv_cache_create": ["tensor", "shape", "int"],
  "vm.builtin.attention_kv_cache_append": ["cache", "rows"],
  "vm.builtin.attention_kv_cache_update": ["cache", "rows"],
  "vm.builtin.attention_kv_cache_window_override": ["cache", "rows", "int"],
  "vm.builtin.attention_kv_cache_window_override_with_sinks": ["cache", "rows", "int", "int"],
  "vm.builtin.attention_kv_cache_view": ["cache", "shape"],
  "vm.builtin.attention_kv_cache_array_popn": ["caches", "int"],
  "vm.builtin.attention_kv_cache_array_clear": ["caches"],
  "vm.builtin.paged_attention_kv_cache_create": [
    "shape",
    "shape",
    "int",
    "int",
    "int",
    "int",
    "shape",
    "int",
    "int",
    "num",
    "num",
    "null",
    "tensor",
    "callable",
    "null",
    "tuple",
    "tuple",
    "tuple",
    "tuple",
    "tuple",
    "tuple",
    "tuple",
    "tuple",
    "tuple",
    "callable",
    "callable",
    "callable",
    "callable",
  ],
  "vm.builtin.kv_state_add_sequence": ["kv", "int"],
  "vm.builtin.kv_state_remove_sequence": ["kv", "int"],
  "vm.builtin.kv_state_fork_sequence": ["kv", "int", "int", "int"],
  "vm.builtin.kv_state_popn": ["kv", "int", "int"],
  "vm.builtin.kv_state_clear": ["kv"],
  "vm.builtin.kv_state_begin_forward": ["kv", "shape", "shape"],
  "vm.builtin.kv_state_end_forward": ["kv"],
  "vm.builtin.attention_kv_cache_get_num_available_pages": ["kv"],
  "vm.builtin.attention_kv_cache_get_total_sequence_length": ["kv"],
  "vm.builtin.attention_kv_cache_get_query_positions": ["kv"],
  "vm.builtin.attention_kv_cache_empty": ["kv"],
  "vm.builtin.attention_kv_cache_debug_get_kv": ["kv", "int", "int", "int", "tensor", "tensor"],
  "vm.builtin.attention_kv_cache_attention_with_fused_qkv": [
    "kv",
    "int",
    "num",
    "tensor",
    "tensor",
  ],
  "vm.builtin.sample_top_p_from_logits": ["float", "num", "num", "num"],
  "vm.builtin.sample_top_p_from_prob": ["float", "num", "num"],
  "vm.builtin.multinomial_from_uniform": ["float", "float"],
  "vm.builtin.apply_repetition_penalty": ["float", "int32", "num"],
  "vm.builtin.apply_presence_and_frequency_penalty": ["float", "int32", "int32", "num", "num"],
  "vm.builtin.apply_softmax_with_temperature": ["float", "num"],
  "vm.builtin.tensor_cache.load": ["name", "int", "int"],
  "vm.builtin.tensor_cache.get": ["name"],
  "vm.builtin.tensor_cache.update": ["name", "tensor", "int"],
  "vm.builtin.tensor_cache.remove": ["name"],
  "vm.builtin.tensor_cache.clear": [],
  "vm.builtin.param_array_from_cache": ["name", "int"],
  "vm.builtin.param_array_from_cache_by_name": ["names"],
  "vm.builtin.param_array_from_cache_by_name_unpacked": ["name*"],
  "vm.builtin.param_module_from_cache": ["name", "int"],
  "vm.builtin.param_module_from_cache_by_name": ["names"],
  "vm.op.add": BINARY,
  "vm.op.subtract": BINARY,
  "vm.op.multiply": BINARY,
  "vm.op.divide": BINARY,
  "vm.op.maximum": BINARY,
  "vm.op.minimum": BINARY,
  "vm.op.matmul": BINARY,
  "vm.op.negative": UNARY,
  "vm.op.relu": UNARY,
  "vm.op.exp": UNARY,
  "vm.op.log": UNARY,
  "vm.op.sqrt": UNARY,
  "vm.op.tanh": UNARY,
  "vm.op.sigmoid": UNARY,
  "vm.op.gelu": UNARY,
  "vm.op.softmax": UNARY,
  "vm.op.sum": REDUCE,
  "vm.op.max": REDUCE,
  "vm.op.mean": REDUCE,
  "vm.op.layer_norm": ["tensor", "tensor2", "tensor2", "num"],
  "vm.op.transpose": ["tensor", "axes"],
  "vm.op.cast": ["tensor", "dtype"],
  "vm.op.linear": ["tensor", "tensor2", "tensor2"],
  "vm.op.take": ["tensor", "int32", "int", "string"],
  "vm.op.strided_slice": ["tensor", "axes", "axes", "axes", "axes"],
  "vm.op.broadcast_to": ["tensor", "shape"],
  "vm.op.concat": ["tuple", "int"],
  "vm.op.attention": ["tensor", "tensor2", "tensor2", "int", "num", "string"],
  "vm.op.causal_mask": ["tensor", "int"],
  "vm.op.argmax": ["tensor", "int", "int"],
  "vm.op.sample_top_p": ["float", "float", "num", "num"],
};

const DTYPES: readonly TensorDType[] = [
  "float32",
  "float32",
  "float32",
  "int32",
  "int32",
  "int64",
  "float64",
  "uint8",
  "int8",
  "bool",
  "float16",
  "bfloat16",
  "int16",
  "uint16",
  "uint32",
];
const DIMS: readonly number[][] = [
  [],
  [0],
  [1],
  [3],
  [4],
  [2, 3],
  [3, 2],
  [1, 3],
  [3, 1],
  [2, 1, 3],
  [2, 0, 3],
  [1, 1, 1, 1, 1, 1],
];
const SHAPES: readonly number[][] = [
  ...DIMS,
  [-1],
  [0.5, 2],
  [2 ** 40, 2 ** 40],
  [2 ** 53],
  [1e6],
  [1024, 1024],
  [6],
];
const NAMES = ["w", "w_0", "param_0", "x", "", "a\nb", "../x"];

/** What the previous tensor argument of the call was, for `tensor2` (same dtype and shape, often). */
interface CallState {
  last: { dt: TensorDType; dims: number[] } | null;
  /** The dtype and row shape of the KV cache argument, for `rows`. */
  cache?: { dt: TensorDType; row: number[] };
}

function tensorOf(rand: Random, dt: TensorDType, dims: number[]): Recipe {
  const seed = rand.int(2 ** 31);
  return (made) => {
    const values = new Random(seed);
    const size = dims.reduce((a, b) => a * b, 1);
    const numbers = Array.from(
      { length: size },
      () => values.pick([0, 1, -1, 2, 0.5, -3, 100, 1e-3, NaN, Infinity]),
    );
    const data = dt === "int64"
      ? numbers.map((v) => BigInt(Number.isFinite(v) ? Math.trunc(v) : 0))
      : numbers;
    return made.keep(tensor(data as number[], { dtype: dt, shape: dims }));
  };
}

function recipeOf(rand: Random, kind: Kind, scope: MemoryScope, state: CallState): Recipe {
  switch (kind) {
    case "any":
      return randomRecipe(rand);
    case "tensor": {
      const dt = rand.pick(DTYPES), dims = rand.pick(DIMS);
      state.last = { dt, dims };
      return tensorOf(rand, dt, dims);
    }
    case "tensor2": {
      const last = state.last;
      if (last !== null && rand.chance(0.6)) {
        // The same shape, or one broadcast against it.
        const dims = rand.chance(0.7)
          ? last.dims
          : last.dims.map((d) => (rand.chance(0.5) ? 1 : d)).slice(rand.int(2));
        return tensorOf(rand, rand.chance(0.9) ? last.dt : rand.pick(DTYPES), dims);
      }
      return recipeOf(rand, "tensor", scope, state);
    }
    case "float":
      return tensorOf(rand, "float32", rand.pick([[4], [1, 4], [2, 3], [1], [0], [3, 1], []]));
    case "int32":
      return tensorOf(rand, "int32", rand.pick([[2], [1, 2], [3], [0], []]));
    case "vector":
      return tensorOf(rand, rand.pick(["int64", "int32", "float32", "int16"]), [rand.int(4)]);
    case "heap": {
      const n = rand.int(5);
      return (made) => made.keep(tensor(Array.from({ length: n }, () => 0n), { dtype: "int64" }));
    }
    case "shape": {
      const dims = rand.pick(SHAPES);
      // A ShapeTuple holds only integers; an array may hold anything.
      const integers = dims.every((d) => Number.isSafeInteger(d));
      return integers && rand.chance(0.7) ? () => shape(...dims) : () => [...dims];
    }
    case "axes": {
      const axes = rand.pick([[], [0], [1], [-1], [0, 1], [1, 0], [5], [0, 0], [2, 1, 0]]);
      return rand.chance(0.8) ? () => shape(...axes) : () => null;
    }
    case "int": {
      const n = rand.chance(0.7) ? rand.between(-2, 8) : rand.pick(EDGE_NUMBERS);
      return () => n;
    }
    case "index": {
      const n = rand.chance(0.85) ? rand.between(0, 4) : rand.pick(EDGE_NUMBERS);
      return () => n;
    }
    case "num": {
      const n = rand.chance(0.5) ? rand.pick([0.5, 1, 0.9, 0, 2]) : rand.pick(EDGE_NUMBERS);
      return () => n;
    }
    case "dtype": {
      const d = rand.pick([...DTYPES, "float31", "int4", "handle"]);
      const asString = rand.chance(0.3);
      return () => {
        if (asString) return d;
        try {
          return DataType.parse(d); // the fuzzer feeds invalid spellings on purpose
        } catch {
          return d;
        }
      };
    }
    case "dtype?":
      return rand.chance(0.3) ? () => null : recipeOf(rand, "dtype", scope, state);
    case "string":
    case "ctx": {
      const s = rand.pick(["", "global", "ErrorContext(fn=main) ", "x"]);
      return () => s;
    }
    case "name": {
      const s = rand.pick(NAMES);
      return () => s;
    }
    case "names": {
      const names = Array.from({ length: rand.int(3) }, () => rand.pick(NAMES));
      return () => [...names];
    }
    case "vm":
      return rand.chance(0.9) ? () => scope : randomRecipe(rand);
    case "storage": {
      const bytes = rand.pick([0, 4, 16, 24, 64, 1000]);
      return (made) => made.keep(defaultAllocator(cpu()).alloc(bytes));
    }
    case "cache":
      return cacheRecipe(rand, state);
    case "kv":
      return pagedCacheRecipe(rand);
    case "rows": {
      const cache = state.cache;
      if (cache === undefined || rand.chance(0.2)) return recipeOf(rand, "tensor", scope, state);
      return tensorOf(rand, cache.dt, [rand.int(5), ...cache.row]);
    }
    case "caches": {
      const caches = Array.from({ length: rand.int(3) }, () => cacheRecipe(rand));
      return (made) => made.keep(new Tuple(caches.map((c) => c(made))));
    }
    case "tuple": {
      const fields = Array.from({ length: rand.int(4) }, () => randomRecipe(rand, 1));
      const vmTuple = rand.chance(0.5);
      return (made) => {
        const values = fields.map((f) => f(made));
        return vmTuple ? made.keep(new Tuple(values)) : values;
      };
    }
    case "callable": {
      const which = rand.int(4);
      return (made) => {
        if (which === 0) return (...args: unknown[]) => args.length;
        if (which === 1) {
          return made.keep(new Closure("f", (...args: unknown[]) => args[0] ?? null));
        }
        if (which === 2) return () => Promise.resolve(7);
        return () => {
          throw new Error("fuzz callee throws");
        };
      };
    }
    case "null":
      return () => null;
  }
}

function cacheRecipe(rand: Random, state?: CallState): Recipe {
  const row = rand.pick([[2], [1, 2], [3]]);
  const rows = rand.between(1, 3);
  const dt = rand.pick(["float32", "int32"] as TensorDType[]);
  if (state !== undefined) state.cache = { dt, row };
  const fill = rand.between(-1, rows);
  return (made) => {
    const init = made.keep(
      tensor(new Array(rows * row.reduce((a, b) => a * b, 1)).fill(1), {
        dtype: dt,
        shape: [rows, ...row],
      }),
    );
    return made.keep(AttentionKVCache.create(init, [rows * 2, ...row], fill));
  };
}

/**
 * A small paged KV cache holding a few sequences, one forked mid-page, sometimes with a
 * forward in progress (so `get_query_positions` and the attention have a plan).
 */
function pagedCacheRecipe(rand: Random): Recipe {
  const lengths = [rand.int(9), rand.int(9)];
  const forward = rand.chance(0.5);
  return (made) => {
    const kv = made.keepHeld(PagedKVCache.create({
      pageSize: 4,
      maxTotalSequenceLength: 32,
      numLayers: 1,
      numQoHeads: 2,
      numKvHeads: 1,
      headDim: 2,
    }));
    kv.addSequence(0);
    kv.addSequence(1);
    kv.beginForward([0, 1], lengths.map((n) => n + 1));
    kv.forkSequence(0, 2, Math.min(lengths[0], 3));
    if (forward) kv.beginForward([2, 1], [1, 1]);
    return kv;
  };
}

/**
 * Recipes for the arguments of `name`: its signature with edge values,
 * sometimes one argument replaced by anything, or one more or one fewer.
 */
export function signatureRecipes(
  rand: Random,
  name: string,
  scope: MemoryScope,
): Recipe[] | null {
  const signature = SIGNATURES[name];
  if (signature === undefined) return null;
  const state: CallState = { last: null };
  const recipes: Recipe[] = [];
  for (const entry of signature) {
    if (entry.endsWith("*")) {
      const kind = entry.slice(0, -1) as Kind;
      for (let k = rand.int(5); k > 0; k--) recipes.push(recipeOf(rand, kind, scope, state));
    } else {
      recipes.push(recipeOf(rand, entry as Kind, scope, state));
    }
  }
  if (recipes.length > 0 && rand.chance(0.15)) {
    recipes[rand.int(recipes.length)] = randomRecipe(rand);
  }
  if (rand.chance(0.05)) recipes.push(randomRecipe(rand));
  if (recipes.length > 0 && rand.chance(0.05)) recipes.pop();
  return recipes;
}

/** Whether every builtin has a signature (the family reports those that do not). */
export function unknownBuiltins(names: readonly string[]): string[] {
  return names.filter((n) => SIGNATURES[n] === undefined);
}
