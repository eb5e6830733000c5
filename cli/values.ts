/**
 * Converting between command-line text and VM values: `relaxvm run`
 * parses its arguments as JSON and prints the function's result.
 *
 * @module
 */

import { Closure, NDArray, ShapeTuple, tensor, type TensorDType } from "../mod.ts";
import { elementReader } from "../ground/dtype.ts";
import { formatNested } from "../ground/inspect.ts";
import { printable } from "../ground/printable.ts";
import { UsageError } from "./failure.ts";

/**
 * The JSON reviver for int64 arguments: integers become bigints read from
 * their source text, so values beyond 2^53 stay exact (JSON.parse alone
 * would round them to the nearest double).
 */
function exactIntegers(
  this: unknown,
  _key: string,
  value: unknown,
  context?: { source?: string },
): unknown {
  const source = context?.source;
  if (typeof value !== "number" || source === undefined || !/^-?\d+$/.test(source)) return value;
  return BigInt(source);
}

/**
 * Parses one argument of `relaxvm run`. JSON numbers, booleans and `null`
 * stay as they are, JSON arrays become tensors of `dtype` (nested arrays
 * give the shape; with int64, integers are read exactly, beyond 2^53 too),
 * JSON strings become strings. A bare word is an error that says how to
 * quote it: taken as a string, a misspelt `true` or a forgotten bracket
 * would pass silently.
 */
export function parseArg(text: string, dtype: TensorDType): unknown {
  const looksLikeJson = /^\s*([[{"\-0-9]|true$|false$|null$)/.test(text);
  if (!looksLikeJson) {
    throw new UsageError(
      `Cannot parse argument ${JSON.stringify(text)}: arguments are JSON, so write a string in ` +
        `double quotes (in a shell: '${JSON.stringify(text)}'); numbers, true, false, null and ` +
        `[arrays] need none`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(
      text,
      dtype === "int64" && text.trim().startsWith("[") ? exactIntegers : undefined,
    );
  } catch {
    throw new UsageError(`Cannot parse argument ${JSON.stringify(text)} as JSON`);
  }
  if (Array.isArray(value)) {
    try {
      return tensor(value, { dtype });
    } catch (e) {
      throw new UsageError(
        `Cannot make a ${dtype} tensor from ${text}: ${(e as Error).message}`,
        { cause: e },
      );
    }
  }
  if (value !== null && typeof value === "object") {
    throw new UsageError(`Unsupported argument ${text}: use a number, an array or a string`);
  }
  return value;
}

/** Nests the flat `values` into arrays of `shape` (row-major). */
function nest(values: readonly (number | bigint)[], shape: readonly number[]): unknown {
  if (shape.length === 0) return values[0];
  const [head, ...rest] = shape;
  const step = rest.reduce((a, b) => a * b, 1);
  return Array.from({ length: head }, (_, i) => nest(values.slice(i * step, (i + 1) * step), rest));
}

/** Writes a nested array of numbers as `[[1, 2], [3, 4]]`, each number with `text`. */
function nestedText(v: unknown, text: (x: unknown) => string = String): string {
  return Array.isArray(v) ? `[${v.map((x) => nestedText(x, text)).join(", ")}]` : text(v);
}

/**
 * The shortest decimal that reads back as the same value of a narrower float format (`round`:
 * `Math.fround` for float32), as `String` is for a double: the float32 nearest 0.1 prints as `0.1`,
 * not as the double it widens to, `0.10000000149011612`. Every float32 has one of at most 9
 * significant digits.
 */
export function shortestFloat(v: number, round: (x: number) => number): string {
  if (!Number.isFinite(v) || v === 0) return Object.is(v, -0) ? "-0" : String(v);
  for (let digits = 1; digits < 17; digits++) {
    const shorter = Number(v.toPrecision(digits));
    if (round(shorter) === v) return String(shorter);
  }
  return String(v);
}

/** How one element of a tensor of `dtype` prints: float32 and float16 by their shortest text. */
function elementText(dtype: string): (x: unknown) => string {
  const round = dtype === "float32"
    ? Math.fround
    : dtype === "float16" && typeof Math.f16round === "function"
    ? Math.f16round
    : undefined;
  if (round === undefined) return String;
  return (x) => typeof x === "number" ? shortestFloat(x, round) : String(x);
}

/** Tensors of more elements print their ends only, as NumPy does (`[0, 1, 2, ..., 7, 8, 9]`). */
const SUMMARY_THRESHOLD = 1000;
/** Tuples of more fields print their first and last few. */
const MAX_FIELDS = 100;
/** Strings print at most this many characters. */
const MAX_STRING = 10_000;

/**
 * Formats a VM result for the terminal: a tensor as its values with dtype
 * and shape, a ShapeTuple as `(32, 16)`, a tuple as `(a, b)`, a string as
 * JSON, anything else with `String()`. Reading a tensor awaits its data, so
 * a GPU tensor works too. A result a program chose is bounded on screen: a
 * tensor of more than 1000 elements shows the ends of each axis, a long
 * tuple its first and last fields, a long string its start, and control
 * characters (terminal escapes) are shown escaped.
 */
export async function formatValue(value: unknown): Promise<string> {
  if (value instanceof NDArray) {
    const at = await elementsOf(value);
    const described = `(${value.dtype}, shape [${value.shape.join(", ")}])`;
    if (value.size > SUMMARY_THRESHOLD) {
      return `${formatNested(at, value.shape, { width: Infinity })} ${described}`;
    }
    const data = Array.from({ length: value.size }, (_, i) => at(i));
    return `${nestedText(nest(data, value.shape), elementText(value.dtype))} ${described}`;
  }
  if (value instanceof ShapeTuple) return `(${[...value].join(", ")})`;
  if (Array.isArray(value)) {
    const shown = value.length <= MAX_FIELDS
      ? value
      : [...value.slice(0, 3), ELIDED, ...value.slice(-3)];
    const parts = await Promise.all(shown.map((v) => v === ELIDED ? "..." : formatValue(v)));
    return `(${parts.join(", ")})`;
  }
  if (typeof value === "string") {
    const cut = value.length > MAX_STRING
      ? `${value.slice(0, MAX_STRING)}… (${value.length - MAX_STRING} more characters)`
      : value;
    return printable(JSON.stringify(cut));
  }
  if (value instanceof Closure) return `Closure(${printable(value.name)})`;
  return printable(String(value));
}

const ELIDED = Symbol("elided");

/**
 * Element `i` of `t` as `data()` holds it. A CPU tensor is read in place, so
 * printing the ends of a large one reads only those; another device's is
 * read back first.
 */
async function elementsOf(t: NDArray): Promise<(i: number) => number | bigint> {
  if (t.device.kind === "cpu") return elementReader(t.dtype, t.readView());
  const data = await t.data();
  return (i) => data[i];
}
