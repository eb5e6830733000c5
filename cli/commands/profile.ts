/**
 * `relaxvm profile <file.rvm> <function> [args...] [--trace out.json]`:
 * runs one VM function under `vm.profile` and prints the report's table
 * (per function and per instruction: calls, wall time, bytes allocated, and
 * GPU time on `--device webgpu` where the adapter has timestamp queries);
 * `--trace` also writes a Chrome trace for `chrome://tracing` or Perfetto.
 *
 * @module
 */

import type { CommandSpec } from "../arguments.ts";
import { CALL_ARGUMENTS, CALL_OPTIONS, prepareCall } from "../call.ts";
import { callerPath } from "../executable_file.ts";

/** The `profile` subcommand. */
export const profileCommand: CommandSpec = {
  name: "profile",
  description: "run a VM function once and print where its time and memory went",
  arguments: CALL_ARGUMENTS,
  options: {
    ...CALL_OPTIONS,
    trace: {
      kind: "value",
      valueName: "<file.json>",
      description: "also write a Chrome trace (open it in chrome://tracing or ui.perfetto.dev)",
    },
  },
  async run(args) {
    const call = await prepareCall(args);
    const report = await call.vm.profile(call.function, ...call.args);
    console.log(report.table());
    const trace = args.value("trace");
    if (trace !== undefined) {
      const json = report.chromeTrace();
      await Deno.writeTextFile(callerPath(trace), JSON.stringify(json) + "\n");
      console.log(
        `\nChrome trace: ${trace} (${json.traceEvents.length} events; open it in chrome://tracing or https://ui.perfetto.dev)`,
      );
    }
  },
};
