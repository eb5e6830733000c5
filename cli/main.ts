/**
 * `relaxvm`: the command line tool of relaxvm. Build `.rvm` files from
 * TypeScript modules, dump them, run their functions, and list the packed
 * functions a program can call.
 *
 * ```sh
 * deno run -A jsr:@relaxvm/relaxvm/cli build prog.ts -o prog.rvm
 * deno run -A jsr:@relaxvm/relaxvm/cli dump prog.rvm
 * deno run -A jsr:@relaxvm/relaxvm/cli run prog.rvm main '[1, 2]' '[3, 4]'
 * deno run -A jsr:@relaxvm/relaxvm/cli profile prog.rvm main '[1, 2]' '[3, 4]' --trace t.json
 * deno run -A jsr:@relaxvm/relaxvm/cli import model.onnx -o model.rvm
 * deno run -A jsr:@relaxvm/relaxvm/cli serve --model gpt-tiny --port 8000
 * ```
 *
 * Failures print one line to stderr and exit with code 1. The CLI imports
 * nothing from npm, so once Deno has cached relaxvm it starts without the
 * network on every path.
 *
 * @module
 */

import denoJson from "../deno.json" with { type: "json" };
import { commandHelp, type CommandSpec, parseCommandLine } from "./arguments.ts";
import { buildCommand } from "./commands/build.ts";
import { dumpCommand } from "./commands/dump.ts";
import { funcsCommand } from "./commands/funcs.ts";
import { importCommand } from "./commands/import.ts";
import { profileCommand } from "./commands/profile.ts";
import { runCommand } from "./commands/run.ts";
import { serveCommand } from "./commands/serve.ts";
import { describeError, UsageError } from "./failure.ts";

const COMMANDS: readonly CommandSpec[] = [
  buildCommand,
  dumpCommand,
  runCommand,
  profileCommand,
  funcsCommand,
  importCommand,
  serveCommand,
];

/** The text of `relaxvm --help`. */
function programHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length)) + 2;
  const commands = COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.description}`);
  return [
    "Usage: relaxvm <command> [arguments] [options]",
    "Build, inspect and run Relax VM executables (.rvm files)",
    `Commands:\n${commands.join("\n")}`,
    "Options:\n  -h, --help     show this help (`relaxvm <command> --help` for a command's)\n" +
    "  -V, --version  print the version",
  ].join("\n\n");
}

const isHelp = (word: string) => word === "--help" || word === "-h";

/**
 * Runs the CLI on `args` (without the program name) and resolves to the
 * exit code: 0 on success, 1 on any error, which is reported on stderr as
 * one line, `relaxvm: <message>`.
 */
export async function main(args: readonly string[]): Promise<number> {
  const [name, ...rest] = args;
  if (name === undefined || isHelp(name)) {
    console.log(programHelp());
    return name === undefined ? 1 : 0;
  }
  if (name === "--version" || name === "-V") {
    console.log(denoJson.version);
    return 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
  try {
    if (command === undefined) {
      throw new UsageError(`unknown command '${name}'`);
    }
    const end = rest.indexOf("--");
    if ((end < 0 ? rest : rest.slice(0, end)).some(isHelp)) {
      console.log(commandHelp(command));
      return 0;
    }
    await command.run(parseCommandLine(command, rest));
    return 0;
  } catch (error) {
    const hint = error instanceof UsageError
      ? ` (run \`relaxvm ${command === undefined ? "" : `${command.name} `}--help\` for usage)`
      : "";
    console.error(`relaxvm: ${describeError(error)}${hint}`);
    return 1;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
