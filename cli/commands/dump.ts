/**
 * `relaxvm dump <file.rvm>`: prints what an executable holds, as statistics,
 * the instruction listing (optionally with release points) or a TypeScript
 * module that rebuilds it. Without a choice it prints stats and text.
 *
 * @module
 */

import type { CommandSpec } from "../arguments.ts";
import { readExecutable } from "../executable_file.ts";

/** The `dump` subcommand. */
export const dumpCommand: CommandSpec = {
  name: "dump",
  description: "print an executable's statistics, listing or TypeScript (default: stats + text)",
  arguments: [
    {
      name: "file",
      description:
        "a .rvm file written by `relaxvm build` or `Executable.save()`, or a TVM executable",
    },
  ],
  options: {
    stats: { kind: "flag", description: "constant pool and globals, as TVM prints them" },
    text: { kind: "flag", description: "the instruction listing" },
    releases: {
      kind: "flag",
      description: "the listing with the points where values are released",
    },
    python: { kind: "flag", description: "TVM's as_python() listing, as TVM prints it" },
    typescript: { kind: "flag", description: "a TypeScript module that rebuilds the executable" },
    "import-from": {
      kind: "value",
      valueName: "<specifier>",
      default: "jsr:@relaxvm/relaxvm",
      description: "where the TypeScript module imports relaxvm from",
    },
  },
  async run(args) {
    const ex = await readExecutable(args.requiredArgument("file"));
    const [stats, text, releases, python, typescript] = [
      "stats",
      "text",
      "releases",
      "python",
      "typescript",
    ].map((name) => args.flag(name));
    const chosen = stats || text || releases || python || typescript;
    const parts: string[] = [];
    if (stats || !chosen) parts.push(ex.stats());
    if (text || releases || !chosen) parts.push(ex.as_text({ releases }));
    if (python) parts.push(ex.as_python());
    if (typescript) parts.push(ex.as_typescript({ importFrom: args.value("import-from") }));
    console.log(parts.map((p) => p.trimEnd()).join("\n\n"));
  },
};
