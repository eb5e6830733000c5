/**
 * The global registry of packed functions: the names `emit_call` refers to
 * when they are not VM functions. A VM resolves every name once, when it
 * loads an executable. One registry serves the whole process, every copy of
 * the library included (`Symbol.for("relaxvm.registry")` on `globalThis`,
 * see ground/shared.ts): a `--preload` module that imports relaxvm through
 * another specifier registers where the CLI's VM looks.
 *
 * @module
 */

import type { TensorDType } from "./dtype.ts";
import { shared } from "./shared.ts";

/** A packed function: any JS function; it may return a value or a Promise. */
// deno-lint-ignore no-explicit-any
export type PackedFunc = (...args: any[]) => unknown;

const registry: Map<string, PackedFunc> = shared("relaxvm.registry", () => new Map());

/**
 * What a packed function is, for people and tools: `relaxvm funcs --long`
 * prints it and docs/builtins.md is generated from the builtins'. Every
 * builtin carries one where it is registered (`BuiltinTable.add`); a user's
 * function may pass one to `registerFunc`.
 */
export interface FuncMeta {
  /** Arguments and result as a program passes them: `(x, axes?, keepdims?) → tensor`. */
  readonly signature: string;
  /** What it does, in a sentence or a short paragraph (Markdown). */
  readonly summary: string;
  /** The tensor dtypes it computes on: a list, `"any"`, or `null` when it reads no tensor data. */
  readonly dtypes: readonly TensorDType[] | "any" | null;
  /** The devices its tensor arguments may live on. */
  readonly devices: readonly ("cpu" | "webgpu")[];
  /** What it throws and when (Markdown); `""` when only what it calls can throw. */
  readonly errors: string;
  /**
   * The TVM function whose behaviour it follows, with where TVM defines it
   * (`vm.builtin.copy (builtin.cc)`, `relax.op.add`), and how relaxvm
   * differs if it does; `null` when TVM has no such function.
   */
  readonly tvm: string | null;
}

/** Metadata of the registered functions that have some, one map per process like the registry. */
const metadata: Map<string, FuncMeta> = shared("relaxvm.funcMeta.v1", () => new Map());

/** Options of `registerFunc`. */
export interface RegisterOptions {
  /** Replace an existing function of the same name instead of throwing. */
  override?: boolean;
  /** What the function is, shown by `relaxvm funcs --long`. */
  meta?: FuncMeta;
}

/**
 * Adds a packed function to the global registry.
 *
 * A packed function receives the VM's values (tensors, shapes, numbers, …)
 * and may return a value or a Promise of one. Ownership, as for the
 * builtins: arguments are lent for the call (read them or return them,
 * never dispose them); a tensor the function creates as its result is made
 * with `NDArray.empty(shape, dtype, device)`, from the running VM's
 * allocator, and returned floating: the VM takes it and frees it after its
 * last use. `tensor()` makes a tensor the caller owns, which as a result
 * would stay live until the garbage collector finds it.
 *
 * @example
 * ```ts
 * import { getGlobalFunc, registerFunc } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * registerFunc("doc.example.twice", (x: number) => 2 * x, { override: true });
 * assertEquals(getGlobalFunc("doc.example.twice")?.(21), 42);
 * ```
 */
export function registerFunc(name: string, fn: PackedFunc, options: RegisterOptions = {}): void {
  if (typeof name !== "string" || name === "") {
    throw new TypeError("registerFunc: name must be a non-empty string");
  }
  if (typeof fn !== "function") {
    throw new TypeError(`registerFunc("${name}"): fn must be a function`);
  }
  if (registry.has(name) && !options.override) {
    throw new Error(
      `Packed function "${name}" is already registered; pass { override: true } to replace it`,
    );
  }
  registry.set(name, fn);
  if (options.meta === undefined) metadata.delete(name);
  else metadata.set(name, options.meta);
}

/**
 * The metadata a packed function was registered with, if any: every
 * builtin has some.
 *
 * @example
 * ```ts
 * import { describeGlobalFunc } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * assertEquals(describeGlobalFunc("vm.op.add")?.devices, ["cpu", "webgpu"]);
 * ```
 */
export function describeGlobalFunc(name: string): FuncMeta | undefined {
  return registry.has(name) ? metadata.get(name) : undefined;
}

/**
 * Looks up a packed function; `undefined` when there is none.
 *
 * @example
 * ```ts
 * import { getGlobalFunc } from "@relaxvm/relaxvm";
 * import { assert } from "@std/assert";
 *
 * assert(getGlobalFunc("vm.builtin.make_tuple") !== undefined);
 * ```
 */
export function getGlobalFunc(name: string): PackedFunc | undefined {
  return registry.get(name);
}

/**
 * Names of every registered packed function, sorted.
 *
 * @example
 * ```ts
 * import { listGlobalFuncNames } from "@relaxvm/relaxvm";
 * import { assert } from "@std/assert";
 *
 * assert(listGlobalFuncNames().includes("vm.builtin.print"));
 * ```
 */
export function listGlobalFuncNames(): string[] {
  return [...registry.keys()].sort();
}
