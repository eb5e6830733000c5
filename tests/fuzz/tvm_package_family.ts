/**
 * Fuzz family "tvm_package": manifests that are almost TVM WebGPU packages
 * (tvm/package_format.ts). Each case takes a real manifest (the committed
 * MLP, encoder, cumsum and sort packages, and the hand-written `add`
 * package) and either
 * damages its text (cuts it short, flips bytes) or changes one field deep
 * in it: deletes it, gives it a hostile value (wrong type, edge number,
 * huge or deep value) or a hostile name (`__proto__`, `constructor`,
 * `vm.builtin.alloc_storage`, `../` paths, control characters).
 *
 * `parseTVMPackageManifest` must reject the case with a `TVMPackageError`
 * or accept it; an accepted manifest's host functions are then run on
 * CPU tensors shaped as the original's parameters, with a launcher that
 * records the launches, and must finish or fail with an error naming the
 * host function. Any other exception, or a slow case, is a bug.
 *
 * (Kernels that fail to compile and launch metadata that disagrees with
 * the WGSL need a device: tests/webgpu/tvm_package_suite.ts.)
 *
 * @module
 */

import { NDArray, parseTVMPackageManifest, tensor, TVMPackageError } from "../../mod.ts";
import { hostFunction, type KernelLaunch, type KernelLauncher } from "../../tvm/host_plan.ts";
import type { HostParam } from "../../tvm/package_format.ts";
import { elementwisePackage } from "../_tvm_packages.ts";
import type { Random } from "./random.ts";
import { emptyReport, type FamilyReport, recordBug } from "./report.ts";

const HANG_MS = 2000;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const HOSTILE_VALUES: Json[] = [
  null,
  true,
  -1,
  0,
  1.5,
  2 ** 53,
  -(2 ** 31) - 1,
  1e308,
  "",
  "x",
  "__proto__",
  "vm.builtin.alloc_storage",
  "../../etc/passwd",
  "https://example.com/x",
  "a\u0000b",
  "handle",
  "int64",
  "blockIdx.z",
  "paramWriteAccess:[1",
  [],
  {},
  { var: "nope" },
  { data: 0 },
  { op: "floordiv", args: [1, 0] },
  { op: "cast", dtype: "int32", args: [2 ** 40] },
  { op: "__proto__", args: [] },
  { load: 99, index: 0 },
  { float: 1e39 },
];

const HOSTILE_NAMES = [
  "__proto__",
  "constructor",
  "toString",
  "vm.builtin.alloc_storage",
  "",
  "a\nb",
  "x".repeat(300),
  "launch",
  "let",
];

/** Every path to a value in `v`. */
function paths(v: Json, at: (string | number)[] = [], out: (string | number)[][] = []) {
  out.push(at);
  if (Array.isArray(v)) v.forEach((x, i) => paths(x, [...at, i], out));
  else if (v !== null && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) paths(x, [...at, k], out);
  }
  return out;
}

/** A value nested `depth` deep, to test the depth limits. */
function deep(depth: number): Json {
  let v: Json = 1;
  for (let i = 0; i < depth; i++) v = { op: "add", args: [v, 1] };
  return v;
}

/** One changed copy of `manifest`. */
function mutateJson(rand: Random, manifest: Json): Json {
  const copy = structuredClone(manifest) as Json;
  const all = paths(copy).filter((p) => p.length > 0);
  const path = rand.pick(all);
  let parent = copy as Record<string | number, Json>;
  for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, Json>;
  const key = path[path.length - 1];
  switch (rand.int(5)) {
    case 0: // delete
      if (Array.isArray(parent)) parent.splice(key as number, 1);
      else delete parent[key];
      break;
    case 1: // a hostile value
      parent[key] = structuredClone(rand.pick(HOSTILE_VALUES));
      break;
    case 2: // a hostile name for an object key
      if (!Array.isArray(parent)) {
        const v = parent[key];
        delete parent[key];
        Object.defineProperty(parent, rand.pick(HOSTILE_NAMES), {
          value: v,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      } else parent[key] = rand.pick(HOSTILE_NAMES);
      break;
    case 3: // deep or long values
      parent[key] = rand.chance(0.5)
        ? deep(rand.pick([10, 70, 200, 5000]))
        : new Array(rand.pick([3, 1000])).fill(rand.pick(HOSTILE_VALUES));
      break;
    default: { // an integer nudged
      const v = parent[key];
      parent[key] = typeof v === "number" ? v + rand.pick([-1, 1, 1000, -1000]) : v;
    }
  }
  return copy;
}

/** One damaged copy of `text`. */
function mutateText(rand: Random, text: string): string {
  if (rand.chance(0.5)) return text.slice(0, rand.int(text.length));
  const chars = [...text];
  for (let k = rand.between(1, 4); k > 0; k--) {
    chars[rand.int(chars.length)] = String.fromCharCode(rand.int(128));
  }
  return chars.join("");
}

/** Arguments for a host function with `params`: tensors of small random extents. */
function argumentsFor(rand: Random, params: readonly HostParam[]): unknown[] {
  const env = new Map<string, number>();
  return params.map((p) => {
    if (p.kind === "scalar") return rand.between(0, 8);
    const shape = (p.shape ?? []).map((d) => {
      if (typeof d === "number") return rand.chance(0.9) ? d : d + 1;
      if (typeof d === "object" && "var" in d) {
        if (!env.has(d.var)) env.set(d.var, rand.between(0, 5));
        return env.get(d.var)!;
      }
      return rand.between(1, 4);
    });
    const size = shape.reduce((a, b) => a * b, 1);
    if (size > 4096) return tensor([0]);
    const dtype = p.dtype === "int64" || p.dtype === "int32" || p.dtype === "uint32"
      ? p.dtype
      : "float32";
    return NDArray.empty(shape, dtype);
  });
}

/** Runs `cases` package-manifest cases from `rand`'s sequence. */
export async function tvmPackageFamily(rand: Random, cases: number): Promise<FamilyReport> {
  const report = emptyReport("tvm_package");
  const texts = [
    await Deno.readTextFile(new URL("../../testdata/tvm_webgpu/mlp/package.json", import.meta.url)),
    await Deno.readTextFile(
      new URL("../../testdata/tvm_webgpu/encoder/package.json", import.meta.url),
    ),
    JSON.stringify(elementwisePackage("+").manifest),
    // Issue 28's plan steps: loops, scratch tensors, shifts (cumsum), element offsets (sort).
    await Deno.readTextFile(
      new URL("../../testdata/tvm_webgpu/cumsum/package.json", import.meta.url),
    ),
    await Deno.readTextFile(
      new URL("../../testdata/tvm_webgpu/sort/package.json", import.meta.url),
    ),
  ];
  const manifests = texts.map((t) => JSON.parse(t) as Json);
  const originals = texts.map((t) => parseTVMPackageManifest(t, "original"));
  for (let i = 0; i < cases; i++) {
    const which = rand.int(texts.length);
    const text = rand.chance(0.2)
      ? mutateText(rand, texts[which])
      : JSON.stringify(mutateJson(rand, manifests[which]));
    report.tried++;
    const t0 = performance.now();
    try {
      const manifest = parseTVMPackageManifest(text, "package.json");
      report.loaded++;
      for (const [name, fn] of manifest.host_functions) {
        const original = originals[which].host_functions.get(name) ?? fn;
        const args = argumentsFor(rand, original.params);
        const launches: KernelLaunch[] = [];
        try {
          const launch: KernelLauncher = (l) => void launches.push(l);
          launch.alloc = (shape, dtype) => {
            if (shape.reduce((a, b) => a * b, 1) > 1 << 16) {
              throw new Error("beyond the fuzz's 2^16");
            }
            return NDArray.empty(shape, dtype as "float32");
          };
          hostFunction(name, fn, launch)(...args);
          for (const l of launches) {
            if (!l.grid.every((g) => Number.isFinite(g))) {
              recordBug(report, "wrong", `case ${i}: ${name} launched over ${l.grid}`);
            }
          }
        } catch (e) {
          if (!(e instanceof Error && e.message.startsWith(`${name}: `))) {
            recordBug(report, "otherExceptions", `case ${i} (${name}): ${String(e).slice(0, 200)}`);
          }
        } finally {
          for (const a of args) if (a instanceof NDArray) a.dispose();
        }
      }
    } catch (e) {
      if (e instanceof TVMPackageError) report.rejected++;
      else recordBug(report, "otherExceptions", `case ${i}: ${String(e).slice(0, 200)}`);
    }
    if (performance.now() - t0 > HANG_MS) recordBug(report, "hangs", `case ${i}`);
  }
  return report;
}
