/**
 * What the importer knows about each ONNX value while it converts a graph:
 * its dtype, its shape (each dimension a number, the name of a symbolic
 * dimension kept in the shape heap, or `null` until the program binds it
 * at run time), the register that holds it at run time, and, for values
 * known before anything runs (initializers, `Constant`, shape arithmetic on
 * `Shape`), their contents. Shape arithmetic (`Shape` → `Gather` →
 * `Concat` → `Reshape`, the pattern exporters write) is done here, on
 * integers and symbols, so a dynamic-shape model needs no runtime shape
 * tensors.
 *
 * @module
 */

import type { Operand } from "../builder/operand.ts";
import type { NDArray } from "../devices/ndarray.ts";
import type { TensorDType } from "../ground/dtype.ts";
import type { LowPrecisionFormat } from "../builtins/host_operators/low_precision.ts";

/** An ONNX type held in another dtype: the 8- and 4-bit ones, and UINT64 (its bits in int64). */
export type HeldFormat = LowPrecisionFormat | "uint64";

/** A dimension: a size, a symbol (a shape-heap slot at run time), or unknown until bound. */
export type Dim = number | string | null;

/** A value of the graph being converted. */
export interface Value {
  /** Its dtype. */
  readonly dtype: TensorDType;
  /** Its shape; `null` dims are bound by the emitter after the call that makes the value. */
  shape: Dim[];
  /** The register holding it at run time (made on first use for a known value). */
  reg: Operand | null;
  /** Its contents when known at import: a CPU tensor. */
  readonly tensor?: NDArray;
  /**
   * Its integer contents, row-major, when known at import: numbers and
   * symbols (`Shape` of a tensor with a symbolic dimension gives one).
   */
  readonly ints?: readonly Dim[];
  /** Its index in the parameter tuple, for an initializer (read with `tuple_getitem` on first use). */
  readonly param?: number;
  /**
   * The ONNX type its `dtype` holds when relaxvm has no dtype for it: an 8-
   * or 4-bit type (onnx_tensor.ts's `LOW_PRECISION_TYPES`: bit patterns of a
   * float format, or INT4/UINT4 values), or UINT64 (its bits in int64);
   * only the operators that know the format take it.
   */
  readonly format?: HeldFormat;
}

/** Why a node cannot be imported; the converter collects these for the error. */
export class Unsupported extends Error {
  /** Builds it from the reason. */
  constructor(reason: string) {
    super(reason);
    this.name = "Unsupported";
  }
}

/** Number of elements of a fully known shape, or null. */
export function knownSize(shape: readonly Dim[]): number | null {
  let n = 1;
  for (const d of shape) {
    if (typeof d !== "number") return null;
    n *= d;
  }
  return n;
}

/** `[a, b, …]` with symbols as names and unknown dims as `?`. */
export function shapeText(shape: readonly Dim[]): string {
  return `[${shape.map((d) => d === null ? "?" : String(d)).join(", ")}]`;
}

/** NumPy broadcasting of two shapes; a pair it cannot decide before run time is `null`. */
export function broadcastShapes(a: readonly Dim[], b: readonly Dim[]): Dim[] {
  const n = Math.max(a.length, b.length);
  const out: Dim[] = [];
  for (let i = 0; i < n; i++) {
    const x = i < n - a.length ? 1 : a[i - (n - a.length)];
    const y = i < n - b.length ? 1 : b[i - (n - b.length)];
    if (x === y) out.push(x);
    else if (x === 1) out.push(y);
    else if (y === 1) out.push(x);
    else if (typeof x === "number" && typeof y === "number") {
      throw new Unsupported(`shapes ${shapeText(a)} and ${shapeText(b)} do not broadcast`);
    } else if (typeof x === "number") out.push(x);
    else if (typeof y === "number") out.push(y);
    else out.push(null);
  }
  return out;
}

/** `axis` of a rank-`rank` tensor, negative counting from the end; out of range is unsupported. */
export function normAxis(axis: number, rank: number, what = "axis"): number {
  const a = axis < 0 ? axis + rank : axis;
  if (!Number.isInteger(a) || a < 0 || a >= rank) {
    throw new Unsupported(`${what} ${axis} out of range for rank ${rank}`);
  }
  return a;
}

/**
 * A size as a product: a numeric factor and a multiset of symbols, so that
 * `Reshape`'s `-1` can cancel symbols (`[B, S, 384]` → `[B, S, 12, -1]` is 32).
 */
export interface Product {
  factor: number;
  symbols: string[];
}

/** The product of `dims` (null when a dim is unknown). */
export function productOf(dims: readonly Dim[]): Product | null {
  const p: Product = { factor: 1, symbols: [] };
  for (const d of dims) {
    if (d === null) return null;
    if (typeof d === "number") p.factor *= d;
    else p.symbols.push(d);
  }
  return p;
}

/** `a / b` as a dimension when it is exact: a number, or one symbol left over; else null. */
export function divideProducts(a: Product, b: Product): Dim {
  const left = [...a.symbols];
  for (const s of b.symbols) {
    const i = left.indexOf(s);
    if (i < 0) return null;
    left.splice(i, 1);
  }
  if (b.factor === 0 || a.factor % b.factor !== 0) return null;
  const f = a.factor / b.factor;
  if (left.length === 0) return f;
  if (left.length === 1 && f === 1) return left[0];
  return null;
}
