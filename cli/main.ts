/**
 * `relaxvm`: the command line tool of relaxvm. Build `.rvm` files from
 * TypeScript modules, dump them, run their functions, and list the packed
 * functions a program can call.
 *
 * ```sh
 * deno run -A jsr:@relaxvm/relaxvm/cli build prog.ts -o prog.rvm
 * deno run -A jsr:@relaxvm/relaxvm/cli dump prog.rvm
 * deno run -A jsr:@relaxvm/relaxvm/cli run prog.rvm main '[1, 2]' '[3, 4]'
 * ```
 *
 * Failures print one line to stderr and exit with code 1.
 *
 * @module
 */

import { Command, CommanderError } from "@commander-js/extra-typings";
import denoJson from "../deno.json" with { type: "json" };
import { addBuildCommand } from "./commands/build.ts";
import { addDumpCommand } from "./commands/dump.ts";
import { addFuncsCommand } from "./commands/funcs.ts";
import { addRunCommand } from "./commands/run.ts";
import { describeError } from "./errors.ts";

/**
 * The `relaxvm` program with all its subcommands. It throws instead of
 * exiting, so `main` decides the exit code.
 */
function createProgram(): Command {
  const program = new Command()
    .name("relaxvm")
    .description("Build, inspect and run Relax VM executables (.rvm files)")
    .version(denoJson.version)
    .showHelpAfterError("(run `relaxvm --help` for usage)")
    // Commander would read NO_COLOR/FORCE_COLOR to decide; plain text needs no env permission.
    .configureOutput({ getOutHasColors: () => false, getErrHasColors: () => false })
    .exitOverride();
  addBuildCommand(program);
  addDumpCommand(program);
  addRunCommand(program);
  addFuncsCommand(program);
  return program;
}

/**
 * Runs the CLI on `args` (without the program name) and resolves to the
 * exit code: 0 on success, 1 on any error, which is reported on stderr as
 * `relaxvm: <message>`.
 */
export async function main(args: readonly string[]): Promise<number> {
  try {
    await createProgram().parseAsync([...args], { from: "user" });
    return 0;
  } catch (error) {
    // Commander has already printed its own message (or the help text).
    if (error instanceof CommanderError) return error.exitCode;
    console.error(`relaxvm: ${describeError(error)}`);
    return 1;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
