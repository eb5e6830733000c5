/**
 * How the CLI reports failures: one line on stderr, no stack trace. Every
 * error a user can cause (bad arguments, missing files, malformed bytes, a
 * failing VM call) ends up here.
 *
 * @module
 */

import { CheckError } from "../mod.ts";
import { printable } from "../ground/printable.ts";

/** The longest error line shown: a message a program shaped may be megabytes long. */
const MAX_ERROR_CHARS = 2000;

/** A mistake in how the CLI was invoked (bad argument, missing export, ...). */
export class UsageError extends Error {
  /** Builds the error; `message` is shown to the user as is. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "UsageError";
  }
}

/**
 * The text shown for `error`: the message alone for the library's own error
 * classes and usage errors, `name: message` for anything else. A
 * `CheckError` keeps its list of problems, one per line. Control characters
 * (terminal escapes a file put in a name or string) are shown escaped, and
 * a line longer than 2000 characters is cut. An unknown packed
 * function adds how to register it from the command line (`--preload`).
 */
export function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error instanceof CheckError) return error.message.split("\n").map(printable).join("\n");
  const known = error instanceof UsageError || error.name === "LoadError" ||
    error.name === "VMError" || error instanceof Deno.errors.NotFound ||
    error.name === "ONNXImportError";
  let text = (known ? error.message : `${error.name}: ${error.message}`).split("\n")[0];
  // The importer lists every node it cannot take, one a line: on one line, `; ` between them.
  if (error.name === "UnsupportedONNXError") {
    const [head, ...nodes] = error.message.split("\n");
    text = `${head}: ${nodes.map((l) => l.replace(/^\s*- /, "").trim()).join("; ")}`;
  }
  // A program's own packed functions come from a module the command line imports first.
  if (error.name === "VMError" && text.startsWith("Unknown packed function")) {
    text += "; --preload <module> imports a module that registers it";
  }
  if (text.length > MAX_ERROR_CHARS) {
    text = `${text.slice(0, MAX_ERROR_CHARS)}… (${text.length - MAX_ERROR_CHARS} more characters)`;
  }
  // Names and strings in messages come from the file: terminal escapes are shown, not obeyed.
  return printable(text);
}
