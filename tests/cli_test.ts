/**
 * End-to-end tests of the `relaxvm` CLI, run as a subprocess on files in a
 * temporary directory. Needs `--allow-read --allow-write --allow-run`.
 */

import { assert, assertEquals, assertStringIncludes } from "@std/assert";
import { ExecBuilder, tensor } from "../mod.ts";

const ROOT = new URL("../", import.meta.url);
const MOD_URL = new URL("../mod.ts", import.meta.url).href;

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `deno run cli/main.ts ...args` with read/write permissions only. */
async function relaxvm(...args: string[]): Promise<CliResult> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", "--allow-read", "--allow-write", "cli/main.ts", ...args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return { code, stdout: decoder.decode(stdout), stderr: decoder.decode(stderr) };
}

/** The program under test, as `as_typescript()` writes it: `add`, `shift` (a constant), `shape_of`. */
function program(): string {
  const ib = new ExecBuilder();
  ib.function("add", { num_inputs: 2 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  ib.function("shift", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), tensor([0.5])], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("shape_of", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.shape_of", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  return ib.get().as_typescript({ importFrom: MOD_URL });
}

/** Asserts a failed run: exit code 1 and one `relaxvm: ...` line on stderr, no stack trace. */
function assertFailure(result: CliResult, includes: string): void {
  assertEquals(result.code, 1, result.stderr);
  assertEquals(result.stdout, "");
  const lines = result.stderr.trimEnd().split("\n");
  assertEquals(lines.length, 1, result.stderr);
  assert(lines[0].startsWith("relaxvm: "), lines[0]);
  assertStringIncludes(lines[0], includes);
  assert(!result.stderr.includes("    at "), "no stack trace");
}

Deno.test("cli: build, dump and run an executable from an as_typescript() module", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm_cli_" });
  try {
    const module = `${dir}/prog.ts`;
    const rvm = `${dir}/prog.rvm`;
    await Deno.writeTextFile(module, program());

    const build = await relaxvm("build", module, "-o", rvm);
    assertEquals(build.code, 0, build.stderr);
    assertStringIncludes(build.stdout, "functions: add, shift, shape_of");
    const bytes = await Deno.readFile(rvm);
    assertStringIncludes(build.stdout, `(${bytes.length} bytes;`);

    const dump = await relaxvm("dump", rvm);
    assertEquals(dump.code, 0, dump.stderr);
    assertStringIncludes(dump.stdout, "Relax VM executable statistics:");
    assertStringIncludes(dump.stdout, "@add:\n  call  vm.op.add        in: %0, %1       dst: %2");

    const releases = await relaxvm("dump", rvm, "--releases");
    assertStringIncludes(releases.stdout, "# then release %0, %1");
    assert(!releases.stdout.includes("statistics"), "--releases alone prints only the listing");

    const ts = await relaxvm("dump", rvm, "--typescript", "--import-from", MOD_URL);
    assertEquals(ts.stdout.trimEnd(), program().trimEnd());

    const add = await relaxvm("run", rvm, "add", "[[1, 2], [3, 4]]", "[10, 20]");
    assertEquals(add.code, 0, add.stderr);
    assertEquals(add.stdout, "[[11, 22], [13, 24]] (float32, shape [2, 2])\n");

    const ints = await relaxvm("run", rvm, "add", "[1, 2]", "[3, 4]", "--dtype", "int32");
    assertEquals(ints.stdout, "[4, 6] (int32, shape [2])\n");

    const shift = await relaxvm("run", rvm, "shift", "[1, 2]");
    assertEquals(shift.stdout, "[1.5, 2.5] (float32, shape [2])\n");

    const shape = await relaxvm("run", rvm, "shape_of", "[[1, 2, 3]]");
    assertEquals(shape.stdout, "(1, 3)\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: errors print one line and exit with code 1", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm_cli_" });
  try {
    const module = `${dir}/prog.ts`;
    const rvm = `${dir}/prog.rvm`;
    await Deno.writeTextFile(module, program());
    assertEquals((await relaxvm("build", module, "-o", rvm)).code, 0);

    // A truncated file is a LoadError naming the section and offset.
    const corrupt = `${dir}/corrupt.rvm`;
    await Deno.writeFile(corrupt, (await Deno.readFile(rvm)).subarray(0, 20));
    assertFailure(await relaxvm("dump", corrupt), "Cannot load executable");
    await Deno.writeFile(corrupt, new TextEncoder().encode("not an executable"));
    assertFailure(await relaxvm("run", corrupt, "add"), "bad magic number");

    // Unknown function, failing call, bad argument, missing file, module without `ex`.
    assertFailure(await relaxvm("run", rvm, "nope"), 'No VM function named "nope"');
    assertFailure(await relaxvm("run", rvm, "add", "[1, 2]", "[1, 2, 3]"), "do not broadcast");
    assertFailure(await relaxvm("run", rvm, "add", "[1, 2"), "Cannot parse argument");
    // A bare word is not taken as a string (a misspelt `true` would pass silently).
    assertFailure(
      await relaxvm("run", rvm, "add", "tru", "[1]"),
      `write a string in double quotes (in a shell: '"tru"')`,
    );
    assertFailure(
      await relaxvm("funcs", "nothing"),
      'no registered packed function starts with "nothing" (names look like vm.op.add',
    );
    assertFailure(await relaxvm("dump", `${dir}/missing.rvm`), "No such file");
    const empty = `${dir}/empty.ts`;
    await Deno.writeTextFile(empty, "export const other = 1;\n");
    assertFailure(await relaxvm("build", empty, "-o", `${dir}/x.rvm`), "does not export `ex`");

    // Bad usage: one line that names the mistake and where help is.
    assertFailure(await relaxvm("frobnicate"), "unknown command 'frobnicate'");
    assertFailure(await relaxvm("run", rvm), "missing required argument 'function'");
    assertFailure(await relaxvm("dump", rvm, "--nope"), "unknown option '--nope'");
    assertFailure(await relaxvm("run", rvm, "add", "--dtype", "int9"), "choose one of float32");
    assertFailure(await relaxvm("build", module), "missing required option '--output'");
    assertFailure(await relaxvm("run", rvm, "add", "--dtype"), "needs a value");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: run --preload registers the program's own packed functions", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm_cli_" });
  try {
    const ib = new ExecBuilder();
    ib.function("main", { num_inputs: 1 }, () => {
      ib.emit_call("test.cli.twice", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    await Deno.writeTextFile(`${dir}/prog.ts`, ib.get().as_typescript({ importFrom: MOD_URL }));
    await Deno.writeTextFile(
      `${dir}/funcs.ts`,
      `import { registerFunc } from ${JSON.stringify(MOD_URL)};\n` +
        `registerFunc("test.cli.twice", (x) => (x as number) * 2);\n`,
    );
    const rvm = `${dir}/prog.rvm`;
    assertEquals((await relaxvm("build", `${dir}/prog.ts`, "-o", rvm)).code, 0);

    const run = await relaxvm("run", rvm, "main", "21", "--preload", `${dir}/funcs.ts`);
    assertEquals(run.code, 0, run.stderr);
    assertEquals(run.stdout, "42\n");
    // An option placed first takes one value and leaves the positional arguments alone;
    // a negative number is an argument, not an option.
    const first = await relaxvm("run", "--preload", `${dir}/funcs.ts`, rvm, "main", "-4.5");
    assertEquals(first.code, 0, first.stderr);
    assertEquals(first.stdout, "-9\n");
    // Without it the call fails, on one line that says how to register it.
    const missing = await relaxvm("run", rvm, "main", "21");
    assertFailure(missing, 'Unknown packed function "test.cli.twice": register it');
    assertStringIncludes(missing.stderr, "(in @main, instruction 0,");
    assertStringIncludes(missing.stderr, "--preload <module> imports a module that registers it");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: funcs lists registered packed functions, filtered by prefix", async () => {
  const all = await relaxvm("funcs");
  assertEquals(all.code, 0, all.stderr);
  const names = all.stdout.trimEnd().split("\n");
  assert(names.includes("vm.builtin.alloc_shape_heap"));
  assert(names.includes("vm.op.add"));
  const ops = await relaxvm("funcs", "vm.op.");
  assert(ops.stdout.trimEnd().split("\n").every((n) => n.startsWith("vm.op.")));
  assertStringIncludes(ops.stdout, "vm.op.matmul\n");
});

Deno.test("cli: profile prints the report's table and writes a Chrome trace", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm_cli_" });
  try {
    const module = `${dir}/prog.ts`;
    const rvm = `${dir}/prog.rvm`;
    await Deno.writeTextFile(module, program());
    assertEquals((await relaxvm("build", module, "-o", rvm)).code, 0);
    const trace = `${dir}/trace.json`;
    const result = await relaxvm("profile", rvm, "shift", "[1, 2, 3]", "--trace", trace);
    assertEquals(result.code, 0, result.stderr);
    const lines = result.stdout.split("\n");
    assert(
      /^Profile of @shift: [\d.]+ ms, 1 call; 16 B allocated, 16 B of it new from the device$/
        .test(lines[0]),
      lines[0],
    );
    assert(
      lines.some((l) => /^vm\.op\.add\s+packed\s+1\s+[\d.]+\s+[\d.]+\s/.test(l)),
      result.stdout,
    );
    assert(lines.some((l) => l.startsWith("@shift[0]  call vm.op.add in: %0, c[0] dst: %1")));
    assertStringIncludes(result.stdout, `Chrome trace: ${trace} (4 events;`);
    const events = JSON.parse(await Deno.readTextFile(trace)).traceEvents;
    assertEquals(
      events.filter((e: { ph: string }) => e.ph === "X").map((e: { name: string }) => e.name),
      ["@shift", "vm.op.add"],
    );
    // Failures are one line, as for run.
    assertFailure(await relaxvm("profile", rvm, "shift"), "takes 1 argument, got 0");
    assertFailure(await relaxvm("profile", rvm, "nope"), 'No VM function named "nope"');
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: --help and --version exit with code 0", async () => {
  const help = await relaxvm("--help");
  assertEquals(help.code, 0);
  for (const command of ["build", "dump", "run", "profile", "funcs"]) {
    assertStringIncludes(help.stdout, command);
  }
  const runHelp = await relaxvm("run", "--help");
  assertEquals(runHelp.code, 0);
  assertStringIncludes(runHelp.stdout, "Usage: relaxvm run <file> <function> [args...] [options]");
  assertStringIncludes(runHelp.stdout, "--preload <module>");
  const version = await relaxvm("--version");
  assertEquals(version.code, 0);
  assert(/^\d+\.\d+\.\d+\n$/.test(version.stdout), version.stdout);
});

Deno.test("cli: imports nothing from npm, so no run can trigger a registry fetch", async () => {
  // Deno builds npm resolution lazily from the lock file and may fetch registry metadata
  // (printing `Download ...` on stderr) when a program that uses npm packages starts.
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", "cli/main.ts"],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(code, 0, new TextDecoder().decode(stderr));
  const info = JSON.parse(new TextDecoder().decode(stdout));
  const specifiers: string[] = info.modules.map((m: { specifier: string }) => m.specifier);
  assert(specifiers.some((s) => s.endsWith("/cli/main.ts")));
  const external = specifiers.filter((s) => !s.startsWith("file:") && !s.startsWith("node:"));
  assertEquals(external, [], "the CLI's module graph is local files and built-ins only");
});

/** The environment of this process without `INIT_CWD` (an outer `deno task` set it). */
function envWithout(name: string): Record<string, string> {
  const env = Deno.env.toObject();
  delete env[name];
  return env;
}

Deno.test("cli: `deno task cli` from another directory resolves paths against that directory", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm_cli_cwd_" });
  try {
    await Deno.mkdir(`${dir}/sub`);
    await Deno.writeTextFile(`${dir}/prog.ts`, program());
    await Deno.writeTextFile(
      `${dir}/preload.ts`,
      `import { registerFunc } from "${MOD_URL}";\nregisterFunc("test.cli.cwd", () => 1, { override: true });\n`,
    );
    // deno task runs the CLI in the repository root and passes the caller's directory as INIT_CWD.
    const task = (cwd: string, ...args: string[]) =>
      new Deno.Command(Deno.execPath(), {
        args: ["task", "--quiet", "--config", new URL("deno.json", ROOT).pathname, "cli", ...args],
        cwd,
        clearEnv: true,
        env: envWithout("INIT_CWD"),
        stdout: "piped",
        stderr: "piped",
      }).output();
    const decode = (b: Uint8Array) => new TextDecoder().decode(b);
    const built = await task(dir, "build", "prog.ts", "-o", "prog.rvm");
    assertEquals(built.code, 0, decode(built.stderr));
    await Deno.stat(`${dir}/prog.rvm`); // written where the caller is, not in the repository
    const run = await task(
      `${dir}/sub`,
      "run",
      "../prog.rvm",
      "add",
      "[1]",
      "[2]",
      "--preload",
      "../preload.ts",
    );
    assertEquals(run.code, 0, decode(run.stderr));
    assertStringIncludes(decode(run.stdout), "3");
    const dump = await task(dir, "dump", "prog.rvm", "--text");
    assertStringIncludes(decode(dump.stdout), "@add:");
    // An installed relaxvm (not run from the repository root) ignores a stray INIT_CWD.
    const installed = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-read",
        "--allow-env",
        new URL("cli/main.ts", ROOT).pathname,
        "dump",
        "prog.rvm",
      ],
      cwd: dir,
      env: { INIT_CWD: "/nonexistent" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assertEquals(installed.code, 0, decode(installed.stderr));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: funcs --long describes each function from its metadata", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm_cli_funcs_" });
  try {
    await Deno.writeTextFile(
      `${dir}/preload.ts`,
      `import { registerFunc } from "${MOD_URL}";
registerFunc("test.funcs.described", (x: number) => x, {
  override: true,
  meta: { signature: "(x) → x", summary: "Gives x back.", dtypes: null, devices: ["cpu"], errors: "", tvm: null },
});
registerFunc("test.funcs.bare", (x: number) => x, { override: true });
`,
    );
    const ops = await relaxvm("funcs", "vm.op.", "--long");
    assertEquals(ops.code, 0, ops.stderr);
    assertStringIncludes(ops.stdout, "vm.op.add(a, b) → tensor\n  Elementwise `a + b`");
    assertStringIncludes(ops.stdout, "dtypes: float32, int32, int64; devices: CPU, WebGPU");
    assertStringIncludes(ops.stdout, "TVM: relax.op.add");
    assert(!/^vm\.builtin\./m.test(ops.stdout), "the prefix filters");
    const own = await relaxvm("funcs", "test.funcs.", "-l", "--preload", `${dir}/preload.ts`);
    assertEquals(own.code, 0, own.stderr);
    assertStringIncludes(own.stdout, "test.funcs.described(x) → x\n  Gives x back.");
    assertStringIncludes(own.stdout, "test.funcs.bare\n  (registered without metadata");
    const short = await relaxvm("funcs", "vm.builtin.kill");
    assertEquals(short.stdout, "vm.builtin.kill\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: run takes a TVM package directory (its weights after the arguments); another directory says what run takes", async () => {
  const notPackage = await relaxvm("run", "testdata", "forward");
  assertFailure(notPackage, "testdata is a directory without a package.json: give a .rvm file");
  assertFailure(
    await relaxvm("dump", "testdata/tvm_webgpu/mlp"),
    "testdata/tvm_webgpu/mlp is a TVM package directory: give its executable",
  );
  if ((await navigator.gpu?.requestAdapter()) == null) return; // the package runs on WebGPU
  const dir = new URL("testdata/tvm_webgpu/mlp/", ROOT);
  const reference = JSON.parse(await Deno.readTextFile(new URL("reference.json", dir)));
  const floats = (
    b64: string,
  ) => [...new Float32Array(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)).buffer)];
  const { inputs: [input], output } = reference.cases[0];
  const result = await relaxvm(
    "run",
    "testdata/tvm_webgpu/mlp",
    "forward",
    JSON.stringify([floats(input.base64)]),
  );
  assertEquals(result.code, 0, result.stderr);
  const printed = /^\[\[(.*)\]\] \(float32, shape \[1, 8\]\)$/.exec(result.stdout.trim());
  assert(printed !== null, result.stdout);
  const got = printed![1].split(", ").map(Number);
  const want = floats(output.base64);
  assertEquals(got.length, want.length);
  got.forEach((v, i) =>
    assert(Math.abs(v - want[i]) < 1e-4, `element ${i}: ${v} vs TVM's ${want[i]}`)
  );
});
