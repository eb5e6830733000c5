/**
 * Brands: `instanceof` that works across copies of the library.
 *
 * When a program loads relaxvm twice (see ground/shared.ts), each copy has
 * its own `NDArray`, `ShapeTuple`, … classes, and a tensor made by one copy
 * is not an `instanceof` the other's `NDArray`: its VM would reject it as
 * "not a tensor". So every class whose instances cross the API carries a
 * brand, a `Symbol.for("relaxvm.brand.<Name>")` property on its prototype
 * that every copy spells the same, and a static `Symbol.hasInstance` that
 * checks it: `x instanceof NDArray` is true for an `NDArray` of any copy
 * (and of its subclasses, which inherit the prototype property).
 *
 * Each class writes its own `static [Symbol.hasInstance]` (one line, the
 * same in every class) instead of sharing one function: V8 keeps type
 * feedback per function, so a shared check sees every branded class and
 * goes megamorphic, while each class's own check sees the few kinds of
 * value tested against that class and is inlined where it is used. Shared,
 * it cost the 200-op chain of bench/small_ops_bench.ts about a third of
 * its time per op; written per class, nothing measurable. A base class
 * (`VMObject`, `Device`) answers for a subclass that has no brand of its
 * own with ordinary `instanceof`.
 *
 * Code in one copy never reads another copy's `#private` fields: a method
 * that takes another instance of its class reads it through public
 * members (`ShapeTuple.equals` uses `other.dims`).
 *
 * @module
 */

/** A value that may carry brands: what the static `Symbol.hasInstance` methods read. */
export type Branded = { readonly [brand: symbol]: unknown };

/** Ordinary `instanceof` (the prototype chain), for subclasses without a brand of their own. */
export const ordinaryInstanceOf: (this: unknown, v: unknown) => boolean =
  Function.prototype[Symbol.hasInstance];

/**
 * The brand of the class called `name`: the same symbol in every copy.
 *
 * @example A class branded for every copy
 * ```ts
 * import { brand, brandKey, type Branded } from "./brand.ts";
 * import { assert } from "@std/assert";
 *
 * const POINT = brandKey("doc.Point");
 * class Point {
 *   static {
 *     brand(this, POINT);
 *   }
 *   static [Symbol.hasInstance](v: unknown): v is Point {
 *     return typeof v === "object" && v !== null && (v as Branded)[POINT] === true;
 *   }
 * }
 * class PointOfAnotherCopy {
 *   static {
 *     brand(this, brandKey("doc.Point"));
 *   }
 * }
 * assert(new PointOfAnotherCopy() instanceof Point);
 * assert(!(({}) instanceof Point));
 * ```
 */
export function brandKey(name: string): symbol {
  return Symbol.for(`relaxvm.brand.${name}`);
}

/** Puts brand `key` on `cls`'s prototype (call it in the class's static block). */
export function brand(cls: { readonly prototype: object }, key: symbol): void {
  Object.defineProperty(cls.prototype, key, { value: true });
}
