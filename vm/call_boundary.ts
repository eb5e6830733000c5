/**
 * What crosses the boundary of a call in the VM, checked without running
 * foreign code unguarded: arguments that were already freed, thrown values
 * (any value, a revoked Proxy included), Promises and thenables a packed
 * function returns, and the condition an `If` reads.
 *
 * @module
 */

import { scalarTruth, tensorTruth } from "../devices/condition.ts";
import { NDArray } from "../devices/ndarray.ts";
import { VMError } from "../ground/errors.ts";
import { VMObject } from "../ground/object.ts";
import { LimitExceeded } from "./invocation.ts";

/**
 * Throws a `VMError` if an argument of `@name` is an object that was already
 * freed, before anything holds any of them: retaining it would throw halfway
 * and leave the arguments before it held forever.
 */
export function checkArgumentsLive(name: string, args: readonly unknown[]): void {
  for (let i = 0; i < args.length; i++) {
    const v = args[i];
    if (typeof v === "object" && v !== null && VMObject.is(v) && isDisposed(v)) {
      throw new VMError(
        { functionName: name, pc: -1, instruction: "", packedFunc: "" },
        `Argument ${i} of @${name}, ${
          safeText(v)
        }, was used after its memory was released (it was disposed or killed)`,
      );
    }
  }
}

/** `v.disposed`; true when even that throws (a Proxy of an object: it cannot be held). */
export function isDisposed(v: VMObject): boolean {
  try {
    return v.disposed;
  } catch {
    return true;
  }
}

/** `String(v)`, or a placeholder when that throws. */
export function safeText(v: unknown): string {
  try {
    return String(v);
  } catch {
    return "a value that cannot be shown";
  }
}

/**
 * A one-line reason for a thrown value, without running any of its code
 * unguarded: a `message` or `toString` that throws, a revoked Proxy or a
 * Proxy whose traps throw all give a placeholder.
 */
export function reasonOf(e: unknown): string {
  try {
    if (typeof e === "symbol") return e.toString();
    if (typeof e !== "object" && typeof e !== "function") return String(e);
    if (e === null) return "null";
    if (e instanceof Error) {
      const message: unknown = e.message;
      if (typeof message !== "string") return "a packed function threw an Error without a message";
      // V8's RangeError "Maximum call stack size exceeded", or the SyntaxError of a regular
      // expression that ran out of stack while an error near the top was being described.
      if (
        (e instanceof RangeError && message.includes("call stack")) ||
        (message.includes("regular expression") && message.includes("Stack overflow"))
      ) {
        return STACK_OVERFLOW;
      }
      return message;
    }
    const text: unknown = String(e);
    return typeof text === "string" ? text : "a packed function threw a value that cannot be shown";
  } catch {
    // Describing the value failed: near the top of the stack, that is the stack itself.
    try {
      if (e instanceof RangeError) return STACK_OVERFLOW;
    } catch {
      // A revoked Proxy.
    }
    return "a packed function threw a value that cannot be shown";
  }
}

/** What a JavaScript stack overflow inside a call is reported as, in every dispatch form. */
const STACK_OVERFLOW =
  "Call stack overflow: the JavaScript stack ran out (a maxCallDepth above the default, or deep recursion in a packed function)";

/**
 * `v` as a Promise when it is one or a thenable (an object with a callable
 * `then`), else null. Never throws: a `then` that cannot be read (a getter
 * that throws, a revoked Proxy) gives a rejected Promise, as the language's
 * own promise resolution does, and `then` is called in a later microtask.
 * `VMObject`s are never thenables.
 */
export function asPromise(v: object): Promise<unknown> | null {
  if (VMObject.is(v)) return null;
  let then: unknown;
  try {
    if (v instanceof Promise) return v;
    then = (v as { then?: unknown }).then;
  } catch (e) {
    return Promise.reject(e);
  }
  if (typeof then !== "function") return null;
  return Promise.resolve().then(() =>
    new Promise((resolve, reject) => Reflect.apply(then as () => void, v, [resolve, reject]))
  );
}

/** `e` if it is the VM's own `LimitExceeded`, else null (never running a Proxy's traps unguarded). */
export function limitOf(e: unknown): LimitExceeded | null {
  try {
    return e instanceof LimitExceeded ? e : null;
  } catch {
    return null;
  }
}

/** Parks `frame` at `pc` on `v` if it is a Promise or a thenable (`asPromise`). */
export function parkPromise(
  frame: { pc: number; pending: Promise<unknown> | null },
  pc: number,
  v: object,
): boolean {
  const p = asPromise(v);
  if (p === null) return false;
  frame.pc = pc;
  frame.pending = p;
  return true;
}

/** Whether `e` is a `VMError`, without running a Proxy's traps unguarded. */
export function isVMError(e: unknown): e is VMError {
  try {
    return e instanceof VMError;
  } catch {
    return false;
  }
}

/**
 * The truth of an `If` condition (devices/condition.ts): a number, bigint or
 * boolean, or a one-element CPU tensor; a GPU tensor needs
 * `vm.builtin.read_if_cond`, which waits for it.
 */
export function isTruthy(v: unknown): boolean {
  const scalar = scalarTruth(v);
  if (scalar !== undefined) return scalar;
  if (v instanceof NDArray && v.size === 1 && v.device.kind === "cpu") {
    return tensorTruth(v, "If") as boolean;
  }
  throw new TypeError(
    `If needs a number, boolean or 1-element CPU tensor as its condition, got ${
      v instanceof NDArray ? v.toString() : v === undefined ? "undefined" : typeof v
    } (read GPU conditions with vm.builtin.read_if_cond)`,
  );
}
