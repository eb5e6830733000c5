/**
 * Results handed from the VM to its caller: what makes one impossible to
 * hand out (a freed object in it, nesting too deep), how `invokeTensor`
 * describes and drops a result that is not a tensor.
 *
 * @module
 */

import { VMError } from "../ground/errors.ts";
import { exportValue, isVMObject, releaseIfUnowned } from "../ground/object.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";
import { Tuple } from "../ground/tuple.ts";

/**
 * Hands a result of `@name` to the user. A result that holds a freed
 * object (the program killed it, then returned it) or nests too deeply is a
 * `VMError`, and what it holds is released: handing out part of it would
 * leave the rest held forever.
 */
export function exportResult(name: string, v: unknown): unknown {
  if (typeof v !== "object" || v === null) return v;
  const problem = resultProblem(v);
  if (problem !== null) {
    releaseIfUnowned(v);
    throw new VMError(
      { functionName: name, pc: -1, instruction: "", packedFunc: "" },
      `@${name} returned ${problem}`,
    );
  }
  return exportValue(v);
}

/**
 * How deeply tuples and arrays may nest in a result handed to the user:
 * handing out is recursive, and a program can build a chain of a million
 * nested tuples in a loop.
 */
export const MAX_RESULT_DEPTH = 1000;

/**
 * What makes `v` impossible to hand out — a freed object in it or in the
 * tuples and arrays it holds, or nesting deeper than `MAX_RESULT_DEPTH` —
 * described, or null. Walks without recursion, each object once.
 */
function resultProblem(v: unknown): string | null {
  const seen = new Set<object>();
  const todo: [unknown, number][] = [[v, 0]];
  while (todo.length > 0) {
    const [x, depth] = todo.pop()!;
    if (typeof x !== "object" || x === null || seen.has(x)) continue;
    seen.add(x);
    let fields: readonly unknown[] | null = null;
    if (isVMObject(x)) {
      if (x.disposed) return `${shortText(x)}, whose memory was already released`;
      if (x instanceof Tuple) fields = x.fields;
    } else {
      try {
        if (Array.isArray(x)) fields = x;
      } catch {
        // A revoked Proxy: not a container.
      }
    }
    if (fields === null) continue;
    if (depth >= MAX_RESULT_DEPTH) {
      return `tuples nested more than ${MAX_RESULT_DEPTH} deep, which cannot be handed out`;
    }
    for (const f of fields) todo.push([f, depth + 1]);
  }
  return null;
}

/** What a result is, for `invokeTensor`'s message: `the number 3`, `an array of 2 values`. */
export function describeResult(v: unknown): string {
  if (v === null) return "null";
  if (v === undefined) return "nothing";
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") {
    return `the ${typeof v} ${String(v)}`;
  }
  if (typeof v === "string") return `a string`;
  if (Array.isArray(v)) return `an array (tuple) of ${v.length} value${v.length === 1 ? "" : "s"}`;
  if (v instanceof ShapeTuple) return `the shape ${v}`;
  if (typeof v === "object") return shortText(v);
  return `a ${typeof v}`;
}

/** Drops the user's hold on everything `invokeTensor` was handed and will not return. */
export function disposeResult(v: unknown): void {
  const todo = [v], seen = new Set<unknown>();
  while (todo.length > 0) {
    const x = todo.pop();
    if (seen.has(x)) continue;
    seen.add(x);
    if (isVMObject(x)) x.dispose();
    else if (Array.isArray(x)) todo.push(...x);
  }
}

/** A short name for an object in a message (a tuple's own `toString` recurses into its fields). */
function shortText(x: object): string {
  if (x instanceof Tuple) return `a tuple of ${x.length}`;
  try {
    return String(x);
  } catch {
    return "an object";
  }
}
