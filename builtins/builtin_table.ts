/**
 * `BuiltinTable`: a builtin module's list of packed functions, written next
 * to their bodies (TVM's registration blocks) and put into the global
 * registry only when `installBuiltins()` (builtins/install.ts) runs:
 * importing a builtin module changes nothing global.
 *
 * Every builtin is added with its metadata (`FuncMeta`: signature, what it
 * does, dtypes, devices, errors, the TVM function it follows), which is
 * required, so a new table cannot leave it out. The registry keeps it for
 * `relaxvm funcs --long`, and docs/builtins.md is generated from it
 * (builtins/catalogue.ts; `deno task docs`).
 *
 * @module
 */

import { type FuncMeta, getGlobalFunc, type PackedFunc, registerFunc } from "../ground/registry.ts";

/** One builtin: its registry name, its function and its metadata. */
export interface Builtin {
  /** The registry key, e.g. `vm.builtin.copy`. */
  readonly name: string;
  /** The packed function. */
  readonly fn: PackedFunc;
  /** What it is: signature, dtypes, devices, errors, TVM counterpart. */
  readonly meta: FuncMeta;
}

/** The builtins of one module, in the order they are defined. */
export class BuiltinTable {
  /** What the builtins of this table are for: a heading of docs/builtins.md. */
  readonly title: string;
  /** The module that defines them, relative to the repository (`builtins/memory.ts`). */
  readonly file: string;
  readonly #entries: Builtin[] = [];

  /** A table called `title`, for the module at `moduleUrl` (its `import.meta.url`). */
  constructor(title: string, moduleUrl: string) {
    this.title = title;
    // Under builtins/ in the repository; a bundle (one module for all) keeps only its name.
    const at = moduleUrl.lastIndexOf("/builtins/");
    this.file = at >= 0
      ? moduleUrl.slice(at + 1)
      : `builtins/${moduleUrl.slice(moduleUrl.lastIndexOf("/") + 1)}`;
  }

  /** Adds builtin `name` with its metadata. */
  add(name: string, fn: PackedFunc, meta: FuncMeta): void {
    this.#entries.push({ name, fn, meta });
  }

  /** The builtins, in order. */
  get entries(): readonly Builtin[] {
    return this.#entries;
  }

  /**
   * Registers every builtin whose name is not registered yet. A name that is
   * stays as it is: the registry is one per process (ground/shared.ts), so
   * it may hold another copy's builtin of that name, or a user's override,
   * which a second copy of the library must not replace.
   */
  install(): void {
    for (const { name, fn, meta } of this.#entries) {
      if (getGlobalFunc(name) === undefined) registerFunc(name, fn, { meta });
    }
  }
}
