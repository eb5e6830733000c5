/**
 * Runs the pinned TVM (tools/tvm/.venv, made by `bash tools/tvm/setup.sh`)
 * on a batch of program descriptions: one Python process for all of them.
 *
 * Without the venv, tests that need TVM are ignored with a message saying
 * how to set it up — unless `RELAXVM_REQUIRE_TVM=1` (CI sets it), where they
 * fail instead.
 *
 * @module
 */

import type { ProgramDesc, TvmOutput } from "./description.ts";

const ROOT = new URL("../../", import.meta.url);
/**
 * The venv's Python; `RELAXVM_TVM_PYTHON` names another (a venv with another
 * TVM release, to check the format against it).
 */
export function tvmPython(): string {
  return Deno.env.get("RELAXVM_TVM_PYTHON") ??
    new URL("tools/tvm/.venv/bin/python", ROOT).pathname;
}
const BUILD_PROGRAMS = new URL("tools/tvm/build_programs.py", ROOT).pathname;

/** How to get TVM, for messages. */
export const SETUP_HINT =
  "TVM is not set up: run `bash tools/tvm/setup.sh` (or `deno task tvm:setup`) to make tools/tvm/.venv with apache-tvm==0.27.0.post1";

/** Whether the pinned TVM is installed. */
export function tvmAvailable(): boolean {
  try {
    return Deno.statSync(tvmPython()).isFile;
  } catch {
    return false;
  }
}

/** Whether tests needing TVM must run (and fail without it) rather than be ignored. */
export function tvmRequired(): boolean {
  return Deno.env.get("RELAXVM_REQUIRE_TVM") === "1";
}

/**
 * `ignore` for a `Deno.test` that needs TVM: true (with a message) when
 * TVM is missing and not required; false otherwise, so that a required but
 * missing TVM fails the test.
 */
export function ignoreWithoutTvm(what: string): boolean {
  if (tvmAvailable() || tvmRequired()) return false;
  console.log(`${what}: ignored. ${SETUP_HINT} (RELAXVM_REQUIRE_TVM=1 makes this a failure)`);
  return true;
}

/** What one Python process made of a batch: the TVM version and each program's output. */
export interface TvmBatch {
  /** `tvm.__version__`. */
  tvm: string;
  programs: TvmOutput[];
}

/** Builds every description with TVM's ExecBuilder (and runs their `runs`), in one process. */
export async function buildWithTvm(programs: readonly ProgramDesc[]): Promise<TvmBatch> {
  if (!tvmAvailable()) throw new Error(`${SETUP_HINT} (looked for ${tvmPython()})`);
  const dir = await Deno.makeTempDir({ prefix: "relaxvm-tvm-" });
  try {
    const input = `${dir}/in.json`, output = `${dir}/out.json`;
    await Deno.writeTextFile(input, JSON.stringify({ programs }));
    const { code, stderr } = await new Deno.Command(tvmPython(), {
      args: [BUILD_PROGRAMS, input, output],
      stdout: "null",
      stderr: "piped",
    }).output();
    if (code !== 0) {
      throw new Error(`build_programs.py failed (${code}): ${new TextDecoder().decode(stderr)}`);
    }
    return JSON.parse(await Deno.readTextFile(output)) as TvmBatch;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
