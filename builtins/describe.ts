/**
 * How builtins name a value in error messages, and how they prefix the
 * error context that TVM's compiler passes to its checks.
 *
 * @module
 */

import { NDArray } from "../devices/ndarray.ts";
import { Tuple } from "../ground/tuple.ts";

/** A short description of a value for error messages. */
export function describe(v: unknown): string {
  if (v === null) return "null";
  if (v === undefined) return "undefined";
  if (v instanceof NDArray) return v.toString();
  if (Array.isArray(v) || v instanceof Tuple) return `a tuple of ${v.length}`;
  if (typeof v === "function") return `function ${v.name || "anonymous"}`;
  if (typeof v === "object") return v.constructor?.name ?? "an object";
  return `${typeof v} ${String(v)}`;
}

/**
 * The prefix for an `err_ctx` argument: TVM's shape lowering passes strings
 * such as `"ErrorContext(fn=main, loc=param[0], param=x, annotation=...) "`
 * (with a trailing space), or `""` when contexts are off. Empty, null or
 * absent: no prefix; otherwise the trimmed context and `": "`.
 */
export function contextPrefix(errCtx: unknown): string {
  if (typeof errCtx !== "string") return "";
  const text = errCtx.trim();
  return text === "" ? "" : `${text}: `;
}
