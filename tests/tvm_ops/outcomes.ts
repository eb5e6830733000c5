/**
 * What the operator suite and the random-module differential record per
 * case: the built suite's index (written by `tools/tvm/op_suite/build_suite.py`)
 * and the outcome of running each package on WebGPU (`run_cases.ts`).
 *
 * @module
 */

/** One case of a built suite's `index.json`. */
export interface IndexEntry {
  /** `family/op/class/dtype` (random modules: `random/m<n>/class/dtype`). */
  id: string;
  family: string;
  op: string;
  /** The shape class: static, symbolic, odd, one, large. */
  class: string;
  /** The case's dtype, or `src->dst` for casts and comparisons. */
  dtype: string;
  /** The package's folder, relative to the suite's. */
  dir: string;
  /** What the build made of it. */
  status: "built" | "export-refused" | "tvm-error";
  /** Why it was not built. */
  message?: string;
  /** A random module's chain, in words. */
  description?: string;
  /** Seconds the export took (both builds and the reference). */
  seconds: number;
}

/** A built suite's `index.json`. */
export interface SuiteIndex {
  suite: "ops" | "random";
  seed: number;
  tvm: string;
  /** Seconds the whole build took. */
  seconds: number;
  cases: IndexEntry[];
}

/**
 * What became of a case:
 * - `pass`: every reference input's output within tolerance of TVM's llvm build;
 * - `refused-at-load`: `loadTVMPackage` threw a `TVMPackageError`;
 * - `export-refused`, `tvm-error`: no package (see {@link IndexEntry.status});
 * - `mismatch`: ran to completion with a wrong answer (shape or values);
 * - `run-error`: loaded, then a call threw.
 */
export type Outcome =
  | "pass"
  | "refused-at-load"
  | "export-refused"
  | "tvm-error"
  | "mismatch"
  | "run-error";

/** One case's result. */
export interface CaseResult {
  id: string;
  outcome: Outcome;
  /** The worst max|Δ|/max|want| over its reference inputs (0 for exact matches). */
  worst?: number;
  /** The error or the mismatch, in words. */
  message?: string;
  /** Milliseconds to load and run it. */
  ms?: number;
}

/** A suite's run: each case's result, and what the adapter probe found. */
export interface SuiteRun {
  /** The adapter's description (`GPUAdapter.info`): "llvmpipe (LLVM 15.0.6, 256 bits)" on CI. */
  adapter: string;
  /** `adapter_probe.ts`: WGSL's i32 `%` computed as an unsigned remainder. */
  unsignedI32Remainder: boolean;
  results: CaseResult[];
}

/** The tolerance of an output dtype: relative for floats, 0 (exact) for the rest. */
export function toleranceOf(dtype: string): number {
  if (dtype === "float32") return 1e-5;
  if (dtype === "float16") return 1e-2;
  return 0;
}
