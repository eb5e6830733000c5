/**
 * Runs every registered WebGPU test on this process's main thread, one after
 * another, and writes one protocol line per event to stdout. Started by
 * `in_child_process.ts` as `deno run`; `--hide-adapter` simulates a machine
 * without WebGPU.
 *
 * @module
 */

import { type GpuEvent, PROTOCOL_PREFIX } from "./in_child_process.ts";
import { getTestGPU, registeredGpuTests } from "./registry.ts";
import "./suites.ts";

if (Deno.args.includes("--hide-adapter")) {
  Object.defineProperty(navigator, "gpu", { value: undefined, configurable: true });
}

function emit(event: GpuEvent): void {
  console.log(PROTOCOL_PREFIX + JSON.stringify(event));
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
    const start = performance.now();
    let error: string | null = null;
    try {
      await test.fn(await getTestGPU());
    } catch (e) {
      error = describe(e);
    }
    emit({ kind: "result", name: test.name, error, ms: performance.now() - start });
  }
}
emit({ kind: "done" });
