/**
 * Argument validation shared by the builtins. A builtin runs on whatever a
 * program hands it — and a program may come from a file nobody checked — so
 * it checks its arguments at its boundary, before it allocates or touches
 * any memory, and never returns a malformed tensor or shape: every shape a
 * builtin makes or views has dimensions that are non-negative safe integers
 * whose product is a safe integer too. Failures are `TypeError`s (wrong
 * kind) and `RangeError`s (wrong value) whose messages start with the
 * builtin's short name (`who`), like every other error of the builtins.
 *
 * @module
 */

import { beforeLargeInput } from "../devices/allocation_context.ts";
import { NDArray } from "../devices/ndarray.ts";
import { DataType, type TensorDType, tensorDType } from "../ground/dtype.ts";
import { isVMObject } from "../ground/object.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";
import { describe } from "./describe.ts";

/** `[2, 3]` for messages, with values of any kind shown safely. */
function listText(values: readonly unknown[]): string {
  const shown = values.slice(0, 8).map((v) =>
    typeof v === "number" || typeof v === "bigint" ? String(v) : describe(v)
  );
  return `[${shown.join(", ")}${values.length > 8 ? ", …" : ""}]`;
}

/**
 * Checks that `dims` is a valid tensor shape: every dimension a
 * non-negative safe integer, and the element count a safe integer. Returns
 * `dims`; throws a `RangeError` naming `who` and `what` (say, "shape").
 */
export function checkDims(dims: readonly unknown[], who: string, what = "shape"): number[] {
  let size = 1;
  for (let i = 0; i < dims.length; i++) {
    const d = dims[i];
    if (typeof d !== "number" || !Number.isSafeInteger(d) || d < 0) {
      throw new RangeError(
        `${who}: ${what} ${listText(dims)} has dimension ${i} = ${
          typeof d === "number" ? d : describe(d)
        }; dimensions must be non-negative integers`,
      );
    }
    size *= d;
  }
  if (!Number.isSafeInteger(size)) {
    throw new RangeError(`${who}: ${what} ${listText(dims)} has more than 2^53 elements`);
  }
  return dims as number[];
}

/**
 * A tensor shape given as a `ShapeTuple` or an array of integers, checked
 * with `checkDims`. Throws a `TypeError` for anything else.
 */
export function shapeArg(v: unknown, who: string, what = "shape"): readonly number[] {
  if (v instanceof ShapeTuple) return checkDims(v.dims, who, what);
  if (Array.isArray(v)) return checkDims(v, who, what);
  throw new TypeError(
    `${who}: ${what} must be a ShapeTuple or an array of integers, got ${describe(v)}`,
  );
}

/** A tensor dtype given as a `DataType` or its spelling; a `TypeError` naming `who` otherwise. */
export function dtypeArg(v: unknown, who: string, what = "dtype"): TensorDType {
  if (typeof v === "string" || v instanceof DataType) {
    try {
      return tensorDType(v);
    } catch (e) {
      throw new TypeError(
        `${who}: ${what} ${describe(v)} is not a tensor dtype (${
          e instanceof Error ? e.message : String(e)
        })`,
      );
    }
  }
  throw new TypeError(`${who}: ${what} must be a DataType or a string, got ${describe(v)}`);
}

/**
 * An integer argument (a safe integer, at least `min`); a `TypeError` for
 * another kind, a `RangeError` below `min`, each naming `who` and `what`.
 */
export function integerArg(v: unknown, what: string, who: string, min = -Infinity): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v)) {
    throw new TypeError(`${who}: ${what} must be an integer, got ${describe(v)}`);
  }
  if (v < min) throw new RangeError(`${who}: ${what} must be at least ${min}, got ${v}`);
  return v;
}

/**
 * An integer argument that TVM also accepts as a boolean (0/1), such as
 * `ndim` of the runtime checks; a `TypeError` naming `who` and `what` for
 * another kind.
 */
export function integerOrBooleanArg(v: unknown, what: string, who: string): number {
  if (typeof v === "boolean") return v ? 1 : 0;
  return integerArg(v, what, who);
}

/**
 * A tensor argument, live, and of `dtype` when given: a `TypeError` for
 * another kind or dtype, a `ReferenceError` for a tensor whose memory was
 * released, each naming `who` and `what` (say, `argument 0 (x)`).
 */
export function tensorArg(v: unknown, what: string, who: string, dtype?: TensorDType): NDArray {
  if (!(v instanceof NDArray)) {
    // A JS array is a tuple to the VM (TVM's Array), so `invoke(f, [1, 2])` lands here.
    const hint = Array.isArray(v)
      ? "; a JS array is a tuple to the VM: pass tensor([...]) for a tensor"
      : "";
    throw new TypeError(`${who}: ${what} must be a tensor (NDArray), got ${describe(v)}${hint}`);
  }
  if (v.disposed) {
    throw new ReferenceError(`${who}: ${what} was used after its memory was released`);
  }
  if (dtype !== undefined && v.dtype !== dtype) {
    throw new TypeError(`${who}: ${what} must be ${dtype}, got ${v.dtype}`);
  }
  beforeLargeInput(v.nbytes);
  return v;
}

/**
 * Throws a `ReferenceError` naming `who` if one of `values` is an object
 * whose memory was released: a builtin that holds its arguments (a tuple, a
 * closure) checks them all before it holds any, or the ones before a freed
 * one would stay held forever.
 */
export function checkLive(values: readonly unknown[], who: string, what = "argument"): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (isVMObject(v) && v.disposed) {
      throw new ReferenceError(
        `${who}: ${what} ${i}, ${v}, was used after its memory was released`,
      );
    }
  }
}

/**
 * Throws a `TypeError` naming `who` if tensor `t` is read-only: a constant
 * of the executable or a cached tensor, or a view of one's memory (a
 * reshape: read-only belongs to the memory, see `BlockAccess` in devices/storage.ts).
 * Every VM that runs the executable, every program that reads the cache,
 * shares it, so a builtin that writes in place (a shape heap, the logits a
 * sampling step changes) must not write into it. Every in-place writer
 * calls this before it writes: it also ends the tensor's seal.
 */
export function checkWritable(
  t: { readonly readOnly: boolean; unseal?(): void },
  who: string,
  what: string,
): void {
  if (t.readOnly) {
    throw new TypeError(
      `${who}: ${what} is read-only (a constant of the executable or a cached tensor, or a view of one), shared by every program that uses it: it cannot be changed in place`,
    );
  }
  // A copy the CPU kernels keep of a sealed tensor (NDArray.seal) would go stale.
  t.unseal?.();
}
