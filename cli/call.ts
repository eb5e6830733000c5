/**
 * What `relaxvm run` and `relaxvm profile` share: the arguments that name a
 * function and its arguments, the options that shape them (`--dtype`,
 * `--preload`, `--device`), and making the VM that calls it.
 *
 * @module
 */

import {
  cpu,
  type Device,
  TENSOR_DTYPES,
  type TensorDType,
  VirtualMachine,
  webgpu,
} from "../mod.ts";
import type { ArgumentSpec, OptionSpec, ParsedArguments } from "./arguments.ts";
import { importModule, readExecutable } from "./executable_file.ts";
import { parseArg } from "./values.ts";

const DTYPES = TENSOR_DTYPES;

/** The positional arguments: the file, the function, its arguments. */
export const CALL_ARGUMENTS: readonly ArgumentSpec[] = [
  { name: "file", description: "a .rvm file" },
  { name: "function", description: "the VM function to call" },
  {
    name: "args",
    variadic: true,
    description: "arguments as JSON: 3, [1, 2], [[1, 2], [3, 4]] (tensors), true, '\"text\"'",
  },
];

/** The options of a call. */
export const CALL_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  dtype: {
    kind: "value",
    valueName: "<dtype>",
    choices: DTYPES,
    default: "float32",
    description: "dtype of tensors made from JSON arrays",
  },
  device: {
    kind: "value",
    valueName: "<device>",
    choices: ["cpu", "webgpu"],
    default: "cpu",
    description: "the device the VM runs on; tensor arguments move to it",
  },
  preload: {
    kind: "value",
    valueName: "<module>",
    repeatable: true,
    description: "a module to import first, e.g. one that calls registerFunc for the program",
  },
};

/** A VM for the command line's file and device, the function to call and its arguments. */
export interface PreparedCall {
  readonly vm: VirtualMachine;
  readonly function: string;
  readonly args: unknown[];
}

/**
 * Imports the `--preload` modules, loads the file, makes the VM on
 * `--device` and parses the arguments (tensors on the CPU: the VM moves
 * them to its device).
 */
export async function prepareCall(args: ParsedArguments): Promise<PreparedCall> {
  for (const module of args.values("preload")) await importModule(module);
  const ex = await readExecutable(args.requiredArgument("file"));
  const dtype = args.value("dtype") as TensorDType;
  const values = args.rest("args").map((a) => parseArg(a, dtype));
  const device: Device = args.value("device") === "webgpu" ? await webgpu() : cpu();
  return {
    vm: new VirtualMachine(ex, device),
    function: args.requiredArgument("function"),
    args: values,
  };
}
