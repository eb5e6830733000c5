/**
 * `relaxvm build <module> -o <out.rvm>`: imports a TypeScript or JavaScript
 * module that exports `ex` (such as the output of `as_typescript()`) and
 * writes `ex.save()`.
 *
 * @module
 */

import type { Command } from "@commander-js/extra-typings";
import { importExecutable, writeExecutable } from "../executable_file.ts";

/** Adds the `build` subcommand to `program`. */
export function addBuildCommand(program: Command): void {
  program
    .command("build")
    .description("compile a module that exports `ex: Executable` into a .rvm file")
    .argument("<module>", "TypeScript/JavaScript module exporting `ex`")
    .requiredOption("-o, --output <file>", "where to write the executable")
    .action(async (module, options) => {
      const ex = await importExecutable(module);
      const size = await writeExecutable(options.output, ex);
      const names = ex.function_names.join(", ");
      console.log(`Wrote ${options.output} (${size} bytes; functions: ${names})`);
    });
}
