/**
 * The object protocol (seed 004: one object header for every runtime object).
 * Every value that owns memory — tensors, storages, closures, tuples, and
 * every later kind — is a `VMObject`, so the VM, the builtins and users
 * handle all of them with the same few calls, and each kind writes only how
 * it is freed.
 *
 * ## Lifetime
 *
 * An object counts its holders. A fresh object (a builtin's result) has
 * none: it is *floating*. Storing it in a register, a tuple, a closure or the
 * constant pool retains it; overwriting or releasing the holder releases it.
 * When the last holder releases it, the object frees what it owns, at that
 * moment rather than when the garbage collector runs. Freeing is iterative:
 * objects freed while another is being freed (the fields of a tuple, the
 * captured values of a closure) wait in a queue that the outermost free
 * drains, so a chain of a million nested tuples frees without exhausting the
 * JavaScript stack.
 *
 * | call                 | effect                                                     |
 * | -------------------- | ---------------------------------------------------------- |
 * | `retain()`           | one more holder (throws once the object is freed)          |
 * | `release()`          | one holder less; with none left, free                      |
 * | `disown()`           | one holder less, never free: back to floating               |
 * | `releaseIfUnowned()` | free if nobody holds it (a discarded result)               |
 * | `kill()`             | free now, whoever holds it (`vm.builtin.kill`); not pinned  |
 * | `pin()`              | `kill()` refuses from now on (a constant of an executable) |
 * | `handToUser()`       | the user becomes a holder (once); what the VM returns      |
 * | `dispose()`          | the user lets go (also `using`); frees a floating object   |
 *
 * The calls other than `dispose()` are the library's own (the VM, the
 * builtins, the allocators): they carry `@ignore`, so the published docs
 * show users `dispose()`, `disposed` and `using` only.
 *
 * Values that own nothing (numbers, strings, shapes, dtypes, devices, null,
 * arrays a user passes in) take part in none of this: the helpers below
 * accept any value and do nothing for those. They recognize objects with
 * `VMObject.is` (`isVMObject`), which never throws, so a value from a packed
 * function — a revoked Proxy, an object whose traps throw — cannot make the
 * VM fail while it releases its registers.
 *
 * @module
 */

import { brand, type Branded, brandKey, ordinaryInstanceOf } from "./brand.ts";
import { INSPECT } from "./inspect.ts";

const VM_OBJECT_BRAND = brandKey("VMObject");

/** A runtime object with a reference count; each kind implements `free()`. */
export abstract class VMObject {
  static {
    brand(this, VM_OBJECT_BRAND);
  }

  /**
   * True for a `VMObject` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static [Symbol.hasInstance](v: unknown): v is VMObject {
    if (this !== VMObject) return ordinaryInstanceOf.call(this, v);
    return typeof v === "object" && v !== null && (v as Branded)[VM_OBJECT_BRAND] === true;
  }

  #refs = 0;
  #freed = false;
  #userHeld = false;
  #pinned = false;

  /**
   * Whether `v` is a `VMObject` of any copy of relaxvm, and never throws: an
   * object of this copy by its private field (no Proxy trap runs), another
   * copy's by its brand, read in a `try` (a revoked Proxy, or one whose `get`
   * trap throws, is not a `VMObject`).
   *
   * @ignore
   */
  static is(v: object): v is VMObject {
    // Small enough for V8 to inline where the VM stores every result; the rest is a call.
    return #refs in v || VMObject.#isForeign(v);
  }

  /** Whether `v` carries the brand of another copy's `VMObject`; false if reading it throws. */
  static #isForeign(v: object): boolean {
    try {
      return (v as Branded)[VM_OBJECT_BRAND] === true;
    } catch {
      return false;
    }
  }

  /**
   * Number of holders now.
   *
   * @ignore
   */
  get refCount(): number {
    return this.#refs;
  }

  /** True once the object has freed what it owns; any further use throws. */
  get disposed(): boolean {
    return this.#freed;
  }

  /**
   * Adds a holder.
   *
   * @ignore
   */
  retain(): this {
    if (this.disposed) throw this.usedAfterFree();
    this.#refs++;
    return this;
  }

  /**
   * Drops a holder; the last one frees the object.
   *
   * @ignore
   */
  release(): void {
    if (this.#freed) return;
    if (this.#refs > 0) this.#refs--;
    if (this.#refs === 0) this.#free();
  }

  /**
   * Drops a holder without freeing: the object is floating again.
   *
   * @ignore
   */
  disown(): void {
    if (this.#refs > 0) this.#refs--;
  }

  /**
   * Frees the object if nobody holds it (a result that was discarded).
   *
   * @ignore
   */
  releaseIfUnowned(): void {
    if (!this.#freed && this.#refs === 0) this.#free();
  }

  /**
   * Frees the object now, whoever still holds it; later uses throw. A pinned
   * object (`pin()`) is not freed: this throws a `TypeError` instead.
   *
   * @ignore
   */
  kill(): void {
    if (this.#pinned) {
      throw new TypeError(
        `${this} is a constant of the executable, which every VM running it shares: it cannot be killed`,
      );
    }
    if (!this.#freed) this.#free();
  }

  /**
   * Marks the object as belonging to something that outlives any one run (an
   * executable's constant pool): `kill()` refuses it from now on. Holders
   * still count as usual, so the owner's own release frees it.
   *
   * @ignore
   */
  pin(): this {
    this.#pinned = true;
    return this;
  }

  /**
   * Whether `pin()` was called.
   *
   * @ignore
   */
  get pinned(): boolean {
    return this.#pinned;
  }

  /**
   * Makes the user a holder (once, however often it is handed over), so
   * `dispose()` knows what to drop; returns what the user receives.
   *
   * @ignore
   */
  handToUser(): unknown {
    if (!this.#userHeld) {
      this.retain();
      this.#userHeld = true;
      this.heldBeyondFrames();
    }
    return this;
  }

  /**
   * Called once a holder other than a frame register takes a reference: the
   * user (`handToUser`), a tuple, a closure, a saved argument
   * (`retainValue`). Such a holder can be dropped without releasing its
   * references (a user forgets `dispose()`, a closure handed out is
   * collected), while frame registers are always released by the protocol,
   * whether the call returns or throws. Kinds that keep a garbage-collection
   * safety net install it here instead of on every object, because the
   * safety net costs more than a small kernel (see devices/ndarray.ts).
   * Called once or more; never on a freed object.
   *
   * @ignore
   */
  heldBeyondFrames(): void {}

  /**
   * Drops the caller's reference: the object is freed now unless the VM
   * still holds it (a constant, a saved argument, a captured value). That
   * covers an object the caller made and nobody holds yet, such as a
   * temporary tensor from `NDArray.empty` inside a packed function
   * (`using tmp = NDArray.empty(...)`). Calling it twice is harmless.
   */
  dispose(): void {
    if (this.#freed) return;
    if (this.#userHeld) {
      this.#userHeld = false;
      this.release();
    } else if (this.#refs === 0) {
      this.#free();
    }
  }

  /** `using x = ...` disposes at the end of the scope. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /**
   * Frees what this object owns; called once, by the protocol.
   *
   * @ignore
   */
  protected abstract free(): void;

  /** A short name for messages: `NDArray(float32, [2], cpu(0))`, `Closure(f)`. */
  abstract toString(): string;

  /**
   * Shown by `console.log` and `deno repl`: `toString()`, with `<released>`
   * once freed. Kinds with more to show (a tensor's values, a closure's
   * captured values) print their own.
   *
   * @example
   * ```ts
   * import { ExecBuilder, type Storage, VirtualMachine } from "@relaxvm/relaxvm";
   *
   * const ib = new ExecBuilder();
   * ib.function("storage", { num_inputs: 0 }, () => {
   *   ib.emit_call("vm.builtin.alloc_storage", [ib.vm_state(), [8], ib.imm(0), "float32", "global"], {
   *     dst: ib.r(0),
   *   });
   *   ib.emit_ret(ib.r(0));
   * });
   * using s = await new VirtualMachine(ib.get()).invoke<Storage>("storage");
   * console.log(s); // Storage(32 bytes, cpu(0))
   * ```
   */
  [INSPECT](_inspect?: (v: unknown) => string): string {
    return this.disposed ? `${this} <released>` : this.toString();
  }

  /**
   * The error for a use after free; kinds may name themselves better.
   *
   * @ignore
   */
  protected usedAfterFree(): Error {
    return new ReferenceError(`${this} was used after its memory was released`);
  }

  #free(): void {
    this.#freed = true;
    if (draining) {
      waiting.push(this);
      return;
    }
    draining = true;
    try {
      this.free();
      for (let next = waiting.pop(); next !== undefined; next = waiting.pop()) next.free();
    } finally {
      draining = false;
    }
  }
}

/** Whether a free is running: objects it frees wait in `waiting` instead of recursing. */
let draining = false;
/** Objects marked freed whose `free()` has not run yet. */
const waiting: VMObject[] = [];

/** Whether `v` is a `VMObject` (by brand: never runs a Proxy trap, never throws). */
export function isVMObject(v: unknown): v is VMObject {
  return typeof v === "object" && v !== null && VMObject.is(v);
}

/**
 * Adds a holder to `v` if it is an object (no-op for values that own
 * nothing). This is how holders that outlive a frame — tuples, closures,
 * saved and stateful arguments — take their reference; frame registers call
 * `retain()` itself.
 */
export function retainValue(v: unknown): void {
  if (isVMObject(v)) {
    v.retain();
    v.heldBeyondFrames();
  }
}

/** Drops a holder of `v`; the last one frees it. */
export function releaseValue(v: unknown): void {
  if (isVMObject(v)) v.release();
}

/** Drops a holder of `v` without freeing it (it becomes floating again). */
export function disownValue(v: unknown): void {
  if (isVMObject(v)) v.disown();
}

/** Frees `v` if nothing holds it (a result nobody stored). */
export function releaseIfUnowned(v: unknown): void {
  if (isVMObject(v)) v.releaseIfUnowned();
}

/**
 * Hands a result to the user: objects make the user a holder (a tuple
 * becomes a plain array of exported fields); arrays the user passed in are
 * exported field by field; everything else is returned as is (a revoked
 * Proxy included: it is not inspected).
 */
export function exportValue(v: unknown): unknown {
  if (typeof v !== "object" || v === null) return v;
  if (VMObject.is(v)) return v.handToUser();
  let array = false;
  try {
    array = Array.isArray(v);
  } catch {
    // A revoked Proxy: returned as it is.
  }
  return array ? (v as unknown[]).map(exportValue) : v;
}
