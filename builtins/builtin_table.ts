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

  /** Registers every builtin; one already registered with the same function is left alone. */
  install(): void {
    for (const { name, fn } of this.#entries) {
      if (getGlobalFunc(name) !== fn) registerFunc(name, fn, { override: true });
    }
  }
}
