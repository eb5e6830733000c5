/**
 * Runs every built case of a suite (the folder `build_suite.py` wrote) on
 * WebGPU and writes one {@link CaseResult} per case as JSON:
 *
 *     deno run --allow-read --allow-write --allow-env tests/tvm_ops/run_cases.ts SUITE_DIR OUT.json
 *
 * A child process of `tvm_ops_test.ts` and of `deno task tvm:ops`, for the
 * reason `tests/webgpu/in_child_process.ts` gives (WebGPU through EGL on a
 * `deno test` thread can abort the process at exit).
 *
 * @module
 */

import { loadTVMPackage, type NDArray, tensor, TVMPackageError } from "../../mod.ts";
import { webgpu } from "../../devices/webgpu/webgpu_device.ts";
import type { ReferenceCase } from "../_tvm_packages.ts";
import { type CaseResult, type SuiteIndex, type SuiteRun, toleranceOf } from "./outcomes.ts";
import { unsignedI32Remainder } from "./adapter_probe.ts";

/** What the child prints, with exit code 3, when there is no WebGPU adapter. */
export const NO_ADAPTER = "no WebGPU adapter: ";

function bytesOf(base64: string): Uint8Array {
  return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
}

/** The values of a reference tensor (bool as 0/1, int64 as bigints). */
export function referenceValues(
  t: { dtype: string; base64: string },
): ArrayLike<number | bigint> {
  const buffer = bytesOf(t.base64).buffer;
  switch (t.dtype) {
    case "float32":
      return new Float32Array(buffer);
    case "float16":
      return new Float16Array(buffer);
    case "int32":
      return new Int32Array(buffer);
    case "int64":
      return new BigInt64Array(buffer);
    case "bool":
    case "uint8":
      return new Uint8Array(buffer);
    default:
      throw new TypeError(`reference tensor of dtype ${t.dtype}`);
  }
}

function inputOf(t: ReferenceCase["inputs"][number]): NDArray {
  const values = referenceValues(t) as ArrayBufferView & ArrayLike<number>;
  return tensor(values, { shape: t.shape, dtype: t.dtype as "float32" });
}

/** max|got - want| / max|want|, or `Infinity` for a NaN where `want` has none. */
function relative(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let diff = 0, scale = 0;
  for (let i = 0; i < want.length; i++) {
    const g = Number(got[i]), w = Number(want[i]);
    if (Number.isNaN(w) && Number.isNaN(g)) continue;
    if (Number.isNaN(g) || Number.isNaN(w)) return Infinity;
    if (g === w) { // infinities too
      scale = Math.max(scale, Math.abs(w));
      continue;
    }
    diff = Math.max(diff, Math.abs(g - w));
    scale = Math.max(scale, Math.abs(w));
  }
  return diff === 0 ? 0 : diff / Math.max(scale, Number.MIN_VALUE);
}

/** How many elements differ (for exact comparisons), with the first. */
function exactDifferences(
  got: ArrayLike<number | bigint>,
  want: ArrayLike<number | bigint>,
): { count: number; first: string } {
  let count = 0, first = "";
  for (let i = 0; i < want.length; i++) {
    if (BigInt(got[i]) !== BigInt(want[i])) {
      if (count++ === 0) first = `[${i}] got ${got[i]}, want ${want[i]}`;
    }
  }
  return { count, first };
}

/** Runs the case in folder `dir`; the reference's inputs and outputs decide. */
async function runCase(
  id: string,
  dir: URL,
  device: Awaited<ReturnType<typeof webgpu>>,
): Promise<CaseResult> {
  const start = performance.now();
  const done = (r: Omit<CaseResult, "id" | "ms">): CaseResult => ({
    id,
    ...r,
    ms: Math.round(performance.now() - start),
  });
  let pkg;
  try {
    pkg = await loadTVMPackage(dir, { device });
  } catch (e) {
    if (e instanceof TVMPackageError) {
      return done({ outcome: "refused-at-load", message: e.message });
    }
    return done({ outcome: "run-error", message: `load threw a non-TVMPackageError: ${e}` });
  }
  try {
    const reference = JSON.parse(await Deno.readTextFile(new URL("reference.json", dir))) as {
      cases: ReferenceCase[];
    };
    const vm = pkg.createVM();
    let worst = 0;
    for (const c of reference.cases) {
      const inputs = c.inputs.map(inputOf);
      const sizes = c.inputs.map((i) => `[${i.shape}]`).join(", ");
      try {
        let out: NDArray;
        try {
          out = await vm.invokeTensor(c.function, ...inputs, ...pkg.params(c.function));
        } catch (e) {
          return done({ outcome: "run-error", message: `forward(${sizes}): ${e}` });
        }
        using _out = out;
        if (out.shape.join() !== c.output.shape.join() || out.dtype !== c.output.dtype) {
          return done({
            outcome: "mismatch",
            worst: Infinity,
            message:
              `forward(${sizes}) returned ${out.dtype}[${out.shape}], TVM ${c.output.dtype}` +
              `[${c.output.shape}]`,
          });
        }
        const got = await out.data() as ArrayLike<number | bigint>;
        const want = referenceValues(c.output);
        const tolerance = toleranceOf(c.output.dtype);
        if (tolerance === 0) {
          const { count, first } = exactDifferences(got, want);
          if (count > 0) {
            return done({
              outcome: "mismatch",
              worst: Infinity,
              message: `forward(${sizes}): ${count} of ${want.length} elements differ, ${first}`,
            });
          }
        } else {
          const rel = relative(got as ArrayLike<number>, want as ArrayLike<number>);
          worst = Math.max(worst, rel);
          if (!(rel <= tolerance)) {
            return done({
              outcome: "mismatch",
              worst: rel,
              message:
                `forward(${sizes}): max|Δ|/max|want| ${rel.toExponential(2)} > ${tolerance}` +
                ` (first values ${[...Array.from(got).slice(0, 4)]} vs ${[
                  ...Array.from(want).slice(0, 4),
                ]})`,
            });
          }
        }
      } finally {
        for (const t of inputs) t.dispose();
      }
    }
    return done({ outcome: "pass", worst });
  } finally {
    pkg.dispose();
  }
}

/** Runs every case of the suite in `suiteDir`. */
export async function runCases(suiteDir: URL): Promise<SuiteRun> {
  const index = JSON.parse(
    await Deno.readTextFile(new URL("index.json", suiteDir)),
  ) as SuiteIndex;
  const device = await webgpu();
  const results: CaseResult[] = [];
  const unsigned = await unsignedI32Remainder(device);
  for (const entry of index.cases) {
    if (entry.status !== "built") {
      results.push({ id: entry.id, outcome: entry.status, message: entry.message });
      continue;
    }
    results.push(await runCase(entry.id, new URL(`${entry.dir}/`, suiteDir), device));
    if (results.length % 100 === 0) {
      console.error(`${results.length}/${index.cases.length} cases`);
    }
  }
  const info = device.adapter.info;
  const adapter = [info.vendor, info.architecture, info.device, info.description]
    .filter((s) => s !== "").join(" ");
  return { adapter, unsignedI32Remainder: unsigned, results };
}

if (import.meta.main) {
  const [dir, out] = Deno.args;
  if (dir === undefined || out === undefined) {
    console.error("usage: run_cases.ts SUITE_DIR OUT.json");
    Deno.exit(2);
  }
  const base = new URL(dir.endsWith("/") ? dir : `${dir}/`, `file://${Deno.cwd()}/`);
  try {
    await webgpu();
  } catch (e) {
    console.log(`${NO_ADAPTER}${e}`);
    Deno.exit(3);
  }
  await Deno.writeTextFile(out, JSON.stringify(await runCases(base)) + "\n");
  // The adapter's threads may outlive the work; leave now (in_child_process.ts says why).
  Deno.exit(0);
}
