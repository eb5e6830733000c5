/**
 * `ParamModule`: what `vm.builtin.param_module_from_cache` returns, TVM's
 * `"param_module"` — a module whose one function, `get_params`, returns the
 * parameter tensors it was made with (a snapshot of the tensor cache: later
 * changes to the cache do not reach it). It holds its tensors until released.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../../ground/brand.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import { retainValue, VMObject } from "../../ground/object.ts";
import { Tuple } from "../../ground/tuple.ts";

const PARAM_MODULE_BRAND = brandKey("ParamModule");

/**
 * A module of parameters. `getFunction("get_params")` gives TVM's function;
 * `params` gives the tensors directly.
 *
 * @example A program that gathers its weights into a module
 * ```ts
 * import { ExecBuilder, type ParamModule, tensor, VirtualMachine } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("params", 0, () => {
 *   ib.emit_call("vm.builtin.param_module_from_cache", ["w", ib.imm(-1)], { dst: ib.r(0) });
 *   ib.emit_ret(ib.r(0));
 * });
 * using vm = new VirtualMachine(ib.get());
 * using w = tensor([1, 2]);
 * vm.tensorCache.update("w_0", w); // the VM's own cache: its programs see it
 * using module = await vm.invoke("params") as ParamModule;
 * assertEquals(module.params.map((t) => t.shape), [[2]]);
 * ```
 */
export class ParamModule extends VMObject {
  static {
    brand(this, PARAM_MODULE_BRAND);
  }

  /**
   * True for a `ParamModule` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is ParamModule {
    return typeof v === "object" && v !== null && (v as Branded)[PARAM_MODULE_BRAND] === true;
  }

  readonly #params: Tuple;

  /**
   * Holds `params`.
   *
   * @ignore
   */
  constructor(params: readonly NDArray[]) {
    super();
    this.#params = new Tuple(params);
    retainValue(this.#params);
  }

  /** The parameters, in order (the module still holds them). */
  get params(): readonly NDArray[] {
    if (this.disposed) throw this.usedAfterFree();
    return this.#params.fields as readonly NDArray[];
  }

  /**
   * TVM's `get_params`: the parameters as a VM tuple (which the VM hands to
   * users as an array of tensors).
   */
  get_params(): VMObject {
    if (this.disposed) throw this.usedAfterFree();
    return this.#params;
  }

  /** TVM's `Module.get_function`: `get_params`, or null for any other name. */
  getFunction(name: string): (() => VMObject) | null {
    return name === "get_params" ? () => this.get_params() : null;
  }

  /**
   * Releases the parameters.
   *
   * @ignore
   */
  protected free(): void {
    this.#params.release();
  }

  /** `ParamModule(3 params)`. */
  override toString(): string {
    return `ParamModule(${this.#params.length} params)`;
  }
}
