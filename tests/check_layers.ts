/**
 * The layer rules of relaxvm, checked on the real import graph (`deno info`).
 *
 * ```text
 * cli                                   the command line tool
 * server                                the HTTP server (OpenAI's API) over the engine
 * models, models.ts                     models written with the DSL (an entry point of their own)
 * mod.ts, runtime.ts, testing.ts        entry points: install builtins, export the API
 * onnx                                  ONNX models in: protobuf reader, importer (emits with the builder)
 * tvm   engine                          TVM-compiled packages: WGSL kernels, host plans;
 *                                       serving many requests at once (continuous batching)
 * builtins ──▶ kernels                  vm.* packed functions; per-device op kernels
 * builder   vm                          the DSL; the virtual machine
 * program                               bytecode, decoder, executable, verifier, formats
 * devices                               CPU and WebGPU devices, memory, tensors
 * ground                                registry, errors, the object protocol, values
 * ```
 *
 * A module may import from its own layer and the layers its entry lists
 * below, never upward, and the module graph has no cycles. Only the program
 * layer reads instruction words (`instrData`, `instrOffset`): everything else
 * goes through its decoder. Only `cli/` and `server/` touch `Deno.*`: the rest of the
 * library runs in browsers (`deno task check:browser` type-checks it there).
 *
 * Inside a layer, a room is a folder whose modules only the files it names (and the
 * entry points) may import from outside it: the paged KV cache (`builtins/kv_state/`)
 * is reached through its builtins and `installBuiltins()`, so nothing grows to depend
 * on its internals by accident. A few modules are pure: they import only what their
 * entry in `PURE_MODULES` lists (the paged cache's page table imports nothing, so its
 * bookkeeping is the same wherever its pages live).
 *
 * Every `.ts` file under a library folder is checked, whether or not an entry
 * point reaches it: an orphan file that imports upward is still a broken rule
 * (it is one import away from being reachable).
 *
 * Run by `deno task check`; `tests/layers_test.ts` plants each kind of
 * violation in a copy of the library and checks that this finds it.
 *
 * @module
 */

/** Which layers each layer may import from (besides itself). */
export const ALLOWED_IMPORTS: Readonly<Record<string, readonly string[]>> = {
  ground: [],
  devices: ["ground"],
  program: ["ground", "devices"],
  builder: ["ground", "devices", "program"],
  vm: ["ground", "devices", "program"],
  kernels: ["ground", "devices"],
  builtins: ["ground", "devices", "kernels"],
  tvm: ["ground", "devices", "program", "vm", "kernels", "builtins"],
  engine: ["ground", "devices", "program", "vm", "kernels", "builtins"],
  onnx: ["ground", "devices", "program", "builder", "builtins"],
  entry: [
    "ground",
    "devices",
    "program",
    "builder",
    "vm",
    "kernels",
    "builtins",
    "tvm",
    "engine",
    "onnx",
  ],
  cli: [
    "ground",
    "devices",
    "program",
    "builder",
    "vm",
    "kernels",
    "builtins",
    "tvm",
    "engine",
    "onnx",
    "entry",
    "server",
  ],
  // The models use the public API only: what an application writing its own model may use.
  models: ["entry"],
  // The HTTP server: the public API and the models, as an application would; the CLI starts it.
  server: ["entry", "models"],
};

/**
 * Rooms: folder → the files outside it that may import its modules (entry points
 * always may).
 */
export const ROOMS: Readonly<Record<string, readonly string[]>> = {
  "builtins/kv_state/": ["builtins/install.ts"],
  // The engine is reached through the entry points alone (runtime.ts exports its API).
  "engine/": [],
};

/**
 * Seams: a module through which a lower layer reaches code above it at run time → the only
 * files outside its layer that may import it. The devices layer asks the CPU kernels for what
 * it needs of them through one typed host object (devices/cpu_kernel_host.ts), which the
 * kernels' installer alone installs; with the rule below (the devices layer exports no
 * `set*` or `on*` function for a callback), that import is the whole dependency.
 */
export const SEAMS: Readonly<Record<string, readonly string[]>> = {
  "devices/cpu_kernel_host.ts": ["kernels/install.ts"],
};

/**
 * Layers that export no slot for a callback from above (`export function setXxx(…)`,
 * `onXxx(…)`): what they need of upper layers goes through a seam (`SEAMS`).
 */
const NO_CALLBACK_SLOTS = new Set(["devices"]);

/** Pure modules: file → the only library files it may import. */
export const PURE_MODULES: Readonly<Record<string, readonly string[]>> = {
  "builtins/kv_state/page_table.ts": [],
};

/** The library's entry points (files at the root that belong to the `entry` layer). */
const ENTRY_POINTS = ["mod.ts", "runtime.ts", "testing.ts"];

/** Layers whose files may use `Deno.*` (the command line tool and the HTTP server). */
const DENO_ALLOWED = new Set(["cli", "server"]);

/** The layer of a repository-relative path, or undefined outside the library. */
export function layerOf(path: string): string | undefined {
  if (path === "mod.ts" || path === "runtime.ts" || path === "testing.ts") return "entry";
  if (path === "models.ts") return "models";
  const top = path.split("/")[0];
  return top in ALLOWED_IMPORTS ? top : undefined;
}

interface ModuleInfo {
  specifier: string;
  dependencies?: { code?: { specifier: string }; type?: { specifier: string } }[];
}

/**
 * Every `.ts` file (not `.d.ts`) under folder `dir` of `root` (`dir` ends
 * with `/`), recursively, as repository-relative paths; none when `dir` is
 * missing. Links are not followed. tools/test_only_exports.ts walks with it too.
 */
export async function tsFilesUnder(root: URL, dir: string): Promise<string[]> {
  const files: string[] = [];
  const walk = async (dir: string) => {
    for await (const entry of Deno.readDir(new URL(dir, root))) {
      const path = `${dir}${entry.name}`;
      if (entry.isDirectory) await walk(`${path}/`);
      else if (entry.isFile && path.endsWith(".ts") && !path.endsWith(".d.ts")) files.push(path);
    }
  };
  try {
    await walk(dir);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return files;
}

/** Every library file: the entry points and each `.ts` file under a layer's folder. */
export async function libraryFiles(root: URL): Promise<string[]> {
  const files: string[] = [];
  for (const layer of Object.keys(ALLOWED_IMPORTS)) {
    if (layer !== "entry") files.push(...await tsFilesUnder(root, `${layer}/`));
  }
  for (const entry of [...ENTRY_POINTS, "models.ts"]) files.push(entry);
  return files.sort();
}

/**
 * The library's module graph: file path → the repository files it imports.
 * One `deno info` over a generated module that imports every library file,
 * so files no entry point reaches are in the graph too.
 */
async function importGraph(root: URL, files: string[]): Promise<Map<string, string[]>> {
  const graph = new Map<string, string[]>();
  const relative = (specifier: string) =>
    specifier.startsWith(root.href) ? decodeURIComponent(specifier.slice(root.href.length)) : null;
  const dir = await Deno.makeTempDir({ prefix: "relaxvm-layers-" });
  try {
    const all = `${dir}/all.ts`;
    await Deno.writeTextFile(
      all,
      files.map((f) => `import ${JSON.stringify(new URL(f, root).href)};\n`).join(""),
    );
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", "--config", new URL("deno.json", root).pathname, all],
      cwd: root,
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (code !== 0) {
      throw new Error(`deno info failed: ${new TextDecoder().decode(stderr)}`);
    }
    const info = JSON.parse(new TextDecoder().decode(stdout)) as { modules: ModuleInfo[] };
    for (const module of info.modules) {
      const from = relative(module.specifier);
      if (from === null || !from.endsWith(".ts")) continue;
      const targets = new Set<string>();
      for (const dep of module.dependencies ?? []) {
        for (const resolved of [dep.code?.specifier, dep.type?.specifier]) {
          const to = resolved === undefined ? null : relative(resolved);
          if (to !== null && to.endsWith(".ts")) targets.add(to);
        }
      }
      graph.set(from, [...targets].sort());
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  for (const file of files) {
    if (!graph.has(file)) throw new Error(`deno info did not report ${file}`);
  }
  return graph;
}

/** Source text with comments and string literals blanked, for the `Deno.*` rule. */
function codeOnly(source: string): string {
  return source.replace(
    /\/\*[\s\S]*?\*\/|\/\/[^\n]*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`/g,
    (m) => m.replace(/[^\n]/g, " "),
  );
}

/** Cycles in `graph`, each as the list of files on it (Tarjan's strongly connected components). */
function cycles(graph: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>(), low = new Map<string, number>();
  const stack: string[] = [], onStack = new Set<string>(), found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** Every broken rule, as readable lines; empty when the layering holds. */
export async function layerViolations(root: URL): Promise<string[]> {
  const files = await libraryFiles(root);
  const graph = await importGraph(root, files);
  const problems: string[] = [];
  for (const [from, targets] of graph) {
    const layer = layerOf(from);
    if (layer === undefined) continue;
    const source = await Deno.readTextFile(new URL(from, root));
    for (const to of targets) {
      const target = layerOf(to);
      const room = Object.keys(ROOMS).find((r) => to.startsWith(r));
      if (
        room !== undefined && !from.startsWith(room) && layer !== "entry" &&
        !ROOMS[room].includes(from)
      ) {
        problems.push(
          `${from} imports ${to}, inside the room ${room}: only ${ROOMS[room].join(", ")} may`,
        );
      }
      const seam = SEAMS[to];
      if (seam !== undefined && target !== layer && !seam.includes(from)) {
        problems.push(`${from} imports ${to}, a seam: only ${seam.join(", ")} may install it`);
      }
      const pure = PURE_MODULES[from];
      if (pure !== undefined && !pure.includes(to)) {
        problems.push(`${from} is pure and imports ${to}: it may import only [${pure.join(", ")}]`);
      }
      if (target === undefined) {
        problems.push(`${from} imports ${to}, which is outside the library`);
      } else if (target !== layer && !ALLOWED_IMPORTS[layer].includes(target)) {
        problems.push(`${from} (${layer}) imports ${to} (${target}): not allowed`);
      }
    }
    if (!DENO_ALLOWED.has(layer) && /\bDeno\s*\.\s*[A-Za-z_$]/.test(codeOnly(source))) {
      problems.push(
        `${from} uses Deno.*; only cli/ and server/ may (the library runs in browsers)`,
      );
    }
    if (NO_CALLBACK_SLOTS.has(layer)) {
      for (const m of codeOnly(source).matchAll(/\bexport\s+function\s+((?:set|on)[A-Z]\w*)/g)) {
        problems.push(
          `${from} exports ${
            m[1]
          }, a slot for a callback from above; declare what the ${layer} layer needs in a seam (SEAMS) instead`,
        );
      }
    }
    if (layer !== "program") {
      if (/\binstr(Data|Offset)\b/.test(source)) {
        problems.push(`${from} reads instruction words; use the program layer's decoder`);
      }
    }
  }
  for (const cycle of cycles(graph)) problems.push(`import cycle: ${cycle.join(" → ")}`);
  return problems;
}

if (import.meta.main) {
  const problems = await layerViolations(new URL("../", import.meta.url));
  if (problems.length > 0) {
    console.error(`Layer rules broken (${problems.length}):\n${problems.join("\n")}`);
    Deno.exit(1);
  }
  console.log(
    "Layers: no upward import, no cycle, one decoder, one devices–kernels seam, Deno.* only in cli/ and server/",
  );
}
