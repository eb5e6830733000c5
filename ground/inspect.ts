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
}

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
 * shows the first and last `edgeItems` of every longer axis around `...`.
 *
 * @example
 * ```ts
 * import { formatNested } from "./inspect.ts";
 * import { assertEquals } from "@std/assert";
 *
 * assertEquals(formatNested([1, 2, 3, 4, 5, 6], [2, 3]), "[[1, 2, 3], [4, 5, 6]]");
 * assertEquals(
 *   formatNested(Array.from({ length: 2000 }, (_, i) => i), [2000]),
 *   "[0, 1, 2, ..., 1997, 1998, 1999]",
 * );
 * ```
 */
export function formatNested(
  values: ArrayLike<number | bigint | boolean>,
  shape: readonly number[],
  format: NestedFormat = {},
): string {
  const { threshold = 1000, edgeItems = 3, width = 72 } = format;
  let size = 1;
  for (const d of shape) size *= d;
  const elide = size > threshold;
  // Which indices of an axis of length n are shown; -1 marks the "..." between the ends.
  const shown = (n: number): number[] => {
    if (!elide || n <= 2 * edgeItems) return Array.from({ length: n }, (_, i) => i);
    const head = Array.from({ length: edgeItems }, (_, i) => i);
    const tail = Array.from({ length: edgeItems }, (_, i) => n - edgeItems + i);
    return [...head, -1, ...tail];
  };
  const strides = shape.map((_, axis) => shape.slice(axis + 1).reduce((a, b) => a * b, 1));
  const texts = new Map<number, string>();
  const collect = (axis: number, offset: number): void => {
    if (axis === shape.length) {
      texts.set(offset, formatElement(values[offset]));
      return;
    }
    for (const i of shown(shape[axis])) if (i >= 0) collect(axis + 1, offset + i * strides[axis]);
  };
  collect(0, 0);
  if (shape.length === 0) return texts.get(0) ?? "";

  const render = (axis: number, offset: number, pad: number, multiline: boolean): string => {
    const items = shown(shape[axis]).map((i) => {
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
  const pad = Math.max(...[...texts.values()].map((t) => t.length));
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
