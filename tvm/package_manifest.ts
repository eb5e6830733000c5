/**
 * What a TVM WebGPU package manifest holds (the format is described in
 * tvm/package_format.ts, which parses it): its format constants and bounds,
 * its types, `TVMPackageError`, and `Reader`, the field reader that names
 * the file and the field in every error. The host-plan checks live in
 * tvm/plan_checker.ts.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../ground/brand.ts";
import { cut, MAX_NAME_CHARS, MAX_REASON_CHARS } from "../ground/printable.ts";
import { pathOutside } from "../ground/contained_path.ts";

/** The `format` of a package manifest. */
export const TVM_PACKAGE_FORMAT = "relaxvm-tvm-webgpu";
/** The manifest versions this relaxvm reads. */
export const TVM_PACKAGE_VERSIONS: readonly number[] = [1];

/** Operators of the host expression language, with their operand counts. */
export const PLAN_OPS: Readonly<Record<string, number>> = {
  add: 2,
  sub: 2,
  mul: 2,
  floordiv: 2,
  floormod: 2,
  truncdiv: 2,
  truncmod: 2,
  min: 2,
  max: 2,
  eq: 2,
  ne: 2,
  lt: 2,
  le: 2,
  gt: 2,
  ge: 2,
  and: 2,
  or: 2,
  not: 1,
  select: 3,
  cast: 1,
  shl: 2,
  shr: 2,
};

/** The dtypes a host cast may produce. */
export const CAST_DTYPES = new Set(["int32", "int64", "uint32", "float32", "bool"]);
/** Kernel scalar arguments the launcher packs (int64 is narrowed to int32 by TVM's WGSL codegen). */
export const POD_TYPES = new Set(["int32", "uint32", "float32"]);
/** Tensor dtypes host functions may take. */
export const TENSOR_DTYPES = new Set(["float32", "int32", "uint32", "int64"]);
/** Scalar parameter dtypes. */
export const SCALAR_DTYPES = new Set(["int32", "int64", "uint32", "float32"]);

/** Bounds that keep a hostile manifest from costing much. */
export const LIMITS = {
  depth: 64,
  nodesPerFunction: 100_000,
  wgslBytes: 4 * 2 ** 20,
  nameLength: 256,
  messageLength: 4096,
  /** Iterations of `for` statements one host call may run (TVM's scans loop a few times). */
  loopIterations: 1_000_000,
};

/** A host expression. */
export type PlanExpr =
  | number
  | { readonly float: number }
  | { readonly var: string }
  | { readonly data: number }
  | { readonly load: number; readonly index: PlanExpr }
  | { readonly op: string; readonly args: readonly PlanExpr[]; readonly dtype?: string };

/** A host statement. */
export type PlanStmt =
  | { readonly let: string; readonly value: PlanExpr }
  | { readonly store: number; readonly index: PlanExpr; readonly value: PlanExpr }
  | { readonly assert: PlanExpr; readonly message: string }
  | {
    readonly if: PlanExpr;
    readonly then: readonly PlanStmt[];
    readonly else: readonly PlanStmt[];
  }
  | {
    readonly launch: string;
    readonly args: readonly PlanExpr[];
    readonly grid: readonly PlanExpr[];
    readonly grid_tags: readonly string[];
  }
  /** The host function's value (TVM computes an attention scale so). */
  | { readonly return: PlanExpr }
  /** `body` with variable `for` = 0, 1, ..., extent - 1. */
  | { readonly for: string; readonly extent: PlanExpr; readonly body: readonly PlanStmt[] }
  /** A scratch tensor on the kernels' device, `{ data: alloc }` from here on, freed after the call. */
  | { readonly alloc: number; readonly dtype: string; readonly shape: readonly PlanExpr[] };

/** A host function's parameter. */
export interface HostParam {
  /** Its name in TVM (for messages). */
  readonly name: string;
  /** A tensor or a scalar. */
  readonly kind: "tensor" | "scalar";
  /** Its dtype. */
  readonly dtype: string;
  /** A tensor's shape; absent for scalars. */
  readonly shape?: readonly PlanExpr[];
  /**
   * Where a tensor starts in its buffer, in elements (TVM's symbolic
   * `elem_offset`: the buffer is bound whole and the kernel takes the
   * offset); absent: at element 0. A bare variable binds, as in `shape`.
   */
  readonly elem_offset?: PlanExpr;
}

/** A host function: the launch plan behind one packed function the executable calls. */
export interface HostFunction {
  /** Its parameters, in call order. */
  readonly params: readonly HostParam[];
  /** What it does. */
  readonly body: readonly PlanStmt[];
}

/** One WGSL kernel with TVM's launch metadata (`inspect_source("func_info")`). */
export interface KernelInfo {
  /** The WGSL source; its entry point is the kernel's name. */
  readonly wgsl: string;
  /** `"handle"` (a storage buffer) or a scalar type, per argument. */
  readonly arg_types: readonly string[];
  /** `blockIdx.*`, `threadIdx.*` and `paramWriteAccess:[…]`. */
  readonly launch_param_tags: readonly string[];
}

/** What a VM function of the package takes. */
export interface PackageFunction {
  /** How many inputs the caller passes. */
  readonly inputs: number;
  /** The tensor cache records passed after the inputs, in order. */
  readonly params: readonly string[];
  /**
   * How: `"plain"`, one argument each; `"packed"`, one tuple of them all
   * (`relax.frontend.nn`'s `param_mode="packed"`, MLC LLM's layout).
   */
  readonly param_mode: "plain" | "packed";
}

/** A validated package manifest (`package.json`). */
export interface TVMPackageManifest {
  /** Always {@link TVM_PACKAGE_FORMAT}. */
  readonly format: string;
  /** One of {@link TVM_PACKAGE_VERSIONS}. */
  readonly version: number;
  /** The TVM that compiled it. */
  readonly tvm_version: string;
  /** The executable's path. */
  readonly executable: string;
  /** The tensor cache index's path, or null. */
  readonly params: string | null;
  /** The VM functions a user calls. */
  readonly functions: ReadonlyMap<string, PackageFunction>;
  /** The kernels. */
  readonly kernels: ReadonlyMap<string, KernelInfo>;
  /** The host functions. */
  readonly host_functions: ReadonlyMap<string, HostFunction>;
}

const TVM_PACKAGE_ERROR_BRAND = brandKey("TVMPackageError");

/**
 * A TVM package that cannot be loaded: malformed JSON, a missing or bad
 * field, a kernel that does not compile or whose launch metadata disagrees
 * with its plan, a function the executable calls that the package lacks.
 * Names the file and the field at fault.
 *
 * @example
 * ```ts
 * import { parseTVMPackageManifest, TVMPackageError } from "@relaxvm/relaxvm";
 * import { assertThrows } from "@std/assert";
 *
 * assertThrows(() => parseTVMPackageManifest("{", "package.json"), TVMPackageError, "malformed JSON");
 * ```
 */
export class TVMPackageError extends Error {
  static {
    brand(this, TVM_PACKAGE_ERROR_BRAND);
  }

  /**
   * True for a `TVMPackageError` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is TVMPackageError {
    return typeof v === "object" && v !== null && (v as Branded)[TVM_PACKAGE_ERROR_BRAND] === true;
  }

  /** The file at fault. */
  readonly file: string;
  /** The field at fault, as a path (`kernels.add.arg_types[2]`), or `""`. */
  readonly field: string;

  /** Builds the error; the message names file and field. */
  constructor(file: string, field: string, reason: string, options?: ErrorOptions) {
    // A path through a deep expression would drown the reason: keep its two ends.
    if (field.length > 200) field = `${field.slice(0, 120)}…${field.slice(-60)}`;
    // A file's name and what a reason quotes come from the package: bounded, as the field is.
    super(
      `Cannot load TVM package: ${cut(file, MAX_NAME_CHARS)}${field === "" ? "" : `, ${field}`}: ${
        cut(reason, MAX_REASON_CHARS)
      }`,
      options,
    );
    this.name = "TVMPackageError";
    this.file = file;
    this.field = field;
  }
}

export type Json = Record<string, unknown>;

export const isObject = (v: unknown): v is Json =>
  typeof v === "object" && v !== null && !Array.isArray(v);
export const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
export const show = (v: unknown) => {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
};

/** A relative path inside the package: no scheme, no `..`, no absolute or backslashed path. */
export const PACKAGE_PATH = /^[A-Za-z0-9_][A-Za-z0-9_.-]*(\/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$/;

/** Reads manifest fields, failing with a `TVMPackageError` that names the file and the field. */
export class Reader {
  constructor(readonly file: string) {}

  fail(field: string, reason: string): never {
    throw new TVMPackageError(this.file, field, reason);
  }

  object(v: unknown, field: string): Json {
    if (!isObject(v)) this.fail(field, `must be an object, got ${show(v)}`);
    return v;
  }

  array(v: unknown, field: string): unknown[] {
    if (!Array.isArray(v)) this.fail(field, `must be an array, got ${show(v)}`);
    return v;
  }

  string(v: unknown, field: string, maxLength = LIMITS.nameLength): string {
    if (typeof v !== "string") this.fail(field, `must be a string, got ${show(v)}`);
    if (v.length > maxLength) this.fail(field, `is ${v.length} characters, at most ${maxLength}`);
    return v;
  }

  count(v: unknown, field: string): number {
    if (!isCount(v)) this.fail(field, `must be a non-negative integer, got ${show(v)}`);
    return v;
  }

  /** A name: printable, not empty, bounded (names end up in messages and maps). */
  name(v: unknown, field: string): string {
    const s = this.string(v, field);
    // deno-lint-ignore no-control-regex
    if (s === "" || /[\u0000-\u001f\u007f]/.test(s)) {
      this.fail(field, `must be a non-empty name without control characters, got ${show(s)}`);
    }
    return s;
  }

  /**
   * A path to a file of the package: it passes the one rule of
   * ground/contained_path.ts (what every loader checks) and uses only the
   * characters of `PACKAGE_PATH`.
   */
  path(v: unknown, field: string): string {
    const s = this.string(v, field);
    const outside = pathOutside(s);
    if (outside !== null) {
      this.fail(field, `must be a relative path inside the package, got ${show(s)}: it ${outside}`);
    }
    if (!PACKAGE_PATH.test(s)) {
      this.fail(field, `must be a relative path inside the package, got ${show(s)}`);
    }
    return s;
  }

  /** The own entries of an object, in order, as a Map (so `__proto__` is just a name). */
  entries(v: unknown, field: string): [string, unknown][] {
    return Object.entries(this.object(v, field));
  }
}
