/**
 * The TVM WebGPU package format (`"relaxvm-tvm-webgpu"`, version 1) and its
 * validation. `tools/tvm/export_webgpu.py` writes it from
 * `relax.build(mod, Target("webgpu", host="llvm"))`; `loadTVMPackage`
 * (tvm/load_package.ts) reads it. A package is a directory:
 *
 * ```text
 * package.json                the manifest below
 * executable.tvm              the Relax VM executable, in TVM's own format
 * params/ndarray-cache.json   the weights, as tvmjs's tensor cache (+ shards)
 * ```
 *
 * The manifest:
 *
 * ```text
 * format          "relaxvm-tvm-webgpu"
 * version         1
 * tvm_version     the TVM that compiled it (informative)
 * executable      path of the executable, relative to package.json
 * params          path of the tensor cache index, or null (no weights)
 * functions       { VM function: { inputs: count, params: [cache record names] } }
 *                 a call passes its inputs, then those tensors, in that order
 * kernels         { kernel: { wgsl, arg_types, launch_param_tags } }
 *                 TVM's WGSL (entry point = the kernel's name) and its
 *                 func_info, as tvmjs's launcher reads them
 * host_functions  { packed function: { params, body } }  the launch plans
 * ```
 *
 * Host functions are what TVM compiles with LLVM and relaxvm evaluates:
 * `params` lists `{ name, kind: "tensor", dtype, shape: [expr] }` or
 * `{ name, kind: "scalar", dtype }`; a shape entry that is a bare variable
 * not yet bound binds it, every other entry is checked against the
 * argument. `body` is a list of statements:
 *
 * ```text
 * { let: name, value: expr }
 * { store: param, index: expr, value: expr }     param: an int64/int32 CPU tensor
 * { assert: expr, message }
 * { if: expr, then: [stmt], else: [stmt] }
 * { launch: kernel, args: [expr], grid: [expr], grid_tags: [tag] }
 * ```
 *
 * and an expression is an integer, `{ float: x }`, `{ var: name }`,
 * `{ data: param }` (a tensor's buffer, only as a launch argument),
 * `{ load: param, index: expr }` or `{ op, args: [expr], dtype? }` with `op`
 * one of {@link PLAN_OPS}.
 *
 * Every field is checked here, before anything touches a device: a
 * malformed or hostile package fails with a `TVMPackageError` naming the
 * file and the field.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../ground/brand.ts";

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
};

/** The dtypes a host cast may produce. */
const CAST_DTYPES = new Set(["int32", "int64", "uint32", "float32", "bool"]);
/** Kernel scalar arguments the launcher packs (int64 is narrowed to int32 by TVM's WGSL codegen). */
const POD_TYPES = new Set(["int32", "uint32", "float32"]);
/** Tensor dtypes host functions may take. */
const TENSOR_DTYPES = new Set(["float32", "int32", "uint32", "int64"]);
/** Scalar parameter dtypes. */
const SCALAR_DTYPES = new Set(["int32", "int64", "uint32", "float32"]);

/** Bounds that keep a hostile manifest from costing much. */
const LIMITS = {
  depth: 64,
  nodesPerFunction: 100_000,
  wgslBytes: 4 * 2 ** 20,
  nameLength: 256,
  messageLength: 4096,
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
  };

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
    super(
      `Cannot load TVM package: ${file}${field === "" ? "" : `, ${field}`}: ${reason}`,
      options,
    );
    this.name = "TVMPackageError";
    this.file = file;
    this.field = field;
  }
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const show = (v: unknown) => {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
};

/** A WGSL identifier that is also a plain name: what kernel names must be. */
const WGSL_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** A relative path inside the package: no scheme, no `..`, no absolute or backslashed path. */
const PACKAGE_PATH = /^[A-Za-z0-9_][A-Za-z0-9_.-]*(\/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$/;

class Reader {
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

  path(v: unknown, field: string): string {
    const s = this.string(v, field);
    if (!PACKAGE_PATH.test(s) || s.split("/").some((seg) => seg === ".." || seg === ".")) {
      this.fail(field, `must be a relative path inside the package, got ${show(s)}`);
    }
    return s;
  }

  /** The own entries of an object, in order, as a Map (so `__proto__` is just a name). */
  entries(v: unknown, field: string): [string, unknown][] {
    return Object.entries(this.object(v, field));
  }
}

/**
 * Parses and validates a manifest (`package.json`'s text). `file` names it
 * in errors. Checks every field, every host expression (operators, operand
 * counts, variables bound before use, parameter references), and every
 * launch against its kernel's metadata (argument count and kinds, grid
 * tags). Throws `TVMPackageError`.
 *
 * @example
 * ```ts
 * import { parseTVMPackageManifest } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const manifest = parseTVMPackageManifest(JSON.stringify({
 *   format: "relaxvm-tvm-webgpu", version: 1, tvm_version: "0.27.0", executable: "executable.tvm",
 *   params: null, functions: {}, kernels: {}, host_functions: {},
 * }), "package.json");
 * assertEquals(manifest.executable, "executable.tvm");
 * ```
 */
export function parseTVMPackageManifest(text: string, file: string): TVMPackageManifest {
  const r = new Reader(file);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new TVMPackageError(file, "", `malformed JSON (${(e as Error).message})`, { cause: e });
  }
  const top = r.object(json, "the manifest");
  if (top.format !== TVM_PACKAGE_FORMAT) {
    r.fail("format", `must be ${show(TVM_PACKAGE_FORMAT)}, got ${show(top.format)}`);
  }
  if (!TVM_PACKAGE_VERSIONS.includes(top.version as number)) {
    r.fail(
      "version",
      `${show(top.version)} is not supported: this relaxvm reads version ${
        TVM_PACKAGE_VERSIONS.join(", ")
      }`,
    );
  }
  const tvmVersion = r.string(top.tvm_version, "tvm_version");
  const executable = r.path(top.executable, "executable");
  const params = top.params === null ? null : r.path(top.params, "params");

  const functions = new Map<string, PackageFunction>();
  for (const [name, v] of r.entries(top.functions, "functions")) {
    const field = `functions[${show(name)}]`;
    r.name(name, field);
    const f = r.object(v, field);
    const inputs = r.count(f.inputs, `${field}.inputs`);
    const names = r.array(f.params, `${field}.params`).map((p, i) =>
      r.name(p, `${field}.params[${i}]`)
    );
    functions.set(name, { inputs, params: names });
  }

  const kernels = new Map<string, KernelInfo>();
  for (const [name, v] of r.entries(top.kernels, "kernels")) {
    const field = `kernels[${show(name)}]`;
    if (!WGSL_IDENTIFIER.test(name) || name.length > LIMITS.nameLength) {
      r.fail(field, "a kernel's name must be a WGSL identifier (its entry point)");
    }
    kernels.set(name, readKernel(r, v, field));
  }

  const hostFunctions = new Map<string, HostFunction>();
  for (const [name, v] of r.entries(top.host_functions, "host_functions")) {
    const field = `host_functions[${show(name)}]`;
    r.name(name, field);
    // The builtins are the VM's own: a package may not replace them for its VM.
    if (name.startsWith("vm.")) r.fail(field, "a package may not define vm.* functions");
    hostFunctions.set(name, new PlanChecker(r, field, kernels).hostFunction(v));
  }
  return {
    format: TVM_PACKAGE_FORMAT,
    version: top.version as number,
    tvm_version: tvmVersion,
    executable,
    params,
    functions,
    kernels,
    host_functions: hostFunctions,
  };
}

/** A kernel's launch tags, decoded. */
export interface LaunchTags {
  /** The grid dimension each launch extent sets: 0-2 blockIdx.x-z, 3-5 threadIdx.x-z. */
  readonly dims: readonly number[];
  /** Per buffer argument, whether the kernel writes it. */
  readonly writes: readonly boolean[];
}

/** Decodes `launch_param_tags` as tvmjs's launcher does (web/src/webgpu.ts). */
export function launchTags(kernel: KernelInfo): LaunchTags {
  const dims: number[] = [];
  let writes: boolean[] = [];
  for (const tag of kernel.launch_param_tags) {
    const m = /^(blockIdx|threadIdx)\.([xyz])$/.exec(tag);
    if (m !== null) {
      dims.push("xyz".indexOf(m[2]) + (m[1] === "threadIdx" ? 3 : 0));
    } else writes = (JSON.parse(tag.slice("paramWriteAccess:".length)) as number[]).map(Boolean);
  }
  return { dims, writes };
}

function readKernel(r: Reader, v: unknown, field: string): KernelInfo {
  const k = r.object(v, field);
  const wgsl = r.string(k.wgsl, `${field}.wgsl`, LIMITS.wgslBytes);
  const argTypes = r.array(k.arg_types, `${field}.arg_types`).map((t, i) => {
    const s = r.string(t, `${field}.arg_types[${i}]`);
    if (s !== "handle" && !POD_TYPES.has(s)) {
      r.fail(
        `${field}.arg_types[${i}]`,
        `${show(s)} is not supported: a kernel argument is "handle" or one of ${
          [...POD_TYPES].join(", ")
        }`,
      );
    }
    return s;
  });
  const handles = argTypes.filter((t) => t === "handle").length;
  const tags = r.array(k.launch_param_tags, `${field}.launch_param_tags`).map((t, i) =>
    r.string(t, `${field}.launch_param_tags[${i}]`)
  );
  const seen = new Set<string>();
  let writes: unknown = undefined;
  tags.forEach((tag, i) => {
    const at = `${field}.launch_param_tags[${i}]`;
    if (/^(blockIdx|threadIdx)\.[xyz]$/.test(tag)) {
      if (tag === "blockIdx.z") {
        r.fail(at, "blockIdx.z is not supported: the launcher folds large x grids into z (tvmjs)");
      }
      if (seen.has(tag)) r.fail(at, `${tag} appears twice`);
      seen.add(tag);
    } else if (tag.startsWith("paramWriteAccess:")) {
      if (writes !== undefined) r.fail(at, "paramWriteAccess appears twice");
      try {
        writes = JSON.parse(tag.slice("paramWriteAccess:".length));
      } catch {
        r.fail(at, `paramWriteAccess must hold a JSON array, got ${show(tag)}`);
      }
      if (
        !Array.isArray(writes) || writes.length !== handles ||
        !writes.every((w) => w === 0 || w === 1)
      ) {
        r.fail(at, `paramWriteAccess must list 0 or 1 for each of the ${handles} buffers`);
      }
    } else r.fail(at, `unknown launch tag ${show(tag)}`);
  });
  if (writes === undefined && handles > 0) {
    r.fail(`${field}.launch_param_tags`, "paramWriteAccess is missing");
  }
  return { wgsl, arg_types: argTypes, launch_param_tags: tags };
}

/** Checks one host function's plan, statically: operators, arity, scopes, references. */
class PlanChecker {
  #nodes = 0;
  #params: HostParam[] = [];

  constructor(
    readonly r: Reader,
    readonly field: string,
    readonly kernels: ReadonlyMap<string, KernelInfo>,
  ) {}

  hostFunction(v: unknown): HostFunction {
    const r: Reader = this.r;
    const f = r.object(v, this.field);
    const scope = new Set<string>();
    const params = r.array(f.params, `${this.field}.params`);
    // As TVM's argument binder: scalar parameters and bare symbolic dimensions bind first, so
    // `batch * seq` may come before the parameter that binds `batch`.
    for (const p of params) {
      if (isObject(p) && p.kind === "scalar" && typeof p.name === "string") scope.add(p.name);
      if (!isObject(p) || !Array.isArray(p.shape)) continue;
      for (const d of p.shape) {
        if (isObject(d) && typeof d.var === "string" && Object.keys(d).length === 1) {
          scope.add(d.var);
        }
      }
    }
    params.forEach((p, i) => {
      const at = `${this.field}.params[${i}]`;
      const o = r.object(p, at);
      const name = r.name(o.name, `${at}.name`);
      const dtype = r.string(o.dtype, `${at}.dtype`);
      if (o.kind === "tensor") {
        if (!TENSOR_DTYPES.has(dtype)) {
          r.fail(`${at}.dtype`, `tensor dtype ${show(dtype)} is not supported`);
        }
        const shape = r.array(o.shape, `${at}.shape`).map((d, j) => {
          const dimAt = `${at}.shape[${j}]`;
          // A bare variable binds on first sight; anything else must be computable now.
          if (isObject(d) && typeof d.var === "string" && Object.keys(d).length === 1) {
            scope.add(r.name(d.var, dimAt));
            return { var: d.var };
          }
          return this.expr(d, dimAt, scope, 0);
        });
        this.#params.push({ name, kind: "tensor", dtype, shape });
      } else if (o.kind === "scalar") {
        if (!SCALAR_DTYPES.has(dtype)) {
          r.fail(`${at}.dtype`, `scalar dtype ${show(dtype)} is not supported`);
        }
        scope.add(name);
        this.#params.push({ name, kind: "scalar", dtype });
      } else r.fail(`${at}.kind`, `must be "tensor" or "scalar", got ${show(o.kind)}`);
    });
    const body = this.stmts(f.body, `${this.field}.body`, scope, 0);
    return { params: this.#params, body };
  }

  #count(at: string, depth: number): void {
    if (++this.#nodes > LIMITS.nodesPerFunction) {
      this.r.fail(at, `the plan has more than ${LIMITS.nodesPerFunction} nodes`);
    }
    if (depth > LIMITS.depth) this.r.fail(at, `nested deeper than ${LIMITS.depth}`);
  }

  #param(v: unknown, at: string, want: "buffer" | "heap"): number {
    const i = this.r.count(v, at);
    const p = this.#params[i];
    if (p === undefined || p.kind !== "tensor") {
      this.r.fail(at, `${i} is not a tensor parameter of this function`);
    }
    if (want === "heap" && p.dtype !== "int64" && p.dtype !== "int32") {
      this.r.fail(at, `parameter ${i} (${p.name}) is ${p.dtype}: host code reads only int tensors`);
    }
    return i;
  }

  stmts(v: unknown, at: string, scope: Set<string>, depth: number): PlanStmt[] {
    const r: Reader = this.r;
    return r.array(v, at).map((s, i) => {
      const sAt = `${at}[${i}]`;
      this.#count(sAt, depth);
      const o = r.object(s, sAt);
      if ("let" in o) {
        const value = this.expr(o.value, `${sAt}.value`, scope, depth + 1);
        const name = r.name(o.let, `${sAt}.let`);
        scope.add(name);
        return { let: name, value };
      }
      if ("store" in o) {
        return {
          store: this.#param(o.store, `${sAt}.store`, "heap"),
          index: this.expr(o.index, `${sAt}.index`, scope, depth + 1),
          value: this.expr(o.value, `${sAt}.value`, scope, depth + 1),
        };
      }
      if ("assert" in o) {
        return {
          assert: this.expr(o.assert, `${sAt}.assert`, scope, depth + 1),
          message: r.string(o.message, `${sAt}.message`, LIMITS.messageLength),
        };
      }
      if ("if" in o) {
        const cond = this.expr(o.if, `${sAt}.if`, scope, depth + 1);
        // Names bound in a branch stay in that branch.
        const then = this.stmts(o.then, `${sAt}.then`, new Set(scope), depth + 1);
        const otherwise = this.stmts(o.else, `${sAt}.else`, new Set(scope), depth + 1);
        return { if: cond, then, else: otherwise };
      }
      if ("launch" in o) return this.launch(o, sAt, scope, depth);
      return r.fail(sAt, `unknown statement ${show(o)}`);
    });
  }

  launch(o: Json, at: string, scope: Set<string>, depth: number): PlanStmt {
    const r: Reader = this.r;
    const name = r.name(o.launch, `${at}.launch`);
    const kernel = this.kernels.get(name);
    if (kernel === undefined) r.fail(`${at}.launch`, `no kernel named ${show(name)}`);
    const args = r.array(o.args, `${at}.args`);
    if (args.length !== kernel.arg_types.length) {
      r.fail(
        `${at}.args`,
        `kernel ${name} takes ${kernel.arg_types.length} arguments (its arg_types), the plan passes ${args.length}`,
      );
    }
    const checked = args.map((a, i) => {
      const aAt = `${at}.args[${i}]`;
      if (kernel.arg_types[i] === "handle") {
        const d = r.object(a, aAt);
        if (Object.keys(d).length !== 1 || !("data" in d)) {
          r.fail(aAt, `kernel ${name} takes a buffer here: expected { data: param }`);
        }
        return { data: this.#param(d.data, `${aAt}.data`, "buffer") };
      }
      return this.expr(a, aAt, scope, depth + 1);
    });
    const tags = kernel.launch_param_tags.filter((t) => !t.startsWith("paramWriteAccess:"));
    const gridTags = r.array(o.grid_tags, `${at}.grid_tags`).map((t, i) =>
      r.string(t, `${at}.grid_tags[${i}]`)
    );
    if (gridTags.join() !== tags.join()) {
      r.fail(
        `${at}.grid_tags`,
        `kernel ${name} is launched over ${show(tags)}, the plan gives ${show(gridTags)}`,
      );
    }
    const grid = r.array(o.grid, `${at}.grid`);
    if (grid.length !== tags.length) {
      r.fail(
        `${at}.grid`,
        `kernel ${name} needs ${tags.length} launch extents, got ${grid.length}`,
      );
    }
    return {
      launch: name,
      args: checked,
      grid: grid.map((g, i) => this.expr(g, `${at}.grid[${i}]`, scope, depth + 1)),
      grid_tags: gridTags,
    };
  }

  expr(v: unknown, at: string, scope: Set<string>, depth: number): PlanExpr {
    const r: Reader = this.r;
    this.#count(at, depth);
    if (typeof v === "number") {
      if (!Number.isSafeInteger(v)) r.fail(at, `an integer literal must be safe, got ${show(v)}`);
      return v;
    }
    const o = r.object(v, at);
    const keys = Object.keys(o);
    if ("float" in o && keys.length === 1) {
      const x = o.float;
      if (typeof x !== "number") return r.fail(at, `float must be a number, got ${show(x)}`);
      return { float: x };
    }
    if ("var" in o && keys.length === 1) {
      const name = r.name(o.var, `${at}.var`);
      if (!scope.has(name)) r.fail(at, `variable ${show(name)} is used before it is bound`);
      return { var: name };
    }
    if ("load" in o && keys.length === 2) {
      return {
        load: this.#param(o.load, `${at}.load`, "heap"),
        index: this.expr(o.index, `${at}.index`, scope, depth + 1),
      };
    }
    if ("op" in o) {
      const op = r.string(o.op, `${at}.op`);
      const arity = Object.hasOwn(PLAN_OPS, op) ? PLAN_OPS[op] : undefined;
      if (arity === undefined) r.fail(`${at}.op`, `unknown operator ${show(op)}`);
      const args = r.array(o.args, `${at}.args`);
      if (args.length !== arity) {
        r.fail(`${at}.args`, `${op} takes ${arity} operands, got ${args.length}`);
      }
      const out: { op: string; args: PlanExpr[]; dtype?: string } = {
        op,
        args: args.map((a, i) => this.expr(a, `${at}.args[${i}]`, scope, depth + 1)),
      };
      if (op === "cast") {
        const dtype = r.string(o.dtype, `${at}.dtype`);
        if (!CAST_DTYPES.has(dtype)) r.fail(`${at}.dtype`, `cannot cast to ${show(dtype)}`);
        out.dtype = dtype;
      }
      return out;
    }
    if ("data" in o) {
      r.fail(at, "a tensor's buffer ({ data }) may only be passed to a kernel");
    }
    return r.fail(at, `unknown expression ${show(o)}`);
  }
}
