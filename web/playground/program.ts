/**
 * What the playground does with programs, apart from the page itself:
 * evaluate the editor's text into an `Executable`, turn the arguments
 * field into VM values, and describe results. No DOM here, so the tests
 * run these in Deno (tests/playground_test.ts).
 *
 * @module
 */

import * as relaxvm from "../../mod.ts";
import {
  type Device,
  ExecBuilder,
  Executable,
  NDArray,
  shape,
  ShapeTuple,
  tensor,
  type TensorDType,
} from "../../mod.ts";

/** The library's runtime exports, by name: what the editor's code sees in scope. */
const SCOPE: [string, unknown][] = Object.entries(relaxvm).filter(([name]) =>
  /^[A-Za-z_$][\w$]*$/.test(name)
);

/** Names the editor's code can use without importing: `relaxvm` and every export. */
export const SCOPE_NAMES: readonly string[] = ["relaxvm", ...SCOPE.map(([n]) => n)];

type AsyncFunctionConstructor = new (...args: string[]) => (...args: unknown[]) => Promise<unknown>;

/** `AsyncFunction`, so that the editor's code may `await`. */
const AsyncFunction = (async () => {}).constructor as AsyncFunctionConstructor;

/** An import declaration (any form, over several lines too): the library is already in scope. */
const IMPORT = /^[ \t]*import\s(?:[^;"']*?\sfrom\s*)?["'][^"']*["'][ \t]*;?/gm;

/** `export` before a declaration: the code runs as a function body, where it means nothing. */
const EXPORT = /^([ \t]*)export\s+(?=(?:const|let|var|function|class|async)\b)/gm;

/** Lines the function wrapper adds before the code: line n of the code is n + this in a stack. */
const WRAPPER_LINES = 2;

/**
 * Turns the editor's text into the body of an async function: import
 * declarations removed (keeping line numbers), `export` dropped, and a last
 * line that returns `ex` or else `ib` when the code returns nothing itself.
 */
export function functionBody(source: string): string {
  const body = source
    .replace(IMPORT, (m) => m.replace(/[^\n]/g, ""))
    .replace(EXPORT, "$1");
  return `"use strict"; ${body}
return typeof ex !== "undefined" ? ex : typeof ib !== "undefined" ? ib : undefined;`;
}

/**
 * Runs `source`, JavaScript that builds a program with the library's
 * exports in scope (`ExecBuilder`, `tensor`, `shape`, …; `import`
 * declarations are ignored, so `as_typescript()` output runs as it is), and
 * returns its executable: what the code returns, else its variable `ex`,
 * else its variable `ib`; an `ExecBuilder` is finished with `get()`.
 *
 * Needs `new Function`: where a Content-Security-Policy forbids
 * `'unsafe-eval'` it throws `EvalError`.
 */
export async function evaluateProgram(source: string): Promise<Executable> {
  const run = new AsyncFunction(...SCOPE_NAMES, functionBody(source));
  let returned: unknown;
  try {
    returned = await run(relaxvm, ...SCOPE.map(([, v]) => v));
  } catch (e) {
    const line = sourceLine(e);
    if (line !== null && e instanceof Error) e.message += ` (line ${line})`;
    throw e;
  }
  if (returned instanceof Executable) return returned;
  if (returned instanceof ExecBuilder) return returned.get();
  throw new TypeError(
    `The program gave ${
      describeKind(returned)
    }: end it with \`return ib.get()\`, or name the executable \`ex\` or the builder \`ib\``,
  );
}

/** The line of the editor's code where `e` was thrown (V8 stack traces), or null. */
export function sourceLine(e: unknown): number | null {
  const stack = e instanceof Error ? e.stack ?? "" : "";
  const m = /<anonymous>:(\d+):\d+/.exec(stack);
  if (m === null) return null;
  const line = Number(m[1]) - WRAPPER_LINES;
  return line >= 1 ? line : null;
}

/** A short name for the kind of `v`, for messages. */
function describeKind(v: unknown): string {
  if (v === undefined) return "nothing";
  if (v === null) return "null";
  if (typeof v !== "object") return `a ${typeof v}`;
  return `a ${(v as object).constructor?.name ?? "object"}`;
}

/**
 * Parses the arguments field: a JSON array, one element per argument.
 * Numbers, booleans, strings and `null` pass as they are; a (nested) array
 * becomes a tensor of `dtype` on `device`; `{"shape": [2, 3]}` a
 * `ShapeTuple`; `{"tensor": [...], "dtype": "int32"}` a tensor of its own
 * dtype. Throws a `SyntaxError` or `TypeError` that names the argument.
 */
export function parseArguments(text: string, dtype: TensorDType, device: Device): unknown[] {
  let list: unknown;
  try {
    list = JSON.parse(text.trim() === "" ? "[]" : text);
  } catch (e) {
    throw new SyntaxError(`Arguments are not JSON: ${(e as Error).message}`);
  }
  if (!Array.isArray(list)) {
    throw new TypeError("Arguments must be a JSON array, one element per argument");
  }
  const made: NDArray[] = [];
  try {
    return list.map((value, i) => {
      const arg = toValue(value, dtype, device, i);
      if (arg instanceof NDArray) made.push(arg);
      return arg;
    });
  } catch (e) {
    for (const t of made) t.dispose();
    throw e;
  }
}

function toValue(value: unknown, dtype: TensorDType, device: Device, i: number): unknown {
  const where = `argument ${i}`;
  if (value === null || typeof value !== "object") return value;
  try {
    if (Array.isArray(value)) return tensor(value, { dtype, device });
    const fields = value as Record<string, unknown>;
    if (Array.isArray(fields.shape) && Object.keys(fields).length === 1) {
      return shape(...(fields.shape as number[]));
    }
    if (Array.isArray(fields.tensor)) {
      const own = (fields.dtype ?? dtype) as TensorDType;
      return tensor(fields.tensor as number[], { dtype: own, device });
    }
  } catch (e) {
    throw new TypeError(`Cannot make ${where}: ${(e as Error).message}`, { cause: e });
  }
  throw new TypeError(
    `Cannot make ${where} from ${
      JSON.stringify(value)
    }: use a number, a string, an array (a tensor), {"shape": [...]} or {"tensor": [...], "dtype": "..."}`,
  );
}

/** A result in plain JSON: what the page shows and the browser test checks. */
export type ResultJSON =
  | { tensor: { dtype: string; shape: number[]; device: string; values: (number | string)[] } }
  | { shape: number[] }
  | { tuple: ResultJSON[] }
  | { value: number | string | boolean | null }
  | { other: string };

/** Reads a VM result (awaiting tensor data on any device) into plain JSON. */
export async function resultJSON(v: unknown): Promise<ResultJSON> {
  if (v instanceof NDArray) {
    const data = await v.data();
    const values = Array.from(
      data as ArrayLike<number | bigint>,
      (x) => typeof x === "bigint" ? x.toString() : x,
    );
    return {
      tensor: { dtype: v.dtype, shape: [...v.shape], device: String(v.device), values },
    };
  }
  if (v instanceof ShapeTuple) return { shape: [...v] };
  if (Array.isArray(v)) return { tuple: await Promise.all(v.map(resultJSON)) };
  if (v === null || ["number", "string", "boolean"].includes(typeof v)) {
    return { value: v as number | string | boolean | null };
  }
  return { other: String(v) };
}

/** Elements shown per dimension before eliding the middle (NumPy-like). */
const EDGE_ITEMS = 3;
/** Tensors up to this many elements print in full. */
const FULL_PRINT = 1000;

function formatNumber(x: number | string): string {
  if (typeof x === "string") return x;
  if (Number.isInteger(x) || !Number.isFinite(x)) return String(x);
  return String(Number(x.toPrecision(6)));
}

function nested(
  values: readonly (number | string)[],
  dims: readonly number[],
  elide: boolean,
  indent: string,
): string {
  if (dims.length === 0) return formatNumber(values[0]);
  const [n, ...rest] = dims;
  const step = rest.reduce((a, b) => a * b, 1);
  const items: string[] = [];
  const show = (i: number) =>
    items.push(nested(values.slice(i * step, (i + 1) * step), rest, elide, indent + " "));
  if (elide && n > 2 * EDGE_ITEMS) {
    for (let i = 0; i < EDGE_ITEMS; i++) show(i);
    items.push("...");
    for (let i = n - EDGE_ITEMS; i < n; i++) show(i);
  } else {
    for (let i = 0; i < n; i++) show(i);
  }
  const sep = rest.length === 0 ? ", " : `,\n${indent} `;
  return `[${items.join(sep)}]`;
}

/** Formats a result for people: dtype, shape and device, then the values, nested. */
export function formatResult(r: ResultJSON, indent = ""): string {
  if ("tensor" in r) {
    const t = r.tensor;
    const head = `${t.dtype}[${t.shape.join(", ")}] on ${t.device}`;
    return `${head}\n${indent}${nested(t.values, t.shape, t.values.length > FULL_PRINT, indent)}`;
  }
  if ("shape" in r) return `shape(${r.shape.join(", ")})`;
  if ("tuple" in r) {
    const inner = r.tuple.map((x, i) => `${indent}  [${i}] ${formatResult(x, indent + "  ")}`);
    return `tuple of ${r.tuple.length}\n${inner.join("\n")}`;
  }
  if ("value" in r) return JSON.stringify(r.value);
  return r.other;
}

/**
 * What a function of `ex` takes, for the hint under the arguments field: its inputs by name
 * (or `%0`, `%1`, … when the program gave none) and how to write them.
 */
export function argumentHint(ex: Executable, name: string): string {
  const f = ex.functions.find((f) => f.kind === "vm" && f.name === name);
  if (f === undefined) return "";
  const names = f.paramNames.length === f.numArgs
    ? [...f.paramNames]
    : Array.from({ length: f.numArgs }, (_, i) => `%${i}`);
  if (names.length === 0) return `@${name} takes no arguments: []`;
  return `@${name} takes ${names.length} argument${names.length === 1 ? "" : "s"} (${
    names.join(", ")
  }): write [${names.join(", ")}] as JSON, a nested array for a tensor`;
}

/**
 * One value as the console pane shows it: strings as they are, relaxvm values as the REPL
 * prints them (their `Deno.customInspect` method), arrays and plain objects nested.
 */
export function formatConsoleValue(v: unknown, depth = 0): string {
  if (typeof v === "string") return depth === 0 ? v : JSON.stringify(v);
  if (typeof v === "bigint") return `${v}n`;
  if (v === null || typeof v !== "object") return String(v);
  const custom = (v as Record<symbol, unknown>)[Symbol.for("Deno.customInspect")];
  if (typeof custom === "function") {
    return String(custom.call(v, (x: unknown) => formatConsoleValue(x, depth + 1)));
  }
  if (depth > 4) return Array.isArray(v) ? "[...]" : "{...}";
  if (Array.isArray(v)) return `[${v.map((x) => formatConsoleValue(x, depth + 1)).join(", ")}]`;
  if (v instanceof Error) return `${v.name}: ${v.message}`;
  if (ArrayBuffer.isView(v)) return `${v.constructor.name}(${String(v)})`;
  const entries = Object.entries(v).map(([k, x]) => `${k}: ${formatConsoleValue(x, depth + 1)}`);
  return `{ ${entries.join(", ")} }`;
}
