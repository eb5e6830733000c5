/**
 * Builds a suite with the pinned TVM (one Python process, `build_suite.py`)
 * into `.tvm_ops/` (git-ignored), keyed by a hash of the generator's
 * sources, the exporter's and the arguments, so a run rebuilds only when one
 * of them changed; then runs it on WebGPU in a child process (`run_cases.ts`).
 *
 * @module
 */

import { tvmPython } from "../tvm/tvm_python.ts";
import type { SuiteIndex, SuiteRun } from "./outcomes.ts";

const ROOT = new URL("../../", import.meta.url);
const CACHE = new URL(".tvm_ops/", ROOT);
/** The exporter's sources: every suite's packages depend on them. */
const EXPORTER = [
  "tools/tvm/export_webgpu.py",
  "tools/tvm/tir_fixups.py",
  "tools/tvm/wgsl_literals.py",
  "tools/tvm/wgsl_scan.py",
];
/** What a suite's packages depend on: the random modules' generator only for theirs. */
const SOURCES = {
  ops: ["tools/tvm/op_suite/build_suite.py", "tools/tvm/op_suite/cases.py"],
  random: [
    "tools/tvm/op_suite/build_suite.py",
    "tools/tvm/op_suite/cases.py",
    "tools/tvm/op_suite/random_modules.py",
  ],
};

/** Which suite: the operator families, or `count` random modules from `seed`. */
export type SuiteSpec = { suite: "ops" } | { suite: "random"; count: number; seed: number };

function args(spec: SuiteSpec): string[] {
  return spec.suite === "ops" ? ["ops"] : ["random", `${spec.count}`, `${spec.seed}`];
}

async function keyOf(spec: SuiteSpec): Promise<string> {
  const parts: Uint8Array[] = [new TextEncoder().encode(args(spec).join(" ") + tvmPython())];
  for (const file of [...SOURCES[spec.suite], ...EXPORTER]) {
    parts.push(await Deno.readFile(new URL(file, ROOT)));
  }
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length + 1, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length + 1;
  }
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", all));
  return [...hash.slice(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The folder name of a suite's build under `.tvm_ops/`: what it is, and the sources' hash. */
export async function suiteName(spec: SuiteSpec): Promise<string> {
  return `${args(spec).join("-")}-${await keyOf(spec)}`;
}

/** A built suite: its folder and index, and whether this call built it. */
export interface BuiltSuite {
  dir: URL;
  index: SuiteIndex;
  built: boolean;
}

/**
 * The suite's folder under `.tvm_ops/`, built first when missing (into a
 * temporary folder renamed at the end, so an interrupted build leaves no
 * half suite). Older builds of the same suite are removed.
 */
export async function buildSuite(spec: SuiteSpec): Promise<BuiltSuite> {
  const name = await suiteName(spec);
  const dir = new URL(`${name}/`, CACHE);
  const indexFile = new URL("index.json", dir);
  let built = false;
  try {
    await Deno.stat(indexFile);
  } catch {
    await Deno.mkdir(CACHE, { recursive: true });
    const tmp = await Deno.makeTempDir({ dir: CACHE.pathname, prefix: `${name}.partial-` });
    const { code, stderr } = await new Deno.Command(tvmPython(), {
      args: [new URL("tools/tvm/op_suite/build_suite.py", ROOT).pathname, tmp, ...args(spec)],
      stdout: "null",
      stderr: "piped",
    }).output();
    if (code !== 0) {
      await Deno.remove(tmp, { recursive: true });
      const text = new TextDecoder().decode(stderr);
      throw new Error(
        `build_suite.py ${args(spec).join(" ")} failed (${code}): ${text.slice(-3000)}`,
      );
    }
    await Deno.rename(tmp, dir.pathname);
    built = true;
    const prefix = `${args(spec)[0]}-`;
    for await (const e of Deno.readDir(CACHE)) {
      const same = spec.suite === "ops" ? e.name.startsWith(prefix) : e.name.startsWith(
        `${args(spec).join("-")}-`,
      );
      // A partial folder is another process's build under way, or one that was killed: gone
      // once untouched for an hour (a build under way adds a case folder every second or so).
      const stale = e.name.includes(".partial-") &&
        Date.now() - ((await Deno.stat(new URL(e.name, CACHE))).mtime?.getTime() ?? 0) > 36e5;
      if (same && e.name !== name && (stale || !e.name.includes(".partial-"))) {
        await Deno.remove(new URL(e.name, CACHE), { recursive: true });
      }
    }
  }
  const index = JSON.parse(await Deno.readTextFile(indexFile)) as SuiteIndex;
  return { dir, index, built };
}

/**
 * Runs a built suite on WebGPU in a child `deno run` (see `run_cases.ts`);
 * a string (the reason) when the child found no WebGPU adapter.
 */
export async function runSuite(dir: URL): Promise<SuiteRun | string> {
  const out = await Deno.makeTempFile({ prefix: "relaxvm-tvm-ops-", suffix: ".json" });
  try {
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-read",
        "--allow-write",
        "--allow-env",
        new URL("tests/tvm_ops/run_cases.ts", ROOT).href,
        dir.pathname,
        out,
      ],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
    if (code === 3) return text.trim();
    if (code !== 0) {
      throw new Error(`run_cases.ts failed (${code}): ${text.slice(-3000)}`);
    }
    return JSON.parse(await Deno.readTextFile(out)) as SuiteRun;
  } finally {
    await Deno.remove(out);
  }
}
