/**
 * The launch budget of a TVM package: how many workgroups one dispatch of
 * its kernels may ask for. WebGPU itself accepts up to 65535³, and on a
 * software adapter (Mesa llvmpipe) a dispatch runs on the CPU inside the
 * read that waits for it, blocking the event loop, and so every other
 * tenant of the process, for as long as it takes. The host sets the budget
 * (`loadTVMPackage`'s `maxWorkgroupsPerDispatch`, or per VM through
 * `TVMPackage.createVM`); a grid is checked against it where it is known:
 * at load for a launch whose extents are constants, and where the host plan
 * computes it from the call's shapes (tvm/webgpu_kernels.ts), before
 * anything is dispatched.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../ground/brand.ts";
import type { PlanExpr, PlanStmt, TVMPackageManifest } from "./package_manifest.ts";
import { launchTags, TVMPackageError } from "./package_format.ts";

/**
 * The default `maxWorkgroupsPerDispatch`: 2^19 workgroups. On the software
 * adapter the cheapest kernel (64 threads a workgroup, one bounds check
 * each) takes about 100 ms at this size; the largest grid of the packages
 * relaxvm ships is 196,608 (MiniLM's softmax at batch 32 × 512 tokens, its
 * longest sequence). The README gives the measurements and commands.
 */
export const DEFAULT_MAX_WORKGROUPS_PER_DISPATCH = 2 ** 19;

const LAUNCH_BUDGET_ERROR_BRAND = brandKey("LaunchBudgetError");

/**
 * A kernel launch whose grid is larger than the launch budget allows: the
 * `cause` of the `VMError` a call fails with (the dispatch is refused
 * before anything is recorded, and the VM stays usable).
 *
 * @example
 * ```ts
 * import { LaunchBudgetError } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const e = new LaunchBudgetError("add", [1 << 24, 64], 1 << 24, 1 << 19);
 * assertEquals(e.workgroups, 16777216);
 * console.log(e.message); // kernel add: a grid of [16777216, 64] is 16777216 workgroups, ...
 * ```
 */
export class LaunchBudgetError extends Error {
  static {
    brand(this, LAUNCH_BUDGET_ERROR_BRAND);
  }

  /**
   * True for a `LaunchBudgetError` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is LaunchBudgetError {
    return typeof v === "object" && v !== null &&
      (v as Branded)[LAUNCH_BUDGET_ERROR_BRAND] === true;
  }

  /** The kernel. */
  readonly kernel: string;
  /** Its launch extents, in the kernel's tag order (blockIdx and threadIdx). */
  readonly grid: readonly number[];
  /** The workgroups the grid asks for: the product of its blockIdx extents. */
  readonly workgroups: number;
  /** The budget it passed (`maxWorkgroupsPerDispatch`). */
  readonly budget: number;

  /** Builds the error; the message names the kernel, the grid and the budget. */
  constructor(kernel: string, grid: readonly number[], workgroups: number, budget: number) {
    super(
      `kernel ${kernel}: a grid of [${grid.join(", ")}] is ${workgroups} workgroups, ` +
        `more than the ${budget} one dispatch may have (maxWorkgroupsPerDispatch)`,
    );
    this.name = "LaunchBudgetError";
    this.kernel = kernel;
    this.grid = [...grid];
    this.workgroups = workgroups;
    this.budget = budget;
  }
}

/**
 * `value` as a launch budget: the default when it is undefined, Infinity for
 * none (a host that trusts its packages); throws RangeError otherwise.
 */
export function launchBudget(value: unknown): number {
  if (value === undefined) return DEFAULT_MAX_WORKGROUPS_PER_DISPATCH;
  if (
    typeof value !== "number" ||
    !((Number.isSafeInteger(value) && value >= 1) || value === Infinity)
  ) {
    throw new RangeError(
      `maxWorkgroupsPerDispatch must be a positive integer or Infinity, got ${String(value)}`,
    );
  }
  return value;
}

/** The workgroups of a launch: the product of the extents that `dims` maps to blockIdx (0-2). */
export function workgroupsOf(grid: readonly number[], dims: readonly number[]): number {
  let n = 1;
  grid.forEach((g, i) => {
    if (dims[i] < 3) n *= g;
  });
  return n;
}

/**
 * Refuses, at load, every launch of the manifest whose grid is constant and
 * over `budget`: a `TVMPackageError` naming the host function, the
 * statement and the kernel. Grids that depend on shapes are checked when a
 * call computes them.
 */
export function checkStaticGrids(manifest: TVMPackageManifest, budget: number, file: string): void {
  for (const [name, fn] of manifest.host_functions) {
    const walk = (body: readonly PlanStmt[], at: string): void =>
      body.forEach((s, i) => {
        const sAt = `${at}[${i}]`;
        if ("if" in s) {
          walk(s.then, `${sAt}.then`);
          walk(s.else, `${sAt}.else`);
        } else if ("launch" in s) {
          const grid = s.grid.map(constant);
          if (grid.some((g) => g === undefined)) return;
          const { dims } = launchTags(manifest.kernels.get(s.launch)!);
          const workgroups = workgroupsOf(grid as number[], dims);
          if (workgroups > budget) {
            throw new TVMPackageError(
              file,
              `${sAt}.grid`,
              new LaunchBudgetError(s.launch, grid as number[], workgroups, budget).message,
            );
          }
        }
      });
    walk(fn.body, `host_functions[${JSON.stringify(name)}].body`);
  }
}

/** The value of an expression made of integer literals and arithmetic, or undefined. */
function constant(e: PlanExpr): number | undefined {
  if (typeof e === "number") return e;
  if (!("op" in e)) return undefined;
  const args = e.args.map(constant);
  if (args.some((a) => a === undefined)) return undefined;
  const [x, y] = args as number[];
  switch (e.op) {
    case "add":
      return x + y;
    case "mul":
      return x * y;
    case "floordiv":
      return y === 0 ? undefined : Math.floor(x / y);
    case "min":
      return Math.min(x, y);
    case "max":
      return Math.max(x, y);
    default: // anything else is left to the call, which evaluates it exactly
      return undefined;
  }
}
