/** Unit tests of the CLI's argument parser (`cli/arguments.ts`). */

import { assertEquals, assertThrows } from "@std/assert";
import { type CommandSpec, parseCommandLine, synopsis } from "../cli/arguments.ts";
import { UsageError } from "../cli/failure.ts";

const spec: CommandSpec = {
  name: "run",
  description: "test command",
  arguments: [
    { name: "file", description: "" },
    { name: "function", description: "", optional: true },
    { name: "args", description: "", variadic: true },
  ],
  options: {
    dtype: { kind: "value", choices: ["float32", "int32"], default: "float32", description: "" },
    preload: { kind: "value", repeatable: true, description: "" },
    output: { kind: "value", short: "o", description: "" },
    verbose: { kind: "flag", short: "v", description: "" },
  },
  run: () => Promise.resolve(),
};

Deno.test("cli arguments: positionals, options in any place, defaults", () => {
  const parsed = parseCommandLine(spec, [
    "--preload",
    "a.ts",
    "prog.rvm",
    "-v",
    "main",
    "[1, 2]",
    "--preload=b.ts",
    "-3",
    "-o",
    "-",
  ]);
  assertEquals(parsed.argument("file"), "prog.rvm");
  assertEquals(parsed.argument("function"), "main");
  assertEquals(parsed.rest("args"), ["[1, 2]", "-3"]);
  assertEquals(parsed.values("preload"), ["a.ts", "b.ts"]);
  assertEquals(parsed.value("dtype"), "float32");
  assertEquals(parsed.value("output"), "-");
  assertEquals(parsed.flag("verbose"), true);
});

Deno.test("cli arguments: `--` ends the options", () => {
  const parsed = parseCommandLine(spec, ["f.rvm", "main", "--", "--verbose", "-x"]);
  assertEquals(parsed.rest("args"), ["--verbose", "-x"]);
  assertEquals(parsed.flag("verbose"), false);
});

Deno.test("cli arguments: mistakes are UsageErrors that name them", () => {
  const cases: [string[], string][] = [
    [[], "missing required argument 'file'"],
    [["f", "--nope"], "unknown option '--nope'"],
    [["f", "-x"], "unknown option '-x'"],
    [["f", "--dtype"], "needs a value"],
    [["f", "--dtype", "int8"], 'got "int8"; choose one of float32, int32'],
    [["f", "-o", "a", "-o", "b"], "was given more than once"],
    [["f", "--verbose=yes"], "takes no value"],
  ];
  for (const [args, message] of cases) {
    assertThrows(() => parseCommandLine(spec, args), UsageError, message);
  }
  const strict: CommandSpec = { ...spec, arguments: [{ name: "file", description: "" }] };
  assertThrows(() => parseCommandLine(strict, ["a", "b"]), UsageError, 'unexpected argument "b"');
});

Deno.test("cli arguments: synopsis", () => {
  assertEquals(synopsis(spec), "relaxvm run <file> [function] [args...] [options]");
});
