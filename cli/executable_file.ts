/**
 * Reading and writing `.rvm` files, and importing the TypeScript modules
 * that `relaxvm build` compiles.
 *
 * @module
 */

import { pathToFileURL } from "node:url";
import { Executable } from "../mod.ts";
import { UsageError } from "./failure.ts";

/** Reads `path` and loads it; malformed bytes throw `LoadError`. */
export async function readExecutable(path: string): Promise<Executable> {
  return Executable.load(await Deno.readFile(path));
}

/** Writes `ex.save()` to `path`; returns the number of bytes written. */
export async function writeExecutable(path: string, ex: Executable): Promise<number> {
  const bytes = ex.save();
  await Deno.writeFile(path, bytes);
  return bytes.length;
}

/** Imports the TS/JS module at `path` (relative to the working directory). */
export function importModule(path: string): Promise<Record<string, unknown>> {
  return import(pathToFileURL(path).href);
}

/**
 * Imports `path` and returns its `ex` export as an `Executable`. The module
 * may import relaxvm from anywhere (a local checkout, JSR): the executable
 * travels through `save()` and is loaded and checked again here.
 */
export async function importExecutable(path: string): Promise<Executable> {
  const module = await importModule(path);
  const ex = module.ex as { save?: unknown } | undefined;
  if (ex === undefined || ex === null || typeof ex.save !== "function") {
    throw new UsageError(
      `${path} does not export \`ex\`, an Executable (write \`export const ex = ib.get();\`)`,
    );
  }
  if (ex instanceof Executable) return ex;
  return Executable.load((ex.save as () => Uint8Array)());
}
