/**
 * The browser build (web/bundle.ts): `dist/relaxvm.js` is the whole public
 * API as one ES module that needs nothing from Deno, and the playground
 * imports the library only from it. That both load and run in Chromium is
 * tests/browser_test.ts's part.
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";
import { buildBundles, type Bundles } from "../web/bundle.ts";

let built: Promise<Bundles> | null = null;
/** Builds once for every test here. */
function bundles(): Promise<Bundles> {
  return built ??= buildBundles();
}

/** The names an esbuild ES module exports (its closing `export { a, b as c };`). */
function exportedNames(js: string): string[] {
  const block = /export\s*\{([^}]*)\};\s*$/.exec(js);
  if (block === null) throw new Error("no export list at the end of the bundle");
  return block[1].split(",").map((s) => s.trim()).filter((s) => s !== "")
    .map((s) => s.split(/\s+as\s+/).at(-1)!);
}

Deno.test("relaxvm.js exports exactly what mod.ts exports", async () => {
  const mod = await import("../mod.ts");
  const { "relaxvm.js": js } = await bundles();
  assertEquals(exportedNames(js).sort(), Object.keys(mod).sort());
});

Deno.test("relaxvm.js uses Deno nowhere but behind a globalThis.Deno check", async () => {
  const { "relaxvm.js": js } = await bundles();
  // `Deno.` as code: not after a dot, a quote or a backtick (strings, comments in
  // template text), nor as part of a longer name.
  const bare = [...js.matchAll(/(?<![\w$."'`])Deno\s*\./g)].map((m) =>
    js.slice(Math.max(0, m.index - 60), m.index + 40)
  );
  assertEquals(bare, []);
});

Deno.test("playground.js imports the library only from ./relaxvm.js", async () => {
  const { "playground.js": js } = await bundles();
  const sources = new Set([...js.matchAll(/^import\s[^;]*?\sfrom\s*"([^"]+)"/gm)].map((m) => m[1]));
  assertEquals([...sources], ["./relaxvm.js"]);
  assert(!js.includes("class ExecBuilder"), "playground.js contains a copy of the library");
});

Deno.test("deno task bundle writes both files into the output folder", async () => {
  const outdir = await Deno.makeTempDir();
  try {
    // As the task runs it: with the browser build's own lock, frozen, so an import it lacks fails.
    const { code, stderr } = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--lock=web/tools.deno.lock",
        "--frozen",
        "--allow-read",
        "--allow-write",
        "--allow-env",
        "--allow-run",
        "web/bundle.ts",
        "--outdir",
        outdir,
      ],
      cwd: new URL("../", import.meta.url),
      stdout: "null",
      stderr: "piped",
    }).output();
    assertEquals(code, 0, new TextDecoder().decode(stderr));
    const expected = await bundles();
    for (const name of ["relaxvm.js", "playground.js"] as const) {
      assertEquals(await Deno.readTextFile(`${outdir}/${name}`), expected[name], name);
    }
  } finally {
    await Deno.remove(outdir, { recursive: true });
  }
});
