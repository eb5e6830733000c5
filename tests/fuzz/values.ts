/**
 * Values for the fuzz families: random arguments of every kind a register
 * can hold, made from a recipe so that the same arguments can be made again
 * for each dispatch form; a canonical text of a result, for comparing forms;
 * a check that a value is well formed; and the clean-up of what a case made.
 *
 * @module
 */

import { Closure, cpu, DataType, dtype, NDArray, shape, ShapeTuple, tensor } from "../../mod.ts";
import type { TensorDType } from "../../mod.ts";
import { isVMObject, releaseIfUnowned, VMObject } from "../../ground/object.ts";
import { Tuple } from "../../ground/tuple.ts";
import { AttentionKVCache } from "../../devices/attention_kv_cache.ts";
import { Random } from "./random.ts";
import { defaultAllocator } from "../../devices/allocation_context.ts";
import { HOSTILE_NAMES } from "./program_generator.ts";

/** Numbers chosen to break arithmetic, indexing and size computations. */
export const EDGE_NUMBERS: readonly number[] = [
  0,
  1,
  -1,
  2,
  3,
  4,
  7,
  0.5,
  -0,
  NaN,
  Infinity,
  -Infinity,
  2 ** 31,
  2 ** 32 + 1,
  2 ** 53,
  -(2 ** 40),
  1e300,
  1e-300,
];

const DTYPES: readonly TensorDType[] = [
  "float32",
  "float64",
  "int32",
  "int64",
  "uint8",
  "int8",
  "bool",
  "float16",
  "bfloat16",
  "int16",
  "uint16",
  "uint32",
];

const SHAPES: readonly number[][] = [[], [0], [1], [3], [2, 3], [1, 4], [4, 1], [2, 0, 3], [2, 2]];

/** Makes the value of a recipe; `made` collects what must be cleaned up afterwards. */
export type Recipe = (made: Made) => unknown;

/** What a case made, to dispose or release when it ends. */
export class Made {
  readonly #objects: unknown[] = [];
  readonly #held: VMObject[] = [];

  /** Remembers `v` (a tensor the "user" holds, or a floating object) for `cleanUp`. */
  keep<T>(v: T): T {
    this.#objects.push(v);
    return v;
  }

  /**
   * Remembers `v`, an object the "user" holds (handed to the user, as
   * `PagedKVCache.create` does), which `cleanUp` disposes: releasing it only
   * if unowned would leave the user's hold, and its memory, behind.
   */
  keepHeld<T extends VMObject>(v: T): T {
    this.#held.push(v);
    return v;
  }

  /** Disposes the user's tensors and objects, and releases floating objects. */
  cleanUp(): void {
    for (const v of this.#objects) {
      if (v instanceof NDArray) v.dispose();
      else releaseIfUnowned(v);
    }
    for (const v of this.#held) v.dispose();
    this.#objects.length = 0;
    this.#held.length = 0;
  }
}

function randomTensor(rand: Random, made: Made, dt: TensorDType, dims: number[]): NDArray {
  const size = dims.reduce((a, b) => a * b, 1);
  const values = Array.from({ length: size }, () => rand.pick([0, 1, -1, 2, 0.5, -3, 100]));
  const data = dt === "int64" ? values.map((v) => BigInt(Math.trunc(v))) : values;
  return made.keep(tensor(data as number[], { dtype: dt, shape: dims }));
}

/**
 * A recipe for a random value of any kind a register may hold. `depth`
 * bounds nesting (tuples of tuples).
 */
export function randomRecipe(rand: Random, depth = 0): Recipe {
  switch (rand.int(depth > 1 ? 12 : 14)) {
    case 0: {
      const n = rand.pick(EDGE_NUMBERS);
      return () => n;
    }
    case 1: {
      const b = rand.chance(0.5);
      return () => b;
    }
    case 2: {
      const s = rand.pick(["", "float32", "int32", "x", "vm.builtin.copy", ...HOSTILE_NAMES]);
      return () => s;
    }
    case 3: {
      const v = rand.pick([null, undefined, 0n, 5n, -1n]);
      return () => v;
    }
    case 4: {
      const dims = rand.pick([[], [0], [2, 3], [-1], [2 ** 40, 2 ** 40], [1, 1, 1, 1], [1e9]]);
      return () => shape(...dims);
    }
    case 5: {
      const a = rand.pick([[], [2], [2, 2], [-1], [0.5], ["x"], [1e20], [NaN]]);
      return () => [...a];
    }
    case 6: {
      const d = rand.pick(DTYPES);
      return () => dtype(d);
    }
    case 7:
    case 8:
    case 9: {
      const dt = rand.pick(DTYPES);
      const dims = rand.pick(SHAPES);
      const seed = rand.int(2 ** 30);
      // A disposed tensor only where a register could hold one: a tuple or closure would not take it.
      const disposed = depth === 0 && rand.chance(0.05);
      return (made) => {
        const t = randomTensor(new Random(seed), made, dt, dims);
        if (disposed) t.dispose();
        return t;
      };
    }
    case 10: {
      const name = rand.pick(["f", "g", ...HOSTILE_NAMES]);
      const captured = rand.chance(0.5) ? [randomRecipe(rand, depth + 1)] : [];
      return (made) =>
        made.keep(
          new Closure(name, (...args: unknown[]) => args.length, captured.map((r) => r(made))),
        );
    }
    case 11: {
      const kind = rand.int(3);
      return () => {
        if (kind === 0) return cpu();
        if (kind === 1) return {};
        return (...args: unknown[]) => args.length;
      };
    }
    default: {
      // A tuple (a VM Tuple or a plain array) of up to 3 values.
      const fields = Array.from({ length: rand.int(4) }, () => randomRecipe(rand, depth + 1));
      const asTuple = rand.chance(0.5);
      return (made) => {
        const values = fields.map((r) => r(made));
        return asTuple ? made.keep(new Tuple(values)) : values;
      };
    }
  }
}

/** A recipe for a storage or a KV cache, made in the current allocation context. */
export function memoryRecipe(rand: Random): Recipe {
  const bytes = rand.pick([0, 4, 16, 64, 1000]);
  const cache = rand.chance(0.5);
  const dims = rand.pick([[1, 2], [2, 2], [3, 1]]);
  return (made) => {
    if (!cache) return made.keep(defaultAllocator(cpu()).alloc(bytes));
    const init = made.keep(tensor(new Float32Array(dims[0] * dims[1]), { shape: dims }));
    return made.keep(AttentionKVCache.create(init, [dims[0] * 2, dims[1]], dims[0]));
  };
}

/**
 * What is wrong with `v`, if anything: a tensor or shape whose dimensions
 * are not non-negative safe integers, or whose size does not match them.
 * Looks into tuples and arrays (up to 1000 values); values found in `given`
 * (what the call was given, which it may hand back) are not its making.
 */
export function malformed(v: unknown, given: readonly unknown[] = []): string | null {
  const limit = 1000;
  const seen = new Set<unknown>();
  const from = [...given];
  while (from.length > 0 && seen.size < limit) {
    const x = from.pop();
    if (typeof x !== "object" || x === null || seen.has(x)) continue;
    seen.add(x);
    if (x instanceof Tuple) from.push(...x.fields);
    else if (Array.isArray(x)) from.push(...x);
  }
  const todo = [v];
  while (todo.length > 0 && seen.size < limit) {
    const x = todo.pop();
    if (typeof x !== "object" || x === null || seen.has(x)) continue;
    seen.add(x);
    let dims: readonly unknown[] | null = null;
    if (x instanceof NDArray) dims = x.shape;
    else if (x instanceof ShapeTuple) dims = x.dims;
    if (dims !== null) {
      const bad = dims.findIndex((d) => typeof d !== "number" || !Number.isSafeInteger(d) || d < 0);
      if (bad >= 0) return `${x} has dimension ${bad} = ${String(dims[bad])}`;
      if (x instanceof NDArray && x.size !== (dims as number[]).reduce((a, b) => a * b, 1)) {
        return `${x} has size ${x.size}`;
      }
      continue;
    }
    if (x instanceof Tuple) todo.push(...x.fields);
    else if (Array.isArray(x)) todo.push(...x);
  }
  return null;
}

/**
 * A canonical text of a result, equal for equal results: numbers by
 * `Object.is`, tensors by dtype, shape and bytes, tuples and arrays element
 * by element, closures by name.
 */
export function canonical(v: unknown, depth = 0): string {
  if (depth > 50) return "…";
  if (typeof v === "number") return Object.is(v, -0) ? "-0" : String(v);
  if (typeof v === "bigint") return `${v}n`;
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v !== "object" || v === null) return String(v);
  if (v instanceof NDArray) {
    if (v.disposed) return `NDArray(disposed)`;
    const view = v.cpuView();
    const bytes = new Uint8Array(view.buffer, view.byteOffset, v.nbytes);
    return `${v}:${Array.from(bytes).join(",")}`;
  }
  if (v instanceof ShapeTuple) return `shape(${v.dims.join(",")})`;
  if (v instanceof DataType) return `dtype(${v})`;
  if (v instanceof Closure) return `Closure(${v.name})`;
  if (Array.isArray(v) || v instanceof Tuple) {
    return `[${[...v].map((x) => canonical(x, depth + 1)).join(", ")}]`;
  }
  if (isVMObject(v)) return String(v);
  return Object.prototype.toString.call(v);
}

/** Gives up the user's references in a result the VM handed out (tensors, closures, arrays of them). */
export function disposeResult(v: unknown, depth = 0): void {
  if (depth > 2000) return;
  if (v instanceof VMObject) v.dispose();
  else if (Array.isArray(v)) { for (const x of v) disposeResult(x, depth + 1); }
}
