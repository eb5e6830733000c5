/**
 * `loadTVMPackage`: a model TVM compiled for WebGPU (`relax.build(mod,
 * Target("webgpu", host="llvm"))`, exported by `tools/tvm/export_webgpu.py`)
 * loaded onto a relaxvm WebGPU device, with no WebAssembly: the executable
 * runs on relaxvm's VM, TVM's WGSL kernels on the device, and the host code
 * between them from the package's launch plans.
 *
 * Every read goes through `fetch`, so a package loads from `https:` in
 * browsers and Deno and from `file:` URLs and plain paths in Deno. The
 * files are read and checked first, before the device is touched
 * (tvm/package_files.ts: every path the package writes stays inside it,
 * every read is bounded, the weights must fit `maxMemoryBytes`).
 *
 * @module
 */

import { getGlobalFunc, type PackedFunc } from "../ground/registry.ts";
import { LoadError } from "../ground/errors.ts";
import { NDArray } from "../devices/ndarray.ts";
import { webgpu, type WebGPUDevice } from "../devices/webgpu/webgpu_device.ts";
import { Executable } from "../program/executable.ts";
import { VirtualMachine, type VirtualMachineOptions } from "../vm/virtual_machine.ts";
import { hostFunction } from "./host_plan.ts";
import { TVMPackageError, type TVMPackageManifest } from "./package_format.ts";
import { type PackageReadOptions, readPackageFiles } from "./package_files.ts";
import { compileKernels } from "./webgpu_kernels.ts";
import { checkStaticGrids, launchBudget } from "./launch_budget.ts";

/**
 * Options of `loadTVMPackage`: the device, and the bounds on what a package
 * may make it read (`signal`, `maxFileBytes`, `maxMemoryBytes`; see
 * tvm/package_files.ts).
 */
export interface LoadTVMPackageOptions extends PackageReadOptions {
  /** The device the kernels and weights go to; default `await webgpu()`. */
  device?: WebGPUDevice;
  /**
   * The most workgroups one kernel dispatch may ask for (the product of its
   * blockIdx extents); default 2^19 (`DEFAULT_MAX_WORKGROUPS_PER_DISPATCH`,
   * about 100 ms of the cheapest kernel on a software adapter, 2.7 times
   * the largest grid of the packages relaxvm ships). A launch whose grid is
   * constant and over it fails the load with a `TVMPackageError`; one whose
   * grid a call computes from its shapes fails that call with a `VMError`
   * whose `cause` is a `LaunchBudgetError`, before anything is dispatched.
   * Infinity: no budget. `createVM` may set a VM's own.
   */
  maxWorkgroupsPerDispatch?: number;
}

/** Options of `TVMPackage.createVM`: a VM's options, and its own launch budget. */
export interface TVMPackageVMOptions extends Omit<VirtualMachineOptions, "functions"> {
  /**
   * The most workgroups one dispatch of this VM's kernels may ask for;
   * default the package's (`LoadTVMPackageOptions.maxWorkgroupsPerDispatch`).
   * Grids are checked when a call computes them, so a VM may set more than
   * the package's load-time check allowed for constant grids.
   */
  maxWorkgroupsPerDispatch?: number;
}

/**
 * A loaded TVM package: its executable, the packed functions it brings
 * (host functions over compiled kernels, for its VMs only) and its weights
 * on the device. Make VMs with `createVM`; `dispose()` frees the weights and
 * the executable.
 */
export interface TVMPackage extends Disposable {
  /** The validated manifest. */
  readonly manifest: TVMPackageManifest;
  /** The Relax VM executable, loaded from TVM's format. */
  readonly executable: Executable;
  /** The device the kernels run on. */
  readonly device: WebGPUDevice;
  /**
   * The packed functions the executable calls that the package defines, at
   * the package's launch budget.
   */
  readonly functions: ReadonlyMap<string, PackedFunc>;
  /** The package's launch budget (`LoadTVMPackageOptions.maxWorkgroupsPerDispatch`). */
  readonly maxWorkgroupsPerDispatch: number;
  /** The weights a call of VM function `name` passes after its inputs, in order. */
  params(name?: string): NDArray[];
  /**
   * A VM running the package on its device, with its functions registered
   * for that VM alone, and its own launch budget if `options` sets one.
   */
  createVM(options?: TVMPackageVMOptions): VirtualMachine;
  /** Frees the weights and the executable's constants. */
  dispose(): void;
}

/**
 * Loads the TVM package in directory (or URL) `location` — or held in
 * memory, as a map from package-relative paths (`package.json`,
 * `executable.tvm`, `params/...`) to their bytes or text — onto a WebGPU
 * device: validates the manifest, loads the executable (TVM's format),
 * checks that every packed function it calls is a relaxvm builtin or one
 * of the package's host functions, compiles the kernels, and uploads the
 * weights. All or nothing: on failure whatever was made is freed and the
 * error names the file and the field: a `TVMPackageError` (with the
 * `LoadError` as its `cause` when the executable's bytes are bad), or a
 * `TensorCacheError` for a malformed weights index.
 *
 * A package is treated as data from elsewhere: a path it writes (the
 * manifest's `executable` and `params`, a shard's `dataPath`) that could
 * leave its directory (`..`, `%2e%2e`, `..\`, an absolute path or URL, an
 * encoded slash) is refused before anything is read; `package.json`, the
 * executable and the weights index are read up to `maxFileBytes` (default
 * 64 MiB), each shard up to the length its index declares, and the weights
 * must fit `maxMemoryBytes` (default 1 GiB), so a file that never ends is a
 * `TVMPackageError`, not a process out of memory. The weights are read
 * whole before the first is uploaded.
 *
 * @example Run a TVM-compiled MLP (the package `tools/tvm/export_webgpu.py mlp` writes)
 * ```ts
 * import { loadTVMPackage, tensor } from "@relaxvm/relaxvm";
 *
 * if (import.meta.main) { // needs a WebGPU adapter; the doc tests only type-check it
 *   using pkg = await loadTVMPackage("testdata/tvm_webgpu/mlp");
 *   const vm = pkg.createVM();
 *   using x = tensor(new Float32Array(3 * 16).fill(0.5), { shape: [3, 16] });
 *   using y = await vm.invokeTensor("forward", x, ...pkg.params("forward"));
 *   console.log(y.shape, await y.data()); // [3, 8] Float32Array(24) [...]
 * }
 * ```
 */
export async function loadTVMPackage(
  location: string | URL | ReadonlyMap<string, Uint8Array | string>,
  options: LoadTVMPackageOptions = {},
): Promise<TVMPackage> {
  const budget = launchBudget(options.maxWorkgroupsPerDispatch);
  const files = await readPackageFiles(location, options);
  const { manifest, manifestFile } = files;
  let executable: Executable;
  try {
    executable = Executable.load(files.executable);
  } catch (e) {
    for (const t of files.weights.values()) t.dispose();
    if (e instanceof LoadError) {
      throw new TVMPackageError(files.executableFile, "", e.message, { cause: e });
    }
    throw e;
  }
  const owned: NDArray[] = [];
  try {
    checkCalls(manifest, executable, manifestFile);
    checkStaticGrids(manifest, budget, manifestFile);
    const device = options.device ?? await webgpu();
    const launcher = await compileKernels(device, manifest.kernels, manifestFile);
    const functionsFor = (budget: number) => {
      const launch = launcher(budget);
      const functions = new Map<string, PackedFunc>();
      for (const [name, fn] of manifest.host_functions) {
        functions.set(name, hostFunction(name, fn, launch));
      }
      return functions;
    };
    const functions = functionsFor(budget);
    const weights = uploadWeights(files.weights, device, owned);
    const params = new Map<string, NDArray[]>();
    for (const [name, f] of manifest.functions) {
      if (!executable.functions.some((g) => g.kind === "vm" && g.name === name)) {
        throw new TVMPackageError(
          manifestFile,
          `functions[${JSON.stringify(name)}]`,
          "the executable has no such VM function",
        );
      }
      params.set(
        name,
        f.params.map((p, i) => {
          const t = weights.get(p);
          if (t === undefined) {
            throw new TVMPackageError(
              manifestFile,
              `functions[${JSON.stringify(name)}].params[${i}]`,
              `the tensor cache has no record ${JSON.stringify(p)}`,
            );
          }
          return t;
        }),
      );
    }
    let disposed = false;
    const pkg: TVMPackage = {
      manifest,
      executable,
      device,
      functions,
      maxWorkgroupsPerDispatch: budget,
      params(name = "forward") {
        const list = params.get(name);
        if (list === undefined) {
          throw new RangeError(
            `The package has no function ${JSON.stringify(name)}; it has ${
              [...params.keys()].map((n) => JSON.stringify(n)).join(", ")
            }`,
          );
        }
        return [...list];
      },
      createVM(vmOptions = {}) {
        if (disposed) throw new TypeError("The TVM package was disposed");
        const { maxWorkgroupsPerDispatch, ...rest } = vmOptions;
        const own = maxWorkgroupsPerDispatch === undefined
          ? functions
          : functionsFor(launchBudget(maxWorkgroupsPerDispatch));
        return new VirtualMachine(executable, device, { ...rest, functions: own });
      },
      dispose() {
        if (disposed) return;
        disposed = true;
        for (const t of owned) t.dispose();
        owned.length = 0;
        executable.dispose();
      },
      [Symbol.dispose]() {
        pkg.dispose();
      },
    };
    return pkg;
  } catch (e) {
    for (const t of owned) t.dispose();
    executable.dispose();
    throw e;
  } finally {
    for (const t of files.weights.values()) t.dispose();
  }
}

/** Every packed function the executable calls must be a builtin or a host function of the package. */
function checkCalls(manifest: TVMPackageManifest, ex: Executable, file: string): void {
  const missing = ex.functions.filter((f) =>
    f.kind === "packed" && !manifest.host_functions.has(f.name) &&
    getGlobalFunc(f.name) === undefined
  ).map((f) => JSON.stringify(f.name));
  if (missing.length > 0) {
    throw new TVMPackageError(
      file,
      "host_functions",
      `the executable calls ${missing.slice(0, 10).join(", ")}${
        missing.length > 10 ? ` and ${missing.length - 10} more` : ""
      }, which neither the package nor relaxvm's builtins define`,
    );
  }
}

/** The weights (CPU tensors, as read), each copied to a tensor on `device` (also in `owned`). */
function uploadWeights(
  weights: ReadonlyMap<string, NDArray>,
  device: WebGPUDevice,
  owned: NDArray[],
): Map<string, NDArray> {
  const out = new Map<string, NDArray>();
  for (const [name, read] of weights) {
    const t = NDArray.empty(read.shape, read.dtype, device);
    owned.push(t);
    const v = read.readView();
    device.writeBlock(t.block, t.byteOffset, new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
    out.set(name, t.handToUser() as NDArray);
  }
  return out;
}
