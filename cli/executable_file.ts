/**
 * Reading and writing `.rvm` files, and importing the TypeScript modules
 * that `relaxvm build` compiles.
 *
 * @module
 */

import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Executable } from "../mod.ts";
import { UsageError } from "./failure.ts";

/** The directory of relaxvm's deno.json: where `deno task cli` runs the CLI. */
const PACKAGE_ROOT = import.meta.url.startsWith("file:")
  ? fileURLToPath(new URL("../", import.meta.url))
  : undefined;

/**
 * The directory relative paths on the command line are meant from: the
 * working directory, except under `deno task cli`, which runs the CLI in the
 * repository root and leaves the caller's directory in `INIT_CWD` (npm's
 * convention). `INIT_CWD` counts only when the working directory is this
 * package's root, so an `INIT_CWD` left over from an outer `npm run` does not
 * move the paths of an installed `relaxvm`; and only when the permission to
 * read it was granted (`--allow-env=INIT_CWD`, as the task does), so that
 * reading it never prompts.
 */
export function callerDirectory(): string {
  const cwd = Deno.cwd();
  if (PACKAGE_ROOT === undefined || resolve(cwd) !== resolve(PACKAGE_ROOT)) return cwd;
  const permission = Deno.permissions.querySync({ name: "env", variable: "INIT_CWD" });
  if (permission.state !== "granted") return cwd;
  return Deno.env.get("INIT_CWD") || cwd;
}

/** `path` resolved against the caller's directory (absolute paths stay as they are). */
export function callerPath(path: string): string {
  return resolve(callerDirectory(), path);
}

/**
 * Whether `path` is a directory holding a `package.json`: a TVM package, as
 * `tools/tvm/export_webgpu.py` writes it. Any other directory is a `UsageError`
 * that says what the command takes; a file (or nothing) is false.
 */
export async function packageDirectory(path: string): Promise<boolean> {
  const full = callerPath(path);
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(full);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false; // readExecutable says so
    throw e;
  }
  if (!info.isDirectory) return false;
  try {
    return (await Deno.stat(`${full}/package.json`)).isFile;
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    throw new UsageError(
      `${path} is a directory without a package.json: give a .rvm file (relaxvm build, ` +
        `ex.save()), a TVM executable (.tvm), or a TVM package directory ` +
        `(tools/tvm/export_webgpu.py <model> <dir>)`,
    );
  }
}

/** Reads `path` and loads it; malformed bytes throw `LoadError`. */
export async function readExecutable(path: string): Promise<Executable> {
  if (await packageDirectory(path)) {
    throw new UsageError(
      `${path} is a TVM package directory: give its executable, ${path}/executable.tvm`,
    );
  }
  return Executable.load(await Deno.readFile(callerPath(path)));
}

/** Writes `ex.save()` to `path`; returns the number of bytes written. */
export async function writeExecutable(
  path: string,
  ex: Executable,
  format: "relaxvm" | "tvm" = "relaxvm",
): Promise<number> {
  const bytes = ex.save({ format });
  await Deno.writeFile(callerPath(path), bytes);
  return bytes.length;
}

/** Imports the TS/JS module at `path` (relative to the caller's directory). */
export function importModule(path: string): Promise<Record<string, unknown>> {
  return import(pathToFileURL(callerPath(path)).href);
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
