/**
 * The reference protocol over every value kind a register can hold (seed
 * 004: one header — here one set of functions — for all objects).
 *
 * - `NDArray`, `Storage` and `Closure` count references themselves.
 * - A tuple is a plain JS array (that is what users pass and get back). One
 *   made by `vm.builtin.make_tuple` is *managed*: it holds a reference to each
 *   element and counts its own holders under a private symbol. Arrays the
 *   user passes in are not managed: the user owns them and their elements.
 * - Numbers, strings, shapes, dtypes, devices, null: nothing to count.
 *
 * A fresh value (a builtin's result) has no references ("floating"); storing
 * it in a register retains it; overwriting or releasing the register, or the
 * end of the frame, releases it. A discarded result is freed at once
 * (`releaseIfUnowned`).
 *
 * @module
 */

import { Closure } from "./closure.ts";
import { NDArray } from "../devices/ndarray.ts";
import { Storage } from "../devices/storage.ts";

const TUPLE_REFS = Symbol("relaxvm.tupleRefs");

type ManagedTuple = unknown[] & { [TUPLE_REFS]?: number };

/** Makes a managed tuple holding a reference to each element. */
export function makeTuple(elements: readonly unknown[]): unknown[] {
  const t: ManagedTuple = [...elements];
  for (const v of t) retainValue(v);
  Object.defineProperty(t, TUPLE_REFS, { value: 0, writable: true, enumerable: false });
  return t;
}

function isManagedTuple(v: unknown[]): v is ManagedTuple & { [TUPLE_REFS]: number } {
  return (v as ManagedTuple)[TUPLE_REFS] !== undefined;
}

function dropTuple(t: ManagedTuple): void {
  t[TUPLE_REFS] = undefined;
  for (const v of t) releaseValue(v);
}

/** Adds a reference to `v` (no-op for values that own no memory). */
export function retainValue(v: unknown): void {
  if (typeof v !== "object" || v === null) return;
  if (v instanceof NDArray || v instanceof Closure || v instanceof Storage) v.retain();
  else if (Array.isArray(v) && isManagedTuple(v)) v[TUPLE_REFS]++;
}

/** Drops a reference to `v`; the last one frees what it holds. */
export function releaseValue(v: unknown): void {
  if (typeof v !== "object" || v === null) return;
  if (v instanceof NDArray || v instanceof Closure || v instanceof Storage) v.release();
  else if (Array.isArray(v) && isManagedTuple(v)) {
    if (v[TUPLE_REFS] > 0) v[TUPLE_REFS]--;
    if (v[TUPLE_REFS] === 0) dropTuple(v);
  }
}

/** Drops a reference without freeing (the value becomes floating again). */
export function disownValue(v: unknown): void {
  if (typeof v !== "object" || v === null) return;
  if (v instanceof NDArray || v instanceof Closure || v instanceof Storage) v.disown();
  else if (Array.isArray(v) && isManagedTuple(v) && v[TUPLE_REFS] > 0) v[TUPLE_REFS]--;
}

/** Frees `v` if nothing holds it (a result nobody stored). */
export function releaseIfUnowned(v: unknown): void {
  if (typeof v !== "object" || v === null) return;
  if (v instanceof NDArray || v instanceof Closure || v instanceof Storage) v.releaseIfUnowned();
  else if (Array.isArray(v) && isManagedTuple(v) && v[TUPLE_REFS] === 0) dropTuple(v);
}

/**
 * Hands a result to the user. Tensors get a user reference (`dispose()`
 * drops it); a managed tuple becomes a plain array whose elements the user
 * owns; a closure keeps what it captured for as long as the user has it.
 */
export function exportValue(v: unknown): unknown {
  if (typeof v !== "object" || v === null) return v;
  if (v instanceof NDArray) return v.handToUser();
  if (v instanceof Closure) return v.handToUser();
  if (Array.isArray(v)) {
    const out = v.map(exportValue);
    releaseIfUnowned(v);
    return out;
  }
  return v;
}
