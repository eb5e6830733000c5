/**
 * A small command-line parser for the `relaxvm` subcommands, written here so
 * the CLI imports nothing from npm: Deno resolves npm packages from the lock
 * file lazily and may fetch registry metadata on start-up, so a CLI with npm
 * dependencies can touch the network (and print `Download ...` on stderr) on
 * any run. Built-ins only, then.
 *
 * Conventions, as in most CLIs: `--name value`, `--name=value`, `-o value`,
 * boolean flags, repeatable options, `--` ends the options. A token that
 * looks like a negative number (`-3`, `-1.5`) is a positional argument, so
 * `relaxvm run prog.rvm f -3` passes -3.
 *
 * @module
 */

import { UsageError } from "./failure.ts";

/** One option a command accepts. */
export interface OptionSpec {
  /** `"flag"`: present or not; `"value"`: takes one argument. */
  readonly kind: "flag" | "value";
  /** A one-letter alias (`"o"` for `-o`). */
  readonly short?: string;
  /** The placeholder shown in help (`<file>`). */
  readonly valueName?: string;
  /** May be given several times; the values are collected in order. */
  readonly repeatable?: boolean;
  /** Must be given. */
  readonly required?: boolean;
  /** The value when absent. */
  readonly default?: string;
  /** The only accepted values. */
  readonly choices?: readonly string[];
  /** One line of help. */
  readonly description: string;
}

/** One positional argument a command accepts, in order. */
export interface ArgumentSpec {
  /** Shown in help and errors. */
  readonly name: string;
  /** One line of help. */
  readonly description: string;
  /** Absent arguments are an error unless `optional`. */
  readonly optional?: boolean;
  /** Takes every remaining positional argument (last only). */
  readonly variadic?: boolean;
}

/** What a subcommand declares: its arguments, options and action. */
export interface CommandSpec {
  /** The subcommand's name (`relaxvm <name>`). */
  readonly name: string;
  /** One line for `relaxvm --help`. */
  readonly description: string;
  /** Positional arguments, in order. */
  readonly arguments: readonly ArgumentSpec[];
  /** Options by long name (without `--`). */
  readonly options: Readonly<Record<string, OptionSpec>>;
  /** Runs the command on parsed arguments. */
  run(args: ParsedArguments): Promise<void>;
}

/** The arguments of one command line, checked against its `CommandSpec`. */
export class ParsedArguments {
  readonly #positionals: ReadonlyMap<string, readonly string[]>;
  readonly #options: ReadonlyMap<string, readonly string[]>;
  readonly #flags: ReadonlySet<string>;

  /**
   * Built by `parseCommandLine`.
   *
   * @ignore
   */
  constructor(
    positionals: ReadonlyMap<string, readonly string[]>,
    options: ReadonlyMap<string, readonly string[]>,
    flags: ReadonlySet<string>,
  ) {
    this.#positionals = positionals;
    this.#options = options;
    this.#flags = flags;
  }

  /** A single positional argument (undefined when optional and absent). */
  argument(name: string): string | undefined {
    return this.#positionals.get(name)?.[0];
  }

  /** A required positional argument. */
  requiredArgument(name: string): string {
    const value = this.argument(name);
    if (value === undefined) throw new UsageError(`missing required argument '${name}'`);
    return value;
  }

  /** A variadic positional argument (empty when absent). */
  rest(name: string): readonly string[] {
    return this.#positionals.get(name) ?? [];
  }

  /** Whether a flag was given. */
  flag(name: string): boolean {
    return this.#flags.has(name);
  }

  /** The last value of an option, or its default. */
  value(name: string): string | undefined {
    return this.#options.get(name)?.at(-1);
  }

  /** Every value of a repeatable option, in order. */
  values(name: string): readonly string[] {
    return this.#options.get(name) ?? [];
  }
}

const NEGATIVE_NUMBER = /^-(\d|\.\d|Infinity$)/;

/** Finds the option a token names, by `--long` or `-s`. */
function lookUp(spec: CommandSpec, token: string): [string, OptionSpec] | undefined {
  if (token.startsWith("--")) {
    const name = token.slice(2);
    return Object.hasOwn(spec.options, name) ? [name, spec.options[name]] : undefined;
  }
  const short = token.slice(1);
  return Object.entries(spec.options).find(([, o]) => o.short === short);
}

/**
 * Parses `args` (the words after the subcommand's name) against `spec`.
 * Throws `UsageError` for an unknown option, a missing value or argument,
 * a value outside `choices`, or extra arguments.
 */
export function parseCommandLine(spec: CommandSpec, args: readonly string[]): ParsedArguments {
  const positionals: string[] = [];
  const options = new Map<string, string[]>();
  const flags = new Set<string>();
  for (let i = 0; i < args.length; i++) {
    const word = args[i];
    if (word === "--") {
      positionals.push(...args.slice(i + 1));
      break;
    }
    if (!word.startsWith("-") || word === "-" || NEGATIVE_NUMBER.test(word)) {
      positionals.push(word);
      continue;
    }
    const equals = word.startsWith("--") ? word.indexOf("=") : -1;
    const token = equals < 0 ? word : word.slice(0, equals);
    const found = lookUp(spec, token);
    if (found === undefined) throw new UsageError(`unknown option '${token}'`);
    const [name, option] = found;
    if (option.kind === "flag") {
      if (equals >= 0) throw new UsageError(`option '${token}' takes no value`);
      flags.add(name);
      continue;
    }
    let value: string;
    if (equals >= 0) {
      value = word.slice(equals + 1);
    } else {
      if (i + 1 >= args.length) {
        throw new UsageError(`option '${token} ${option.valueName ?? "<value>"}' needs a value`);
      }
      value = args[++i];
    }
    if (option.choices !== undefined && !option.choices.includes(value)) {
      throw new UsageError(
        `option '${token}' got ${JSON.stringify(value)}; choose one of ${
          option.choices.join(", ")
        }`,
      );
    }
    const list = options.get(name) ?? [];
    if (list.length > 0 && !option.repeatable) {
      throw new UsageError(`option '${token}' was given more than once`);
    }
    list.push(value);
    options.set(name, list);
  }
  for (const [name, option] of Object.entries(spec.options)) {
    if (options.has(name) || option.kind === "flag") continue;
    if (option.required) throw new UsageError(`missing required option '--${name}'`);
    if (option.default !== undefined) options.set(name, [option.default]);
  }
  return new ParsedArguments(assignPositionals(spec, positionals), options, flags);
}

/** Matches positional words to the declared arguments, in order. */
function assignPositionals(
  spec: CommandSpec,
  words: readonly string[],
): Map<string, readonly string[]> {
  const assigned = new Map<string, readonly string[]>();
  let next = 0;
  for (const argument of spec.arguments) {
    if (argument.variadic) {
      assigned.set(argument.name, words.slice(next));
      next = words.length;
    } else if (next < words.length) {
      assigned.set(argument.name, [words[next++]]);
    } else if (!argument.optional) {
      throw new UsageError(`missing required argument '${argument.name}'`);
    }
  }
  if (next < words.length) {
    throw new UsageError(`unexpected argument ${JSON.stringify(words[next])}`);
  }
  return assigned;
}

/** The one-line synopsis: `relaxvm run <file> <function> [args...] [options]`. */
export function synopsis(spec: CommandSpec): string {
  const parts = spec.arguments.map((a) => {
    const name = a.variadic ? `${a.name}...` : a.name;
    return a.optional || a.variadic ? `[${name}]` : `<${name}>`;
  });
  if (Object.keys(spec.options).length > 0) parts.push("[options]");
  return `relaxvm ${spec.name} ${parts.join(" ")}`;
}

/** The text of `relaxvm <command> --help`. */
export function commandHelp(spec: CommandSpec): string {
  const rows: [string, string][] = spec.arguments.map((a) => [`  ${a.name}`, a.description]);
  const optionRows: [string, string][] = Object.entries(spec.options).map(([name, o]) => {
    const short = o.short === undefined ? "    " : `-${o.short}, `;
    const value = o.kind === "value" ? ` ${o.valueName ?? "<value>"}` : "";
    const notes = [
      o.required ? "required" : "",
      o.repeatable ? "repeatable" : "",
      o.choices ? `one of ${o.choices.join(", ")}` : "",
      o.default !== undefined ? `default ${o.default}` : "",
    ].filter((n) => n !== "");
    const note = notes.length > 0 ? ` (${notes.join("; ")})` : "";
    return [`  ${short}--${name}${value}`, o.description + note];
  });
  optionRows.push(["  -h, --help", "show this help"]);
  const width = Math.max(...[...rows, ...optionRows].map(([left]) => left.length)) + 2;
  const table = (list: [string, string][]) =>
    list.map(([left, right]) => left.padEnd(width) + right).join("\n");
  const sections = [`Usage: ${synopsis(spec)}`, spec.description];
  if (rows.length > 0) sections.push(`Arguments:\n${table(rows)}`);
  sections.push(`Options:\n${table(optionRows)}`);
  return sections.join("\n\n");
}
