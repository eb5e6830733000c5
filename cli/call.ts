/**
 * What `relaxvm run` and `relaxvm profile` share: the arguments that name a
 * function and its arguments, the options that shape them (`--dtype`,
 * `--preload`, `--device`), the limits of the call (`--timeout`, by default
 * a minute, `--fuel`, `--max-memory`), and making the VM that calls it.
 *
 * @module
 */

import {
  cpu,
  type Device,
  loadTVMPackage,
  TENSOR_DTYPES,
  type TensorDType,
  VirtualMachine,
  webgpu,
} from "../mod.ts";
import type { ArgumentSpec, OptionSpec, ParsedArguments } from "./arguments.ts";
import { callerPath, importModule, packageDirectory, readExecutable } from "./executable_file.ts";
import { UsageError } from "./failure.ts";
import { parseArg } from "./values.ts";

const DTYPES = TENSOR_DTYPES;

/** The positional arguments: the file, the function, its arguments. */
export const CALL_ARGUMENTS: readonly ArgumentSpec[] = [
  {
    name: "file",
    description: "a .rvm file, or a TVM package directory (tools/tvm/export_webgpu.py's output)",
  },
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
  timeout: {
    kind: "value",
    valueName: "<ms>",
    default: "60000",
    description: "stop the call after this many milliseconds (`none`: no limit)",
  },
  fuel: {
    kind: "value",
    valueName: "<n>",
    default: "none",
    description: "stop the call after this many instructions (loops and calls count)",
  },
  "max-memory": {
    kind: "value",
    valueName: "<bytes>",
    default: String(2 ** 30),
    description: "the most memory the VM may hold",
  },
};

/** A limit option's value: a non-negative number, or `none` (no limit). */
function limitValue(args: ParsedArguments, name: string): number | undefined {
  const text = args.value(name);
  if (text === undefined || text === "none") return undefined;
  const n = Number(text);
  if (text.trim() === "" || !(n >= 0)) {
    throw new UsageError(
      `option '--${name}' got ${JSON.stringify(text)}; give a non-negative number or none`,
    );
  }
  return n;
}

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
  const limits = {
    timeoutMs: limitValue(args, "timeout"),
    fuel: limitValue(args, "fuel"),
    maxMemoryBytes: limitValue(args, "max-memory"),
  };
  for (const module of args.values("preload")) await importModule(module);
  const file = args.requiredArgument("file");
  const name = args.requiredArgument("function");
  const dtype = args.value("dtype") as TensorDType;
  const values = args.rest("args").map((a) => parseArg(a, dtype));
  if (await packageDirectory(file)) {
    // A TVM package runs where its kernels are compiled, on WebGPU, with its weights passed
    // after the arguments, as `vm.invoke(f, ...args, ...pkg.params(f))` does.
    const pkg = await loadTVMPackage(callerPath(file));
    return { vm: pkg.createVM(limits), function: name, args: [...values, ...pkg.params(name)] };
  }
  const ex = await readExecutable(file);
  const device: Device = args.value("device") === "webgpu" ? await webgpu() : cpu();
  return {
    // A file from elsewhere may loop forever or allocate without end: the call is bounded.
    vm: new VirtualMachine(ex, device, limits),
    function: name,
    args: values,
  };
}
