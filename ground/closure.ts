/**
 * `Closure`: a function value with captured arguments, made by
 * `vm.builtin.make_closure` and called by `vm.builtin.invoke_closure` or
 * `VirtualMachine.invoke_closure`. As in TVM, the captured values are passed
 * as the function's last parameters. A closure holds a reference to each
 * captured value (and to the closure it wraps, for a closure made from one)
 * until it is released itself. One made by a program inside a VM counts its
 * host memory against the VM's `maxMemoryBytes` while it lives (`chargeTo`),
 * as a tuple does: a program can make them without end, each holding the
 * last.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "./brand.ts";
import { INSPECT } from "./inspect.ts";
import { releaseValue, retainValue, VMObject } from "./object.ts";

/** What a closure calls: the VM's entry for a VM function, or a packed function. */
export type ClosureTarget = (...args: unknown[]) => unknown;

const CLOSURE_BRAND = brandKey("Closure");

/**
 * A callable value returned by the VM.
 *
 * @example
 * ```ts
 * import { type Closure, ExecBuilder, VirtualMachine } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("add_captured", { num_inputs: 2 }, () => {
 *   ib.emit_call("vm.builtin.make_tuple", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
 *   ib.emit_ret(ib.r(2));
 * });
 * ib.function("main", { num_inputs: 1 }, () => {
 *   ib.emit_call("vm.builtin.make_closure", [ib.f("add_captured"), ib.r(0)], { dst: ib.r(1) });
 *   ib.emit_ret(ib.r(1));
 * });
 * const vm = new VirtualMachine(ib.get());
 * using closure = await vm.invoke("main", "captured") as Closure;
 * assertEquals(await vm.invoke_closure(closure, "arg"), ["arg", "captured"]);
 * // Leaving the scope disposes it, releasing what it captured.
 * ```
 */
export class Closure extends VMObject {
  static {
    brand(this, CLOSURE_BRAND);
  }

  /**
   * True for a `Closure` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is Closure {
    return typeof v === "object" && v !== null && (v as Branded)[CLOSURE_BRAND] === true;
  }

  /** The function's name. */
  readonly name: string;
  /** The captured values, passed after the call's own arguments. */
  readonly captured: readonly unknown[];
  /**
   * The VM whose function this closure calls, or null for a packed
   * function: another VM's `invoke_closure` refuses it.
   *
   * @ignore
   */
  readonly owner: object | null;
  readonly #target: ClosureTarget;
  /** The closure this one calls (`wraps`), held until this one is freed, or null. */
  #inner: VMObject | null = null;
  /** What the closure's host memory is counted against (`chargeTo`), and how much. */
  #charged: { give(bytes: number): void } | null = null;
  #chargedBytes = 0;

  /**
   * Made by `vm.builtin.make_closure` and by function references.
   *
   * @ignore
   */
  constructor(
    name: string,
    target: ClosureTarget,
    captured: readonly unknown[] = [],
    owner: object | null = null,
  ) {
    super();
    this.name = name;
    this.owner = owner;
    this.#target = target;
    this.captured = Object.freeze([...captured]);
    for (const v of this.captured) retainValue(v);
  }

  /**
   * True once the captured values are released: the closure can no longer
   * be called. A closure that captured nothing (and wraps no closure) never
   * becomes unusable.
   */
  override get disposed(): boolean {
    return super.disposed && (this.captured.length > 0 || this.#inner !== null);
  }

  /**
   * Records that this closure calls `inner` (a closure made from a closure,
   * by `make_closure`): it holds `inner` until it is freed itself.
   *
   * @ignore
   */
  wraps(inner: VMObject): this {
    inner.retain();
    this.#inner = inner;
    return this;
  }

  /**
   * Records that `bytes` of host memory were counted against `limit` for
   * this closure (a VM's memory limit, by `make_closure`): given back when
   * the closure is freed.
   *
   * @ignore
   */
  chargeTo(limit: { give(bytes: number): void }, bytes: number): this {
    this.#charged = limit;
    this.#chargedBytes = bytes;
    return this;
  }

  /** Calls the function with `args` followed by the captured values. */
  call(args: readonly unknown[]): unknown {
    if (this.disposed) {
      throw new Error(`${this} was disposed: its captured values are released`);
    }
    return this.captured.length === 0
      ? this.#target(...args)
      : this.#target(...args, ...this.captured);
  }

  /**
   * The user becomes a holder (once); returns this closure.
   *
   * @ignore
   */
  override handToUser(): this {
    super.handToUser();
    return this;
  }

  /**
   * Releases the captured values and the closure it wraps, and gives back
   * the host memory counted for it; a closure that captured nothing stays
   * callable.
   *
   * @ignore
   */
  protected free(): void {
    this.#charged?.give(this.#chargedBytes);
    this.#charged = null;
    for (const v of this.captured) releaseValue(v);
    const inner = this.#inner;
    if (inner !== null) releaseValue(inner);
  }

  /** `Closure(name)`. */
  override toString(): string {
    return `Closure(${this.name})`;
  }

  /**
   * Shown by `console.log` and `deno repl`: `Closure(name)`, with what it
   * captured: `Closure(add_captured, capturing ["x", NDArray(float32, [2], cpu(0)) [1, 2]])`.
   */
  override [INSPECT](inspect: (v: unknown) => string): string {
    if (this.captured.length === 0) return this.toString();
    if (this.disposed) return `Closure(${this.name}, released)`;
    const all = inspect([...this.captured]);
    if (!all.includes("\n")) return `Closure(${this.name}, capturing ${all})`;
    // A multi-line value (a large tensor) comes back unindented from the array's inspection:
    // lay the values out one per line, every line of each indented under the bracket.
    const items = this.captured.map((v) => typeof v === "string" ? JSON.stringify(v) : inspect(v));
    const body = items.map((text) => `  ${text.replaceAll("\n", "\n  ")}`).join(",\n");
    return `Closure(${this.name}, capturing [\n${body}\n])`;
  }
}
