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
 * functions       { VM function: { inputs: count, params: [cache record names],
 *                 param_mode?: "plain" | "packed" } }
 *                 a call passes its inputs, then those tensors, in that order
 *                 ("plain", the default) or as one tuple of them ("packed")
 * kernels         { kernel: { wgsl, arg_types, launch_param_tags } }
 *                 TVM's WGSL (entry point = the kernel's name) and its
 *                 func_info, as tvmjs's launcher reads them
 * host_functions  { packed function: { params, body } }  the launch plans
 * ```
 *
 * Host functions are what TVM compiles with LLVM and relaxvm evaluates:
 * `params` lists `{ name, kind: "tensor", dtype, shape: [expr],
 * elem_offset? }` or `{ name, kind: "scalar", dtype }`; a shape entry that
 * is a bare variable not yet bound binds it, every other entry is checked
 * against the argument. `elem_offset` (TVM's symbolic element offset: the
 * tensor starts that many elements into its buffer, which is bound whole;
 * the kernel takes the offset as a scalar) binds or is checked the same
 * way; without it a tensor must start at its buffer's first byte. `body`
 * is a list of statements:
 *
 * ```text
 * { let: name, value: expr }
 * { store: param, index: expr, value: expr }     param: an int64/int32 CPU tensor
 * { assert: expr, message }
 * { if: expr, then: [stmt], else: [stmt] }
 * { for: name, extent: expr, body: [stmt] }      name = 0 .. extent - 1
 * { alloc: index, dtype, shape: [expr] }         scratch tensor `index` (numbered after
 *                                                the params), freed when the call ends
 * { launch: kernel, args: [expr], grid: [expr], grid_tags: [tag] }
 * { return: expr }                               the host function's value
 * ```
 *
 * and an expression is an integer, `{ float: x }`, `{ var: name }`,
 * `{ data: index }` (a parameter's or scratch tensor's buffer, only as a
 * launch argument),
 * `{ load: param, index: expr }` or `{ op, args: [expr], dtype? }` with `op`
 * one of {@link PLAN_OPS}.
 *
 * Every field is checked here, before anything touches a device: a
 * malformed or hostile package fails with a `TVMPackageError` naming the
 * file and the field.
 *
 * @module
 */

import {
  type HostFunction,
  type KernelInfo,
  LIMITS,
  type PackageFunction,
  POD_TYPES,
  Reader,
  show,
  TVM_PACKAGE_FORMAT,
  TVM_PACKAGE_VERSIONS,
  TVMPackageError,
  type TVMPackageManifest,
} from "./package_manifest.ts";
import { PlanChecker } from "./plan_checker.ts";
import { checkKernelSource, checkLaunches, type KernelSource } from "./kernel_contract.ts";

export { launchTags } from "./kernel_contract.ts";
export type { LaunchTags } from "./kernel_contract.ts";

export {
  PLAN_OPS,
  TVM_PACKAGE_FORMAT,
  TVM_PACKAGE_VERSIONS,
  TVMPackageError,
} from "./package_manifest.ts";
export type {
  HostFunction,
  HostParam,
  KernelInfo,
  PackageFunction,
  PlanExpr,
  PlanStmt,
  TVMPackageManifest,
} from "./package_manifest.ts";

/** A WGSL identifier that is also a plain name: what kernel names must be. */
const WGSL_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

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
    const mode = (f.param_mode ?? "plain") as "plain" | "packed";
    if (mode !== "plain" && mode !== "packed") {
      r.fail(`${field}.param_mode`, `must be "plain" or "packed", got ${show(mode)}`);
    }
    functions.set(name, { inputs, params: names, param_mode: mode });
  }

  const kernels = new Map<string, KernelInfo>();
  const sources = new Map<string, KernelSource>();
  const fail = (field: string, reason: string): never => r.fail(field, reason);
  for (const [name, v] of r.entries(top.kernels, "kernels")) {
    const field = `kernels[${show(name)}]`;
    if (!WGSL_IDENTIFIER.test(name) || name.length > LIMITS.nameLength) {
      r.fail(field, "a kernel's name must be a WGSL identifier (its entry point)");
    }
    kernels.set(name, readKernel(r, v, field));
    sources.set(name, checkKernelSource(name, kernels.get(name)!, field, fail));
  }

  const hostFunctions = new Map<string, HostFunction>();
  for (const [name, v] of r.entries(top.host_functions, "host_functions")) {
    const field = `host_functions[${show(name)}]`;
    r.name(name, field);
    // The builtins are the VM's own: a package may not replace them for its VM.
    if (name.startsWith("vm.")) r.fail(field, "a package may not define vm.* functions");
    const fn = new PlanChecker(r, field, kernels).hostFunction(v);
    checkLaunches(fn, field, sources, kernels, fail);
    hostFunctions.set(name, fn);
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
