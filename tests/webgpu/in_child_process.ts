/**
 * Runs the WebGPU suites in a child `deno run` process and registers each of
 * their tests here as its own `Deno.test`, passing or failing as it did there.
 *
 * Why a child process: on Linux machines whose WebGPU adapter comes through
 * EGL (Mesa llvmpipe, as on CI), `deno test` aborts at exit now and then
 * ("double free or corruption", "corrupted size vs. prev_size", or a
 * segfault) after every test has passed. `deno test` runs each test module on
 * a thread of its own that lives until the process ends; the EGL dispatcher
 * (glvnd's libEGL) keeps state for every thread that used EGL and frees it
 * twice when such a thread exits while `exit()` is tearing libEGL down.
 * `deno run` uses WebGPU on the main thread, which never exits that way, so a
 * child process runs the GPU work and the test runner's threads never touch
 * it. Doc examples in the library likewise do not acquire a GPU when run.
 *
 * Without an adapter the tests are ignored, unless `RELAXVM_REQUIRE_WEBGPU=1`,
 * in which case each fails with the reason the child gave.
 *
 * @module
 */

import { registeredGpuTests } from "./suite_registry.ts";
import "./suites.ts";

/** Marks the child's protocol lines on stdout; everything else is the tests' own output. */
export const PROTOCOL_PREFIX = "\u001erelaxvm-gpu-test ";

/** One line of the child's report. */
export type GpuEvent =
  | { kind: "adapter"; error: string | null }
  | { kind: "result"; name: string; error: string | null; ms: number; log?: string[] }
  | { kind: "done" };

/** What the parent learnt from the child. */
export interface WebGPUSuiteStatus {
  /** The child acquired a WebGPU device. */
  adapter: boolean;
  /** Ignore the GPU tests: no adapter and `RELAXVM_REQUIRE_WEBGPU` is not `1`. */
  ignore: boolean;
}

/** The child may not take longer than this; past it, it is killed and its tests fail. */
const CHILD_TIMEOUT_MS = 10 * 60 * 1000;

function requireWebGPU(): boolean {
  try {
    return Deno.env.get("RELAXVM_REQUIRE_WEBGPU") === "1";
  } catch {
    return false; // no --allow-env: treat as unset
  }
}

/**
 * Runs the suites in a child process, then registers one `Deno.test` per GPU
 * test (named as registered) and one that checks the child itself finished
 * cleanly. Call with top-level `await` from a `*_test.ts` module.
 *
 * @param options `hideAdapter` simulates a machine without WebGPU.
 */
export async function registerWebGPUSuites(
  options: { hideAdapter?: boolean } = {},
): Promise<WebGPUSuiteStatus> {
  const runner = new URL("./run_suites.ts", import.meta.url);
  // --allow-write: tests that plant files (a package beside a secret, a link to /dev/zero).
  // --allow-run: the real-model suites' references, onnxruntime in the onnx venv (which also
  // writes MiniLM's model.onnx) and espeak-ng's speech for Silero VAD; nothing else.
  const args = [
    "run",
    "--allow-env",
    "--allow-read",
    "--allow-write",
    "--allow-run=tools/onnx/.venv/bin/python,espeak-ng",
    runner.href,
    "--protocol",
  ];
  if (options.hideAdapter) args.push("--hide-adapter");
  let code = -1;
  let output = "";
  let failure: unknown = null;
  try {
    const result = await new Deno.Command(Deno.execPath(), {
      args,
      cwd: new URL("../../", import.meta.url), // where deno.json maps the imports
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(CHILD_TIMEOUT_MS),
    }).output();
    code = result.code;
    output = new TextDecoder().decode(result.stdout) + new TextDecoder().decode(result.stderr);
  } catch (e) {
    failure = e;
  }

  const events: GpuEvent[] = [];
  const ownOutput: string[] = [];
  for (const line of output.split("\n")) {
    if (line.startsWith(PROTOCOL_PREFIX)) {
      events.push(JSON.parse(line.slice(PROTOCOL_PREFIX.length)));
    } else if (line.trim() !== "") ownOutput.push(line);
  }
  const adapterEvent = events.find((e) => e.kind === "adapter");
  const adapterError = adapterEvent?.kind === "adapter"
    ? adapterEvent.error
    : "the child did not report";
  const results = new Map<string, { error: string | null; log?: string[] }>();
  for (const e of events) if (e.kind === "result") results.set(e.name, e);
  const finished = events.some((e) => e.kind === "done");

  const adapter = adapterError === null;
  const required = requireWebGPU();
  const ignore = !adapter && !required;
  const childSummary = () =>
    `the WebGPU child process ${
      failure === null ? `exited with code ${code}` : `failed: ${failure}`
    }` +
    (ownOutput.length > 0 ? `; its output:\n${ownOutput.join("\n")}` : "");

  for (const { name, ignore: ignoreTest } of registeredGpuTests) {
    Deno.test({
      name,
      ignore: ignore || ignoreTest === true,
      fn() {
        if (!adapter) {
          throw new Error(
            `RELAXVM_REQUIRE_WEBGPU=1 but no WebGPU device could be acquired:\n${adapterError}`,
          );
        }
        const result = results.get(name);
        if (result === undefined) throw new Error(`not run: ${childSummary()}`);
        for (const line of result.log ?? []) console.log(line); // what the test printed there
        if (result.error !== null) {
          throw new Error(`failed in the WebGPU child process:\n${result.error}`);
        }
      },
    });
  }
  Deno.test({
    name: "the WebGPU child process ran every suite and exited cleanly",
    ignore,
    fn() {
      if (failure !== null || code !== 0 || !finished) throw new Error(childSummary());
    },
  });
  return { adapter, ignore };
}
