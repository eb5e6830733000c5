/**
 * `loadTVMPackage`: a model TVM compiled for WebGPU (`relax.build(mod,
 * Target("webgpu", host="llvm"))`, exported by `tools/tvm/export_webgpu.py`)
 * loaded onto a relaxvm WebGPU device, with no WebAssembly: the executable
 * runs on relaxvm's VM, TVM's WGSL kernels on the device, and the host code
 * between them from the package's launch plans.
 *
 * Every read goes through `fetch`, so a package loads from `https:` in
 * browsers and Deno and from `file:` URLs and plain paths in Deno.
 *
 * This file is browser-safe: no `Deno.*`.
 *
 * @module
 */

import { getGlobalFunc, type PackedFunc } from "../ground/registry.ts";
import { LoadError } from "../ground/errors.ts";
import { NDArray } from "../devices/ndarray.ts";
import { webgpu, type WebGPUDevice } from "../devices/webgpu/webgpu_device.ts";
import { Executable } from "../program/executable.ts";
import { VirtualMachine, type VirtualMachineOptions } from "../vm/virtual_machine.ts";
import { asDirectory, resolveLocation } from "../builtins/tensor_cache_files.ts";
import {
  decodeRecord,
  parseTensorCacheIndex,
  recordBytes,
  type TensorCacheRecord,
} from "../builtins/tensor_cache_format.ts";
import { tensorDType } from "../ground/dtype.ts";
import { hostFunction } from "./host_plan.ts";
import {
  parseTVMPackageManifest,
  TVMPackageError,
  type TVMPackageManifest,
} from "./package_format.ts";
import { compileKernels } from "./webgpu_kernels.ts";

/** Options of `loadTVMPackage`. */
export interface LoadTVMPackageOptions {
  /** The device the kernels and weights go to; default `await webgpu()`. */
  device?: WebGPUDevice;
  /** Cancels the fetches. */
  signal?: AbortSignal;
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
  /** The packed functions the executable calls that the package defines. */
  readonly functions: ReadonlyMap<string, PackedFunc>;
  /** The weights a call of VM function `name` passes after its inputs, in order. */
  params(name?: string): NDArray[];
  /** A VM running the package on its device, with its functions registered for that VM alone. */
  createVM(options?: Omit<VirtualMachineOptions, "functions">): VirtualMachine;
  /** Frees the weights and the executable's constants. */
  dispose(): void;
}

async function fetchFile(url: URL, signal: AbortSignal | undefined): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(url, { signal });
  } catch (e) {
    throw new TVMPackageError(url.href, "", `cannot fetch it (${e})`, { cause: e });
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw new TVMPackageError(url.href, "", `cannot fetch it (HTTP ${response.status})`);
  }
  return response;
}

/**
 * Loads the TVM package in directory (or URL) `location` onto a WebGPU
 * device: validates the manifest, loads the executable (TVM's format),
 * checks that every packed function it calls is a relaxvm builtin or one
 * of the package's host functions, compiles the kernels, and uploads the
 * weights. All or nothing: on failure whatever was made is freed and the
 * error (`TVMPackageError`, or `LoadError` for the executable's bytes, or
 * `TensorCacheError` for the weights) names the file and the field.
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
  location: string | URL,
  options: LoadTVMPackageOptions = {},
): Promise<TVMPackage> {
  const base = asDirectory(resolveLocation(location));
  const manifestUrl = new URL("package.json", base);
  const { signal } = options;
  const manifest = parseTVMPackageManifest(
    await (await fetchFile(manifestUrl, signal)).text(),
    manifestUrl.href,
  );
  const exeUrl = new URL(manifest.executable, base);
  const bytes = new Uint8Array(await (await fetchFile(exeUrl, signal)).arrayBuffer());
  let executable: Executable;
  try {
    executable = Executable.load(bytes);
  } catch (e) {
    if (e instanceof LoadError) {
      throw new TVMPackageError(exeUrl.href, "", e.message, { cause: e });
    }
    throw e;
  }
  const owned: NDArray[] = [];
  try {
    checkCalls(manifest, executable, manifestUrl.href);
    const device = options.device ?? await webgpu();
    const launch = await compileKernels(device, manifest.kernels, manifestUrl.href);
    const functions = new Map<string, PackedFunc>();
    for (const [name, fn] of manifest.host_functions) {
      functions.set(name, hostFunction(name, fn, launch));
    }
    const weights = manifest.params === null
      ? new Map<string, NDArray>()
      : await loadWeights(new URL(manifest.params, base), device, owned, signal);
    const params = new Map<string, NDArray[]>();
    for (const [name, f] of manifest.functions) {
      if (!executable.functions.some((g) => g.kind === "vm" && g.name === name)) {
        throw new TVMPackageError(
          manifestUrl.href,
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
              manifestUrl.href,
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
        return new VirtualMachine(executable, device, { ...vmOptions, functions });
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

/** The tensor cache at `indexUrl`, each record a tensor on `device` (also pushed onto `owned`). */
async function loadWeights(
  indexUrl: URL,
  device: WebGPUDevice,
  owned: NDArray[],
  signal: AbortSignal | undefined,
): Promise<Map<string, NDArray>> {
  const index = parseTensorCacheIndex(
    await (await fetchFile(indexUrl, signal)).text(),
    indexUrl.href,
  );
  const out = new Map<string, NDArray>();
  for (const shard of index.records) {
    const url = new URL(shard.dataPath, indexUrl);
    const bytes = new Uint8Array(await (await fetchFile(url, signal)).arrayBuffer());
    if (bytes.length !== shard.nbytes) {
      throw new TVMPackageError(
        url.href,
        "",
        `the shard is ${bytes.length} bytes, the index says ${shard.nbytes}`,
      );
    }
    for (const record of shard.records) {
      const t = recordTensor(bytes, record, device);
      owned.push(t);
      out.set(record.name, t);
    }
  }
  return out;
}

function recordTensor(shard: Uint8Array, record: TensorCacheRecord, device: WebGPUDevice): NDArray {
  const raw = decodeRecord(recordBytes(shard, record), record);
  const t = NDArray.empty(record.shape, tensorDType(record.dtype), device);
  device.writeBlock(t.block, t.byteOffset, raw);
  return t.handToUser() as NDArray;
}
