/**
 * `shared()`: state that must be one per process, not one per copy of the
 * library. A program can load relaxvm twice — `mod.ts` through two
 * specifiers (a path and a `file:` URL, a local checkout and `jsr:`), or a
 * `--preload` module that imports it differently from the CLI — and each
 * copy then has its own module-level variables. The registry of packed
 * functions, the allocation context, the CPU devices and the tensor cache
 * must not split that way: a function registered through one copy must be
 * found by the other's VM, and a tensor a builtin of one copy allocates
 * while the other's VM runs must come from that VM's allocator.
 *
 * Each such piece of state lives on `globalThis` under a `Symbol.for` key
 * (`Symbol.for("relaxvm.registry")`, …), made by the first copy that asks
 * and found by every later one. Keys name their layout version after the
 * first (`relaxvm.allocation.v1`), so a copy of another version that lays
 * the state out differently gets its own instead of a foreign object.
 *
 * @module
 */

/**
 * The process-wide value called `key` (under `Symbol.for(key)` on
 * `globalThis`), made with `create()` by the first copy that asks.
 *
 * @example
 * ```ts
 * import { shared } from "./shared.ts";
 * import { assertStrictEquals } from "@std/assert";
 *
 * const a = shared("relaxvm.doc.example", () => new Map<string, number>());
 * const b = shared("relaxvm.doc.example", () => new Map<string, number>());
 * assertStrictEquals(a, b); // what a second copy of the module would get
 * ```
 */
export function shared<T>(key: string, create: () => T): T {
  const slot = Symbol.for(key);
  const global = globalThis as unknown as Record<symbol, T | undefined>;
  let value = global[slot];
  if (value === undefined) {
    value = create();
    Object.defineProperty(globalThis, slot, { value, configurable: false, enumerable: false });
  }
  return value;
}
