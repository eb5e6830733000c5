/**
 * `ShapeTuple`: TVM's immutable tuple of integers, used for tensor shapes and
 * by the shape heap builtins.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "./brand.ts";

const SHAPE_TUPLE_BRAND = brandKey("ShapeTuple");

/**
 * An immutable, iterable tuple of integers.
 *
 * @example
 * ```ts
 * import { shape } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const s = shape(2, 3);
 * assertEquals(s.length, 2);
 * assertEquals(s.at(-1), 3);
 * assertEquals([...s], [2, 3]);
 * ```
 */
export class ShapeTuple implements Iterable<number> {
  static {
    brand(this, SHAPE_TUPLE_BRAND);
  }

  /**
   * True for a `ShapeTuple` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static [Symbol.hasInstance](v: unknown): v is ShapeTuple {
    return typeof v === "object" && v !== null && (v as Branded)[SHAPE_TUPLE_BRAND] === true;
  }

  readonly #dims: readonly number[];

  /** Makes a tuple; every element must be an integer. */
  constructor(dims: Iterable<number>) {
    const copy = [...dims];
    for (const d of copy) {
      if (!Number.isSafeInteger(d)) {
        throw new TypeError(`ShapeTuple elements must be integers, got ${d}`);
      }
    }
    this.#dims = Object.freeze(copy);
  }

  /** Number of elements. */
  get length(): number {
    return this.#dims.length;
  }

  /** Element `i`; negative indices count from the end. */
  at(i: number): number | undefined {
    return this.#dims.at(i);
  }

  /** The elements as a frozen array (no copy). */
  get dims(): readonly number[] {
    return this.#dims;
  }

  /** Iterates over the elements. */
  [Symbol.iterator](): Iterator<number> {
    return this.#dims[Symbol.iterator]();
  }

  /** Structural equality. */
  equals(other: ShapeTuple): boolean {
    const a = this.#dims, b = other.dims; // public: `other` may come from another copy (ground/brand.ts)
    return a.length === b.length && a.every((d, i) => d === b[i]);
  }

  /** TVM's spelling: `(2, 3)`. */
  toString(): string {
    return this.#dims.length === 1 ? `(${this.#dims[0]},)` : `(${this.#dims.join(", ")})`;
  }

  /** Shown by `console.log` and `Deno.inspect`. */
  [Symbol.for("Deno.customInspect")](): string {
    return `ShapeTuple${this.toString()}`;
  }
}

/**
 * Makes a `ShapeTuple`.
 *
 * @example
 * ```ts
 * import { shape } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * assertEquals(String(shape(4, 5)), "(4, 5)");
 * ```
 */
export function shape(...dims: number[]): ShapeTuple {
  return new ShapeTuple(dims);
}
