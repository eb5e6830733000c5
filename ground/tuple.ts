/**
 * `Tuple`: the VM's tuple object (`vm.builtin.make_tuple`), a fixed list of
 * values that holds a reference to each field for as long as it lives. Users
 * never see one: the VM hands tuples out as plain arrays, and a plain array
 * passed in stays the user's (the VM holds no references through it). The
 * builtins that take tuples accept both forms (`tupleFields`).
 *
 * @module
 */

import { brand, type Branded, brandKey } from "./brand.ts";
import { exportValue, releaseValue, retainValue, VMObject } from "./object.ts";

const TUPLE_BRAND = brandKey("Tuple");

/** A tuple made inside the VM. */
export class Tuple extends VMObject {
  static {
    brand(this, TUPLE_BRAND);
  }

  /**
   * True for a `Tuple` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is Tuple {
    return typeof v === "object" && v !== null && (v as Branded)[TUPLE_BRAND] === true;
  }

  /** The fields, in order (only `resetItem` changes them). */
  readonly fields: readonly unknown[];

  /** What the tuple's host memory is counted against (`chargeTo`), and how much. */
  #charged: { give(bytes: number): void } | null = null;
  #chargedBytes = 0;

  /** Holds a reference to each field. */
  constructor(fields: readonly unknown[]) {
    super();
    this.fields = [...fields];
    for (const v of this.fields) retainValue(v);
  }

  /**
   * Records that `bytes` of host memory were counted against `limit` for
   * this tuple (a VM's memory limit, by `make_tuple`): given back when the
   * tuple is freed.
   *
   * @ignore
   */
  chargeTo(limit: { give(bytes: number): void }, bytes: number): this {
    this.#charged = limit;
    this.#chargedBytes = bytes;
    return this;
  }

  /**
   * Sets field `index` to null and releases what it held
   * (`vm.builtin.tuple_reset_item`): every holder of the tuple sees null.
   */
  resetItem(index: number): void {
    if (this.disposed) throw this.usedAfterFree();
    const old = this.fields[index];
    (this.fields as unknown[])[index] = null;
    releaseValue(old);
  }

  /** Number of fields. */
  get length(): number {
    return this.fields.length;
  }

  /** Field `index` (negative counts from the end). */
  at(index: number): unknown {
    return this.fields.at(index);
  }

  /** The fields, in order. */
  [Symbol.iterator](): Iterator<unknown> {
    return this.fields[Symbol.iterator]();
  }

  /** The user receives a plain array of the exported fields; the tuple itself goes. */
  override handToUser(): unknown[] {
    const out = this.fields.map(exportValue);
    this.releaseIfUnowned();
    return out;
  }

  /**
   * Releases every field, and gives back the host memory counted for it.
   *
   * @ignore
   */
  protected free(): void {
    this.#charged?.give(this.#chargedBytes);
    this.#charged = null;
    for (const v of this.fields) releaseValue(v);
  }

  /** `Tuple(1, "two", (3))`. */
  override toString(): string {
    return `Tuple(${this.fields.map(String).join(", ")})`;
  }

  /** Shown by `console.log` like the array users get. */
  [Symbol.for("Deno.customInspect")](inspect: (v: unknown) => string): string {
    return `Tuple(${this.fields.length}) ${inspect([...this.fields])}`;
  }
}

/** The fields of a tuple: a VM `Tuple` or an array a user passed in; undefined for anything else. */
export function tupleFields(v: unknown): readonly unknown[] | undefined {
  if (v instanceof Tuple) return v.fields;
  if (Array.isArray(v)) return v;
  return undefined;
}
