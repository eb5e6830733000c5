/**
 * `relaxvm run <file.rvm> <function> [args...]`: loads an executable, runs
 * one VM function (on the CPU, or on WebGPU with `--device webgpu`) and
 * prints the result. The file may be a TVM package directory, which runs on
 * WebGPU with its weights passed after the arguments.
 *
 * @module
 */

import type { CommandSpec } from "../arguments.ts";
import { CALL_ARGUMENTS, CALL_OPTIONS, prepareCall } from "../call.ts";
import { formatValue } from "../values.ts";

/** The `run` subcommand. */
export const runCommand: CommandSpec = {
  name: "run",
  description: "run a VM function and print its result",
  arguments: CALL_ARGUMENTS,
  options: CALL_OPTIONS,
  async run(args) {
    const call = await prepareCall(args);
    const result = await call.vm.invoke(call.function, ...call.args);
    console.log(await formatValue(result));
  },
};
