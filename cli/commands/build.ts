/**
 * `relaxvm build <module> -o <out.rvm>`: imports a TypeScript or JavaScript
 * module that exports `ex` (such as the output of `as_typescript()`) and
 * writes `ex.save()`.
 *
 * @module
 */

import { printable } from "../../ground/printable.ts";
import type { CommandSpec } from "../arguments.ts";
import { importExecutable, writeExecutable } from "../executable_file.ts";

/** The `build` subcommand. */
export const buildCommand: CommandSpec = {
  name: "build",
  description: "compile a module that exports `ex: Executable` into a .rvm file",
  arguments: [{ name: "module", description: "TypeScript/JavaScript module exporting `ex`" }],
  options: {
    output: {
      kind: "value",
      short: "o",
      valueName: "<file>",
      required: true,
      description: "where to write the executable",
    },
    format: {
      kind: "value",
      valueName: "<format>",
      default: "relaxvm",
      choices: ["relaxvm", "tvm"],
      description: "relaxvm's format, or Apache TVM 0.27's (which TVM loads and runs)",
    },
  },
  async run(args) {
    const output = args.value("output")!;
    const ex = await importExecutable(args.requiredArgument("module"));
    const size = await writeExecutable(output, ex, args.value("format") as "relaxvm" | "tvm");
    const names = ex.function_names.map(printable).join(", ");
    console.log(`Wrote ${output} (${size} bytes; functions: ${names})`);
  },
};
