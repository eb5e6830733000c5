/**
 * How builtins name a value in error messages, and how they prefix the
 * error context that TVM's compiler passes to its checks.
 *
 * @module
 */

import { NDArray } from "../devices/ndarray.ts";
import { DataType } from "../ground/dtype.ts";
import { quoted } from "../ground/printable.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";
import { Tuple } from "../ground/tuple.ts";

/**
 * A short description of any value for error messages, the one every
 * builtin uses: `number 5`, `string "x"`, `a tuple of 2 [number 1, number 2]`,
 * `ShapeTuple[2, 3]`, `DataType(float32)`, a tensor as it prints.
 */
export function describe(v: unknown): string {
  if (v === null || v === undefined) return String(v);
  if (v instanceof NDArray) return String(v);
  if (v instanceof ShapeTuple) return `ShapeTuple${v}`;
  if (v instanceof DataType) return `DataType(${v})`;
  if (v instanceof Tuple) return `a tuple of ${v.length}`;
  if (typeof v === "string") return `string ${quoted(v.length > 60 ? `${v.slice(0, 60)}…` : v)}`;
  // An array is how a tuple reaches JavaScript (users receive tuples as arrays).
  if (Array.isArray(v)) {
    if (v.length === 0) return "a tuple of 0";
    return `a tuple of ${v.length} [${v.slice(0, 4).map(describe).join(", ")}${
      v.length > 4 ? ", …" : ""
    }]`;
  }
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
