/**
 * `relaxvm run <file.rvm> <function> [args...]`: loads an executable, runs
 * one VM function on the CPU and prints the result.
 *
 * @module
 */

import { type TensorDType, VirtualMachine } from "../../mod.ts";
import type { CommandSpec } from "../arguments.ts";
import { importModule, readExecutable } from "../executable_file.ts";
import { formatValue, parseArg } from "../values.ts";

const DTYPES = [
  "float32",
  "float64",
  "float16",
  "bfloat16",
  "int8",
  "int16",
  "int32",
  "int64",
  "uint8",
  "uint16",
  "uint32",
  "bool",
] as const satisfies readonly TensorDType[];

/** The `run` subcommand. */
export const runCommand: CommandSpec = {
  name: "run",
  description: "run a VM function on the CPU and print its result",
  arguments: [
    { name: "file", description: "a .rvm file" },
    { name: "function", description: "the VM function to call" },
    {
      name: "args",
      variadic: true,
      description: "arguments as JSON: 3, [1, 2], [[1, 2], [3, 4]] (tensors), true, '\"text\"'",
    },
  ],
  options: {
    dtype: {
      kind: "value",
      valueName: "<dtype>",
      choices: DTYPES,
      default: "float32",
      description: "dtype of tensors made from JSON arrays",
    },
    preload: {
      kind: "value",
      valueName: "<module>",
      repeatable: true,
      description: "a module to import first, e.g. one that calls registerFunc for the program",
    },
  },
  async run(args) {
    for (const module of args.values("preload")) await importModule(module);
    const ex = await readExecutable(args.requiredArgument("file"));
    const dtype = args.value("dtype") as TensorDType;
    const values = args.rest("args").map((a) => parseArg(a, dtype));
    const vm = new VirtualMachine(ex);
    const result = await vm.invoke(args.requiredArgument("function"), ...values);
    console.log(await formatValue(result));
  },
};
