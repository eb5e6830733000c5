/**
 * How the CLI reports failures: one line on stderr, no stack trace. Every
 * error a user can cause (bad arguments, missing files, malformed bytes, a
 * failing VM call) ends up here.
 *
 * @module
 */

import { CheckError } from "../mod.ts";

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
 * `CheckError` keeps its list of problems, one per line. An unknown packed
 * function adds how to register it from the command line (`--preload`).
 */
export function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error instanceof CheckError) return error.message;
  const known = error instanceof UsageError || error.name === "LoadError" ||
    error.name === "VMError" || error instanceof Deno.errors.NotFound;
  let text = (known ? error.message : `${error.name}: ${error.message}`).split("\n")[0];
  // A program's own packed functions come from a module the command line imports first.
  if (error.name === "VMError" && text.startsWith("Unknown packed function")) {
    text += "; --preload <module> imports a module that registers it";
  }
  return text;
}
