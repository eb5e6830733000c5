/**
 * `relaxvm funcs [prefix] [--long]`: lists the packed functions in the
 * global registry, the names a program's `Call` instructions can use; with
 * `--long`, what each one is, from the metadata it was registered with
 * (every builtin has some; see docs/builtins.md).
 *
 * @module
 */

import { describeGlobalFunc, type FuncMeta, listGlobalFuncNames } from "../../mod.ts";
import { formatDevices, formatDTypes } from "../../builtins/catalogue.ts";
import { printable } from "../../ground/printable.ts";
import type { CommandSpec } from "../arguments.ts";
import { UsageError } from "../failure.ts";
import { importModule } from "../executable_file.ts";

/** Lines of `text` no wider than `width`, each starting with `indent`. */
function wrap(text: string, indent: string, width = 100): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/).filter((w) => w !== "")) {
    if (line !== "" && indent.length + line.length + 1 + word.length > width) {
      lines.push(indent + line);
      line = word;
    } else {
      line = line === "" ? word : `${line} ${word}`;
    }
  }
  if (line !== "") lines.push(indent + line);
  return lines;
}

/** The `--long` entry of one function: its call, what it does, dtypes, devices, errors, TVM. */
export function describeFunc(name: string, meta: FuncMeta | undefined): string {
  const shown = printable(name);
  if (meta === undefined) {
    return `${shown}\n  (registered without metadata: pass { meta } to registerFunc to describe it)`;
  }
  return [
    `${shown}${meta.signature}`,
    ...wrap(meta.summary, "  "),
    ...wrap(`dtypes: ${formatDTypes(meta.dtypes)}; devices: ${formatDevices(meta.devices)}`, "  "),
    ...(meta.errors === "" ? [] : wrap(`errors: ${meta.errors}`, "  ")),
    ...wrap(`TVM: ${meta.tvm ?? "none (relaxvm's own)"}`, "  "),
  ].join("\n");
}

/** The `funcs` subcommand. */
export const funcsCommand: CommandSpec = {
  name: "funcs",
  description: "list the registered packed functions (--long: what each one is)",
  arguments: [
    { name: "prefix", optional: true, description: "only names starting with this, e.g. vm.op." },
  ],
  options: {
    long: {
      kind: "flag",
      short: "l",
      description: "with each function's signature, summary, dtypes, devices, errors and TVM twin",
    },
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
    if (names.length === 0) {
      throw new UsageError(
        `no registered packed function starts with ${JSON.stringify(prefix)}${
          prefix.includes(".") ? "" : " (names look like vm.op.add: try vm.op. or vm.builtin.)"
        }`,
      );
    }
    if (!args.flag("long")) {
      for (const name of names) console.log(printable(name));
      return;
    }
    console.log(names.map((name) => describeFunc(name, describeGlobalFunc(name))).join("\n\n"));
  },
};
