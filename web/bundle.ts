/**
 * The browser build: `deno task bundle` writes `dist/relaxvm.js`, an ES
 * module bundle of the whole library (`mod.ts`), and `dist/playground.js`,
 * the playground page's script, which imports the library from
 * `./relaxvm.js` so that the page runs the very bundle users get.
 *
 * Bundled with esbuild (`npm:esbuild`) for `platform: "browser"`. The
 * library has only relative imports, so no resolver plugin is needed; the
 * one plugin here keeps the playground from bundling a second copy of the
 * library (a second copy would have its own packed-function registry).
 * The playground's editor, CodeMirror, comes from npm: web/browser.deno.json
 * names it (pinned by web/browser.deno.lock) with `nodeModulesDir: "auto"`,
 * so `deno install` lays it out in web/node_modules, where esbuild's own
 * resolution finds it.
 *
 * Usage: `deno task bundle [--outdir <dir>]` (default `dist/`). The output is
 * not minified: readable in a browser's debugger (docs/guide.md gives its size);
 * minify it with your own bundler if you embed it.
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import * as esbuild from "npm:esbuild@0.28.2";

/** The repository root. */
const ROOT = new URL("../", import.meta.url);

/** The library's entry point, as esbuild sees it (a path). */
const LIBRARY_ENTRY = new URL("mod.ts", ROOT).pathname;

/** The playground page's entry point. */
const PLAYGROUND_ENTRY = new URL("web/playground/main.ts", ROOT).pathname;

/** The built files, by name in `dist/`. */
export interface Bundles {
  /** The library: every export of `mod.ts`. */
  "relaxvm.js": string;
  /** The playground page; imports `./relaxvm.js`. */
  "playground.js": string;
}

/** The browsers the bundle is for: anything with WebGPU (and ES2022). */
const TARGET = "es2022";

/**
 * Resolves the playground's import of `mod.ts` to the library bundle
 * beside it, and refuses any other import of library code: the page must
 * see the library only through its public entry point, once.
 */
const libraryAsSibling: esbuild.Plugin = {
  name: "relaxvm-library-as-sibling",
  setup(build) {
    build.onResolve({ filter: /^\.\.?\// }, (args) => {
      if (!args.importer.startsWith(new URL("web/", ROOT).pathname)) return undefined;
      const target = new URL(args.path, `file://${args.importer}`).pathname;
      if (target === LIBRARY_ENTRY) return { path: "./relaxvm.js", external: true };
      if (!target.startsWith(new URL("web/", ROOT).pathname)) {
        return {
          errors: [{
            text: `The playground imports ${args.path}: import the library from mod.ts only`,
          }],
        };
      }
      return undefined;
    });
  },
};

/** esbuild's options shared by both files. */
function common(): esbuild.BuildOptions {
  return {
    bundle: true,
    format: "esm",
    platform: "browser",
    target: TARGET,
    write: false,
    logLevel: "silent",
    absWorkingDir: ROOT.pathname,
  };
}

/** Turns esbuild's messages into one Error. */
function failure(what: string, messages: esbuild.Message[]): Error {
  const lines = messages.map((m) =>
    m.location ? `${m.location.file}:${m.location.line}: ${m.text}` : m.text
  );
  return new Error(`Cannot bundle ${what}:\n${lines.join("\n")}`);
}

/**
 * Builds one entry point into a single ES module; throws on any error or
 * warning, and when the module would import anything but `allowedImports`
 * (the library must be self-contained: no `npm:`, `jsr:` or Deno-only module
 * left for the browser to fetch).
 */
async function buildOne(
  what: string,
  entry: string,
  plugins: esbuild.Plugin[],
  allowedImports: readonly string[],
): Promise<string> {
  type Result = esbuild.BuildResult<{ write: false; metafile: true }>;
  let result: Result;
  try {
    result = await esbuild.build({
      ...common(),
      entryPoints: [entry],
      plugins,
      metafile: true,
    }) as Result;
  } catch (e) {
    const errors = (e as { errors?: esbuild.Message[] }).errors;
    throw errors ? failure(what, errors) : e;
  }
  if (result.warnings.length > 0) throw failure(what, result.warnings);
  for (const output of Object.values(result.metafile.outputs)) {
    const extra = output.imports.map((i) => i.path).filter((p) => !allowedImports.includes(p));
    if (extra.length > 0) {
      throw new Error(`Cannot bundle ${what}: it would import ${extra.join(", ")}`);
    }
  }
  const [file] = result.outputFiles;
  return `// ${what}: built by \`deno task bundle\` (web/bundle.ts); do not edit.\n${file.text}`;
}

/**
 * Puts the playground's npm packages (CodeMirror) into web/node_modules, exactly the versions
 * of web/browser.deno.lock (`--frozen`: a lock out of date is an error, not an update).
 */
async function installEditorPackages(): Promise<void> {
  const { code, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["install", "--frozen", "--config", "web/browser.deno.json"],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdout: "null",
    stderr: "piped",
  }).output();
  if (code !== 0) {
    throw new Error(
      `Cannot install the playground's editor packages (deno install --config web/browser.deno.json):\n${
        new TextDecoder().decode(stderr)
      }`,
    );
  }
}

/**
 * Builds both files in memory. Stops esbuild's service process afterwards,
 * so a script that calls this can exit.
 */
export async function buildBundles(): Promise<Bundles> {
  await installEditorPackages();
  try {
    const [library, playground] = await Promise.all([
      buildOne("relaxvm.js, the relaxvm library for browsers", LIBRARY_ENTRY, [], []),
      buildOne("playground.js, the relaxvm playground", PLAYGROUND_ENTRY, [
        libraryAsSibling,
      ], ["./relaxvm.js"]),
    ]);
    return { "relaxvm.js": library, "playground.js": playground };
  } finally {
    await esbuild.stop();
  }
}

if (import.meta.main) {
  const args = [...Deno.args];
  const at = args.indexOf("--outdir");
  const outdir = new URL(at >= 0 ? `${args[at + 1]}/` : "dist/", `file://${Deno.cwd()}/`);
  const t0 = performance.now();
  try {
    const bundles = await buildBundles();
    await Deno.mkdir(outdir, { recursive: true });
    for (const [name, text] of Object.entries(bundles)) {
      const file = new URL(name, outdir);
      await Deno.writeTextFile(file, text);
      console.log(`${file.pathname}  ${(text.length / 1024).toFixed(0)} KiB`);
    }
  } catch (e) {
    console.error(`bundle: ${e instanceof Error ? e.message : e}`);
    Deno.exit(1);
  }
  console.log(`bundled in ${(performance.now() - t0).toFixed(0)} ms`);
}
