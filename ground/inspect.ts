/**
 * How values print in `console.log` and `deno repl` (through
 * `Symbol.for("Deno.customInspect")`): short summaries for programs and
 * builders, and tensor values nested like NumPy prints them, with the middle
 * of large tensors elided.
 *
 * The symbol is only a key: in a browser nothing calls it and objects print
 * as usual.
 *
 * @module
 */

/** The key `console.log` and `Deno.inspect` look for. */
export const INSPECT: unique symbol = Symbol.for("Deno.customInspect") as never;

/** How `formatNested` lays out values. */
export interface NestedFormat {
  /** Elide when the tensor has more elements than this (NumPy's `threshold`). Default 1000. */
  threshold?: number;
  /** Elements kept at each end of an elided axis (NumPy's `edgeitems`). Default 3. */
  edgeItems?: number;
  /** Lay out on one line when it fits this many columns. Default 72. */
  width?: number;
  /**
   * Show at most this many elements: a large tensor whose axes are all short
   * (`[2] × 27`) elides its outer axes further. Default 2000.
   */
  maxShown?: number;
}

/** The elements of a row-major tensor, or a function reading element `i`. */
export type Elements =
  | ArrayLike<number | bigint | boolean>
  | ((i: number) => number | bigint | boolean);

/** Ranks beyond this print their flattened ends: nesting 33 brackets deep would show nothing. */
const MAX_NESTED_RANK = 32;

/** One element as text: 6 significant digits for floats, integers as they are. */
export function formatElement(v: number | bigint | boolean): string {
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v) || !Number.isFinite(v)) return Object.is(v, -0) ? "-0" : String(v);
  return String(Number(v.toPrecision(6)));
}

/**
 * The elements of a row-major tensor of `shape` nested like NumPy prints
 * them: `[[1, 2, 3], [4, 5, 6]]` on one line when it fits, else one row per
 * line with columns aligned. A tensor of more than `threshold` elements
 * shows the first and last `edgeItems` of every longer axis around `...`,
 * and never more than `maxShown` elements in all. Only the elements shown
 * are read: given a function, the cost is that of the printed elements,
 * whatever the tensor's size.
 *
 * @example
 * ```ts
 * import { formatNested } from "./inspect.ts";
 * import { assertEquals } from "@std/assert";
 *
 * assertEquals(formatNested([1, 2, 3, 4, 5, 6], [2, 3]), "[[1, 2, 3], [4, 5, 6]]");
 * assertEquals(formatNested((i) => i, [2000]), "[0, 1, 2, ..., 1997, 1998, 1999]");
 * ```
 */
export function formatNested(
  values: Elements,
  shape: readonly number[],
  format: NestedFormat = {},
): string {
  const { threshold = 1000, edgeItems = 3, width = 72, maxShown = 2000 } = format;
  const at = typeof values === "function" ? values : (i: number) => values[i];
  let size = 1;
  for (const d of shape) size *= d;
  if (shape.length > MAX_NESTED_RANK) return `${formatNested(at, [size], format)} (flattened)`;
  const elide = size > threshold;
  // Which indices of each axis are shown; -1 marks the "..." between the ends.
  const axes = shape.map((n): number[] => {
    if (!elide || n <= 2 * edgeItems) return Array.from({ length: n }, (_, i) => i);
    const head = Array.from({ length: edgeItems }, (_, i) => i);
    const tail = Array.from({ length: edgeItems }, (_, i) => n - edgeItems + i);
    return [...head, -1, ...tail];
  });
  // Short axes elide nothing, yet [2] × 27 is 2^27 elements: cut outer axes to their two
  // ends, then to their first item, until few enough are left.
  const shownCount = () => axes.reduce((p, ix) => p * ix.filter((i) => i >= 0).length, 1);
  for (const firstOnly of [false, true]) {
    for (let a = 0; a < axes.length && shownCount() > maxShown; a++) {
      const n = shape[a];
      if (!firstOnly && n > 2) axes[a] = [0, -1, n - 1];
      if (firstOnly && n > 1) axes[a] = [0, -1];
    }
  }
  const strides = shape.map((_, axis) => shape.slice(axis + 1).reduce((a, b) => a * b, 1));
  const texts = new Map<number, string>();
  const collect = (axis: number, offset: number): void => {
    if (axis === shape.length) {
      texts.set(offset, formatElement(at(offset)));
      return;
    }
    for (const i of axes[axis]) if (i >= 0) collect(axis + 1, offset + i * strides[axis]);
  };
  collect(0, 0);
  if (shape.length === 0) return texts.get(0) ?? "";

  const render = (axis: number, offset: number, pad: number, multiline: boolean): string => {
    const items = axes[axis].map((i) => {
      if (i < 0) return "...";
      const at = offset + i * strides[axis];
      return axis === shape.length - 1
        ? texts.get(at)!.padStart(pad)
        : render(axis + 1, at, pad, multiline);
    });
    if (!multiline || axis === shape.length - 1) return `[${items.join(", ")}]`;
    // One row per line, indented under the opening bracket; a blank line between 2-D blocks.
    const gap = ",\n" + "\n".repeat(Math.max(0, shape.length - axis - 2)) +
      " ".repeat(axis + 1);
    return `[${items.join(gap)}]`;
  };
  const line = render(0, 0, 0, false);
  if (line.length <= width || shape.length < 2) return line;
  let pad = 0;
  for (const t of texts.values()) pad = Math.max(pad, t.length);
  return render(0, 0, pad, true);
}

/**
 * A byte count for people: `0 B`, `512 B`, `1.5 KiB`, `12.0 MiB`, `1.0 GiB`
 * (binary units, one decimal from KiB on).
 *
 * @example
 * ```ts
 * import { formatBytes } from "./inspect.ts";
 * import { assertEquals } from "@std/assert";
 *
 * assertEquals(formatBytes(1536), "1.5 KiB");
 * assertEquals(formatBytes(100), "100 B");
 * ```
 */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n, unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(1)} ${units[unit]}`;
}
