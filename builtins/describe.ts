/**
 * How builtins name a value in error messages.
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
  if (typeof v === "object") return v.constructor?.name ?? "an object";
  return `${typeof v} ${String(v)}`;
}
