/**
 * `relaxvm run <file.rvm> <function> [args...]`: loads an executable, runs
 * one VM function on the CPU and prints the result.
 *
 * @module
 */

import { Option } from "@commander-js/extra-typings";
import type { Command } from "@commander-js/extra-typings";
import { type TensorDType, VirtualMachine } from "../../mod.ts";
import { importModule, readExecutable } from "../executable_file.ts";
import { formatValue, parseArg } from "../values.ts";

const DTYPES = [
  "float32",
  "float64",
  "int8",
  "int16",
  "int32",
  "uint8",
  "uint16",
  "uint32",
  "bool",
] as const satisfies readonly TensorDType[];

/** Adds the `run` subcommand to `program`. */
export function addRunCommand(program: Command): void {
  program
    .command("run")
    .description("run a VM function on the CPU and print its result")
    .argument("<file>", "a .rvm file")
    .argument("<function>", "the VM function to call")
    .argument(
      "[args...]",
      "arguments as JSON: 3, [1, 2], [[1, 2], [3, 4]] (tensors), true, '\"text\"'",
    )
    .addOption(
      new Option("--dtype <dtype>", "dtype of tensors made from JSON arrays")
        .choices(DTYPES)
        .default("float32" as const),
    )
    .option(
      "--preload <modules...>",
      "modules to import first, e.g. ones that call registerFunc for the program's packed functions",
    )
    .action(async (file, name, args, options) => {
      for (const module of options.preload ?? []) await importModule(module);
      const ex = await readExecutable(file);
      const values = args.map((a) => parseArg(a, options.dtype));
      const vm = new VirtualMachine(ex);
      const result = await vm.invoke(name, ...values);
      console.log(await formatValue(result));
    });
}
