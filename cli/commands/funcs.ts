/**
 * `relaxvm funcs [prefix]`: lists the packed functions in the global
 * registry, the names a program's `Call` instructions can use.
 *
 * @module
 */

import type { Command } from "@commander-js/extra-typings";
import { listGlobalFuncNames } from "../../mod.ts";
import { importModule } from "../executable_file.ts";

/** Adds the `funcs` subcommand to `program`. */
export function addFuncsCommand(program: Command): void {
  program
    .command("funcs")
    .description("list the registered packed functions")
    .argument("[prefix]", "only names starting with this, e.g. vm.op.")
    .option("--preload <modules...>", "modules to import first (they may register more)")
    .action(async (prefix, options) => {
      for (const module of options.preload ?? []) await importModule(module);
      const names = listGlobalFuncNames()
        .filter((n) => prefix === undefined || n.startsWith(prefix))
        .sort();
      for (const name of names) console.log(name);
    });
}
