/**
 * `relaxvm dump <file.rvm>`: prints what an executable holds, as statistics,
 * the instruction listing (optionally with release points) or a TypeScript
 * module that rebuilds it. Without a choice it prints stats and text.
 *
 * @module
 */

import type { Command } from "@commander-js/extra-typings";
import { readExecutable } from "../executable_file.ts";

/** Adds the `dump` subcommand to `program`. */
export function addDumpCommand(program: Command): void {
  program
    .command("dump")
    .description("print an executable's statistics, listing or TypeScript (default: stats + text)")
    .argument("<file>", "a .rvm file written by `relaxvm build` or `Executable.save()`")
    .option("--stats", "constant pool and globals, as TVM prints them")
    .option("--text", "the instruction listing")
    .option("--releases", "the listing with the points where values are released")
    .option("--typescript", "a TypeScript module that rebuilds the executable")
    .option(
      "--import-from <specifier>",
      "where the TypeScript module imports relaxvm from",
      "jsr:@relaxvm/relaxvm",
    )
    .action(async (file, options) => {
      const ex = await readExecutable(file);
      const chosen = options.stats || options.text || options.releases || options.typescript;
      const parts: string[] = [];
      if (options.stats || !chosen) parts.push(ex.stats());
      if (options.text || options.releases || !chosen) {
        parts.push(ex.as_text({ releases: options.releases === true }));
      }
      if (options.typescript) parts.push(ex.as_typescript({ importFrom: options.importFrom }));
      console.log(parts.map((p) => p.trimEnd()).join("\n\n"));
    });
}
