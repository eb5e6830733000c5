/**
 * Runs every registered WebGPU test on this process's main thread, one after
 * another. `in_child_process.ts` starts it with `--protocol` and reads one
 * line per event from stdout; run by hand it prints a readable report and
 * exits with 1 on a failure:
 *
 *     deno run --allow-env --allow-read --allow-write \
 *       --allow-run=tools/onnx/.venv/bin/python,espeak-ng tests/webgpu/run_suites.ts [--filter <text>]
 *
 * `--hide-adapter` simulates a machine without WebGPU.
 *
 * @module
 */

import { type GpuEvent, PROTOCOL_PREFIX } from "./in_child_process.ts";
import { getTestGPU, registeredGpuTests } from "./suite_registry.ts";
import "./suites.ts";

const args = Deno.args;
const protocol = args.includes("--protocol");
const filterAt = args.indexOf("--filter");
const filter = filterAt >= 0 ? args[filterAt + 1] ?? "" : "";
if (args.includes("--hide-adapter")) {
  Object.defineProperty(navigator, "gpu", { value: undefined, configurable: true });
}

let failures = 0;
function emit(event: GpuEvent): void {
  if ("error" in event && event.error !== null) failures++; // a missing adapter counts too
  if (protocol) {
    console.log(PROTOCOL_PREFIX + JSON.stringify(event));
  } else if (event.kind === "adapter" && event.error !== null) {
    console.log(`no WebGPU adapter:\n${event.error}`);
  } else if (event.kind === "result") {
    const status = event.error === null ? "ok" : `FAILED\n${event.error}`;
    console.log(`${event.name} ... ${status} (${event.ms.toFixed(0)} ms)`);
  } else if (event.kind === "done") {
    console.log(`${failures === 0 ? "ok" : "FAILED"} | ${failures} failed`);
  }
}

/** The error with its stack and every `cause` below it. */
function describe(error: unknown): string {
  const parts: string[] = [];
  for (let e = error, depth = 0; e !== undefined && depth < 8; depth++) {
    parts.push(e instanceof Error ? (e.stack ?? `${e.name}: ${e.message}`) : String(e));
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.join("\nCaused by: ");
}

let adapterError: string | null = null;
try {
  await getTestGPU();
} catch (e) {
  adapterError = describe(e);
}
emit({ kind: "adapter", error: adapterError });

if (adapterError === null) {
  for (const test of registeredGpuTests) {
    if (!test.name.includes(filter) || test.ignore) continue;
    const start = performance.now();
    let error: string | null = null;
    // What the test prints with console.log goes with its result, so the parent shows it
    // under the test's own name (figures such as the model checks' agreement).
    const log: string[] = [], print = console.log;
    if (protocol) {
      console.log = (...args: unknown[]) =>
        log.push(args.map((a) => typeof a === "string" ? a : Deno.inspect(a)).join(" "));
    }
    try {
      await test.fn(await getTestGPU());
    } catch (e) {
      error = describe(e);
    } finally {
      console.log = print;
    }
    emit({ kind: "result", name: test.name, error, ms: performance.now() - start, log });
  }
}
emit({ kind: "done" });
if (!protocol && (failures > 0 || adapterError !== null)) Deno.exit(1);
