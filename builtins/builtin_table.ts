/**
 * `BuiltinTable`: a builtin module's list of packed functions, written next
 * to their docs and bodies (TVM's registration blocks) and put into the
 * global registry only when `installBuiltins()` (builtins/install.ts) runs:
 * importing a builtin module changes nothing global.
 *
 * @module
 */

import { getGlobalFunc, type PackedFunc, registerFunc } from "../ground/registry.ts";

/** One builtin: its registry name and its function. */
export interface Builtin {
  /** The registry key, e.g. `vm.builtin.copy`. */
  readonly name: string;
  /** The packed function. */
  readonly fn: PackedFunc;
}

/** The builtins of one module, in the order they are defined. */
export class BuiltinTable {
  readonly #entries: Builtin[] = [];

  /** Adds builtin `name`. */
  add(name: string, fn: PackedFunc): void {
    this.#entries.push({ name, fn });
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
    for (const { name, fn } of this.#entries) {
      if (getGlobalFunc(name) === undefined) registerFunc(name, fn);
    }
  }
}
