/**
 * The builder's constant pool: `convert_constant` returns the same index
 * for equal values (same number — `-0` and `NaN` included, same bigint, same string,
 * shape, dtype, or a tensor with the same dtype, shape and bytes).
 *
 * @module
 */

import { DataType } from "../ground/dtype.ts";
import type { ConstantValue } from "../program/program_data.ts";
import { sameConstant, tensorBytes } from "../program/constant_equality.ts";
import { NDArray } from "../devices/ndarray.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";

/** Values `convert_constant` accepts. */
export type ConstantInput = ConstantValue | readonly number[];

function fnv1a(bytes: Uint8Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  return h >>> 0;
}

/** A value-keyed constant pool. */
export class ConstantPool {
  readonly values: ConstantValue[] = [];
  readonly #index = new Map<string, number[]>();

  /** The pool index of `value`, adding it when new. */
  intern(input: ConstantInput): number {
    const value = normalize(input);
    const key = keyOf(value);
    const candidates = this.#index.get(key);
    if (candidates !== undefined) {
      for (const i of candidates) if (sameConstant(this.values[i], value)) return i;
    }
    // The pool keeps the tensor alive even if the user disposes it.
    if (value instanceof NDArray) value.retain();
    this.values.push(value);
    if (candidates === undefined) this.#index.set(key, [this.values.length - 1]);
    else candidates.push(this.values.length - 1);
    return this.values.length - 1;
  }

  /** Number of entries. */
  get length(): number {
    return this.values.length;
  }

  /** Drops the entries from index `length` on (the builder's undo), releasing their tensors. */
  truncate(length: number): void {
    while (this.values.length > length) {
      const i = this.values.length - 1;
      const value = this.values.pop()!;
      const key = keyOf(value);
      const candidates = this.#index.get(key)!;
      candidates.splice(candidates.indexOf(i), 1);
      if (candidates.length === 0) this.#index.delete(key);
      if (value instanceof NDArray) value.release();
    }
  }
}

/**
 * Throws the `TypeError` `intern` would throw for `input`, without adding
 * it: what the builder checks before it changes anything.
 */
export function checkConstant(input: ConstantInput): void {
  normalize(input);
}

function normalize(input: ConstantInput): ConstantValue {
  if (Array.isArray(input)) {
    if (!input.every((d) => Number.isSafeInteger(d))) {
      throw new TypeError(
        `convert_constant: a number[] constant is a shape and holds integers, got [${
          input.map((d) => typeof d === "string" ? JSON.stringify(d) : String(d)).join(", ")
        }]`,
      );
    }
    return new ShapeTuple(input as readonly number[]);
  }
  const value = input as ConstantValue;
  if (
    typeof value === "number" || typeof value === "bigint" || typeof value === "string" ||
    value instanceof ShapeTuple ||
    value instanceof DataType
  ) {
    return value;
  }
  if (value instanceof NDArray) {
    if (value.disposed) {
      throw new TypeError(`convert_constant: ${value} was disposed; a constant needs live data`);
    }
    if (value.device.kind !== "cpu") {
      throw new TypeError(
        `convert_constant: tensor constants must be on the CPU, got one on ${value.device}`,
      );
    }
    return value;
  }
  throw new TypeError(
    `convert_constant: cannot make a constant of ${
      describe(input)
    }; a constant is a number, a bigint (an Int), a string, a ShapeTuple or number[] (a shape), a DataType or a CPU NDArray`,
  );
}

/** How a value that cannot be a constant is named in messages. */
export function describe(v: unknown): string {
  if (v === null || v === undefined) return String(v);
  if (typeof v === "string") return `the string ${JSON.stringify(v)}`;
  if (typeof v === "function") return "a function";
  if (typeof v !== "object") return `${typeof v} ${String(v)}`;
  if (Array.isArray(v)) return `an array [${v.map((x) => typeof x).join(", ")}]`;
  const name = (v as { constructor?: { name?: string } }).constructor?.name;
  return name === undefined || name === "Object" ? "an object" : `a ${name}`;
}

function keyOf(v: ConstantValue): string {
  if (typeof v === "number") return Object.is(v, -0) ? "n:-0" : `n:${v}`;
  if (typeof v === "bigint") return `i:${v}`;
  if (typeof v === "string") return `s:${v}`;
  if (v instanceof ShapeTuple) return `shape:${[...v].join(",")}`;
  if (v instanceof DataType) return `dtype:${v}`;
  return `tensor:${v.dtype}:${v.shape.join(",")}:${fnv1a(tensorBytes(v))}`;
}
