/**
 * The README's first commands on a machine that has never run Deno: `deno task demo`,
 * `deno task cli` and `deno task repl` fetch nothing beyond what they import (the library
 * imports nothing from npm), so they work from an empty cache with the npm registry
 * unreachable.
 *
 * Why it needs a test: `deno task` installs every npm package named in deno.json's "imports"
 * and every package of the lock file before it runs any task. So deno.json maps no bare
 * specifier to `npm:` (`@std/assert` goes through `tests/std/assert.ts`), it turns the
 * automatic lock file off (`"lock": false`), and the tasks that do use npm peers (test, check,
 * bench, bundle) pass `--lock=deno.lock` themselves.
 *
 * Each command runs with `DENO_DIR` a fresh empty directory and `NPM_CONFIG_REGISTRY` a closed
 * local port, so any npm fetch fails the command; a control run shows that an npm import does
 * fail under that setup.
 */

import { assert, assertEquals, assertStringIncludes } from "@std/assert";

const ROOT = new URL("../", import.meta.url);

/** Runs `deno <args>` from the repository root with an empty cache and no npm registry. */
async function firstRun(args: string[], stdin = ""): Promise<{
  code: number;
  out: string;
  err: string;
  npmCache: string[];
}> {
  const denoDir = await Deno.makeTempDir({ prefix: "relaxvm-first-run-" });
  try {
    const child = new Deno.Command(Deno.execPath(), {
      args,
      cwd: ROOT,
      env: {
        DENO_DIR: denoDir,
        NPM_CONFIG_REGISTRY: "http://127.0.0.1:9/", // the discard port: nothing answers
        NO_PROXY: "127.0.0.1",
        DENO_NO_UPDATE_CHECK: "1",
        NO_COLOR: "1",
      },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(120_000),
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(stdin));
    await writer.close();
    const { code, stdout, stderr } = await child.output();
    // Deno may create an empty `npm` folder; a package would put something in it.
    const npmCache: string[] = [];
    try {
      for await (const entry of Deno.readDir(`${denoDir}/npm`)) npmCache.push(entry.name);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    return {
      code,
      out: new TextDecoder().decode(stdout),
      err: new TextDecoder().decode(stderr),
      npmCache,
    };
  } finally {
    await Deno.remove(denoDir, { recursive: true });
  }
}

function assertFetchedNothing(run: Awaited<ReturnType<typeof firstRun>>, what: string): void {
  assertEquals(run.code, 0, `${what} failed:\n${run.out}\n${run.err}`);
  assert(!/Download|npm/i.test(run.err), `${what} touched npm:\n${run.err}`);
  assertEquals(run.npmCache, [], `${what} filled the npm cache`);
}

Deno.test("first run: deno.json names no npm package and turns off the automatic lock file", async () => {
  const config = JSON.parse(await Deno.readTextFile(new URL("deno.json", ROOT)));
  const npmImports = Object.entries(config.imports ?? {}).filter(([, to]) =>
    String(to).startsWith("npm:")
  );
  assertEquals(npmImports, [], "deno task would install these before every task");
  assertEquals(config.lock, false, "deno task would install every package of deno.lock");
});

Deno.test("first run: control: an npm import fails with this empty cache and closed registry", async () => {
  const run = await firstRun([
    "eval",
    "--no-lock",
    'import "npm:deno-std@1.4.0/assert/mod.js";',
  ]);
  assert(run.code !== 0, "the npm import succeeded, so the other tests here prove nothing");
  assertStringIncludes(run.err, "deno-std");
});

Deno.test("first run: deno task demo fetches nothing and runs with npm unreachable", async () => {
  const run = await firstRun(["task", "demo"]);
  assertFetchedNothing(run, "deno task demo");
  assertStringIncludes(run.out, "Caught VMError"); // the tour's last section ran
});

Deno.test("first run: deno task cli fetches nothing and runs with npm unreachable", async () => {
  const run = await firstRun(["task", "cli", "funcs", "vm.op.add"]);
  assertFetchedNothing(run, "deno task cli");
  assertStringIncludes(run.out, "vm.op.add");
});

Deno.test("first run: deno task repl fetches nothing and runs with npm unreachable", async () => {
  const run = await firstRun(
    ["task", "repl"],
    'String(tensor([[1, 2], [3, 4]]).shape) + "|ok"\nclose()\n',
  );
  assertFetchedNothing(run, "deno task repl");
  assertStringIncludes(run.out, "2,2|ok");
  assert(!run.out.includes("Uncaught"), run.out);
});

Deno.test("first run: deno task bundle and web install only what the browser build imports", async () => {
  // The repository's deno.lock pins every peer of the tests and benchmarks (onnxruntime-node
  // alone is 288 MB): run with it, the browser build downloaded 574 MB from an empty cache.
  const config = JSON.parse(await Deno.readTextFile(new URL("deno.json", ROOT)));
  for (const task of ["bundle", "web"]) {
    const command: string = config.tasks[task];
    const lock = / --lock=(\S+) --frozen /.exec(command);

    assertEquals(lock?.[1], "web/tools.deno.lock", command);
  }
  const lock = JSON.parse(await Deno.readTextFile(new URL("web/tools.deno.lock", ROOT)));
  // What web/bundle.ts and web/serve.ts import from npm, and nothing else.
  const imported = new Set<string>();
  for (const file of ["web/bundle.ts", "web/serve.ts"]) {
    const source = await Deno.readTextFile(new URL(file, ROOT));
    for (const m of source.matchAll(/from "(npm:[^"/]+(?:\/[^"/@]+)?@[\d.]+)/g)) imported.add(m[1]);
  }
  assertEquals(Object.keys(lock.specifiers).sort(), [...imported].sort());
  assertEquals(Object.keys(lock.specifiers), ["npm:esbuild@0.28.2"]);
});
