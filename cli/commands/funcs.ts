/**
 * `relaxvm funcs [prefix]`: lists the packed functions in the global
 * registry, the names a program's `Call` instructions can use.
 *
 * @module
 */

import { listGlobalFuncNames } from "../../mod.ts";
import { printable } from "../../ground/printable.ts";
import type { CommandSpec } from "../arguments.ts";
import { importModule } from "../executable_file.ts";

/** The `funcs` subcommand. */
export const funcsCommand: CommandSpec = {
  name: "funcs",
  description: "list the registered packed functions",
  arguments: [
    { name: "prefix", optional: true, description: "only names starting with this, e.g. vm.op." },
  ],
  options: {
    preload: {
      kind: "value",
      valueName: "<module>",
      repeatable: true,
      description: "a module to import first (it may register more)",
    },
  },
  async run(args) {
    for (const module of args.values("preload")) await importModule(module);
    const prefix = args.argument("prefix") ?? "";
    const names = listGlobalFuncNames().filter((n) => n.startsWith(prefix)).sort();
    for (const name of names) console.log(printable(name));
  },
};
