/**
 * TVM's WGSL kernels on a relaxvm WebGPU device: compiled once when a
 * package loads, launched into the device's open command encoder like
 * relaxvm's own kernels (one submit per VM call, the same uniform and bind
 * group caches).
 *
 * The launch contract is tvmjs's (apache/tvm `web/src/webgpu.ts`),
 * rewritten here rather than shared:
 *
 * - Binding `i` is the `i`-th buffer argument, `storage` when
 *   `paramWriteAccess[i]` is 1 and `read-only-storage` otherwise; binding
 *   `buffers` is a uniform holding the scalar arguments (i32, u32 or f32,
 *   4 bytes each) followed by `packGridDimX`, a u32.
 * - The launch extents fill `blockIdx.*` and `threadIdx.*` by the kernel's
 *   tags; the workgroup size is baked into the WGSL, so only the `blockIdx`
 *   extents are dispatched. An x extent of 65536 or more is folded into z
 *   (halving x, doubling z); the kernel recovers the index as
 *   `blockIdx.z * gridDim.x + blockIdx.x` and returns past `packGridDimX`.
 * - A grid of more workgroups than the launch budget allows
 *   (tvm/launch_budget.ts) is refused before anything is recorded, with a
 *   `LaunchBudgetError`.
 * - Buffers are bound whole, so a tensor must start at byte 0 of its
 *   buffer — what Relax's memory planning produces (one tensor per storage
 *   offset 0) — unless its host parameter declares an `elem_offset`, which
 *   the kernel takes as a scalar (TVM's paged KV cache); any other tensor
 *   is refused with the reason.
 *
 * @module
 */

import { NDArray } from "../devices/ndarray.ts";
import { tensorDType } from "../ground/dtype.ts";
import type { CachedLayout } from "../devices/webgpu/pipeline_cache.ts";
import { kernelContext, type WebGPUDevice } from "../devices/webgpu/webgpu_device.ts";
import type { KernelLaunch, KernelLauncher } from "./host_plan.ts";
import { LaunchBudgetError, workgroupsOf } from "./launch_budget.ts";
import { type KernelInfo, launchTags, TVMPackageError } from "./package_format.ts";

/** One compiled kernel. */
interface CompiledKernel {
  readonly name: string;
  readonly info: KernelInfo;
  readonly pipeline: GPUComputePipeline;
  readonly layout: CachedLayout;
  /** Launch extent `i` sets dimension `dims[i]` (0-2 blockIdx, 3-5 threadIdx). */
  readonly dims: readonly number[];
  readonly writes: readonly boolean[];
  /** Indices of the buffer and the scalar arguments. */
  readonly buffers: readonly number[];
  readonly pods: readonly number[];
}

/** Packages loaded so far in this process: keeps bind group cache keys apart. */
let packageCount = 0;

/** The largest workgroup count of one dispatch dimension WebGPU guarantees. */
const MAX_DIMENSION = 65535;

/** The launcher host functions call, for a launch budget (`maxWorkgroupsPerDispatch`). */
export type LauncherForBudget = (maxWorkgroupsPerDispatch: number) => KernelLauncher;

/**
 * Compiles `kernels` on `device` and returns the launcher host functions
 * call, given the launch budget of the VM they run for. A kernel that does not compile, or whose bindings disagree with its
 * WGSL, fails here with a `TVMPackageError` naming it and WebGPU's message;
 * nothing is left in the device's error state.
 */
export async function compileKernels(
  device: WebGPUDevice,
  kernels: ReadonlyMap<string, KernelInfo>,
  file: string,
): Promise<LauncherForBudget> {
  const gpu = device.gpu;
  const id = ++packageCount;
  const compiled = new Map<string, CompiledKernel>();
  for (const [name, info] of kernels) {
    const { dims, writes } = launchTags(info);
    const buffers: number[] = [], pods: number[] = [];
    info.arg_types.forEach((t, i) => (t === "handle" ? buffers : pods).push(i));
    const entries: GPUBindGroupLayoutEntry[] = buffers.map((_, b) => ({
      binding: b,
      visibility: GPUShaderStage.COMPUTE,
      buffer: { type: writes[b] ? "storage" : "read-only-storage" },
    }));
    entries.push({
      binding: buffers.length,
      visibility: GPUShaderStage.COMPUTE,
      buffer: { type: "uniform" },
    });
    // Scopes pushed and popped with nothing awaited between, so they nest inside whatever
    // scopes the device's command batch holds open, and an invalid kernel leaves no error
    // behind for the device's next read.
    gpu.pushErrorScope("validation");
    const bindGroupLayout = gpu.createBindGroupLayout({ label: name, entries });
    const pipelineLayout = gpu.createPipelineLayout({
      label: name,
      bindGroupLayouts: [bindGroupLayout],
    });
    const module = gpu.createShaderModule({ label: name, code: info.wgsl });
    const pipeline = gpu.createComputePipeline({
      label: name,
      layout: pipelineLayout,
      compute: { module, entryPoint: name },
    });
    const error = await gpu.popErrorScope();
    if (error !== null) {
      throw new TVMPackageError(
        file,
        `kernels[${JSON.stringify(name)}]`,
        `the kernel does not compile on ${device} with the bindings its metadata gives: ${error.message}`,
      );
    }
    compiled.set(name, {
      name,
      info,
      pipeline,
      layout: { key: `tvm${id}:${name}`, bindGroupLayout, pipelineLayout },
      dims,
      writes,
      buffers,
      pods,
    });
  }
  const ctx = kernelContext(device);
  return (budget) => {
    const launcher: KernelLauncher = (launch: KernelLaunch) => launchOne(launch, budget);
    launcher.alloc = (shape, dtype) => NDArray.empty(shape, tensorDType(dtype), device);
    return launcher;
  };

  function launchOne(launch: KernelLaunch, budget: number): void {
    const k = compiled.get(launch.kernel);
    if (k === undefined) throw new Error(`no kernel named ${launch.kernel}`);
    const fail = (message: string): never => {
      throw new Error(`kernel ${k.name}: ${message}`);
    };
    const work = [1, 1, 1, 1, 1, 1];
    launch.grid.forEach((g, i) => {
      if (!Number.isSafeInteger(g) || g < 0) fail(`launch extent ${i} is ${g}`);
      work[k.dims[i]] = g;
    });
    const workgroups = workgroupsOf(launch.grid, k.dims);
    if (workgroups > budget) throw new LaunchBudgetError(k.name, launch.grid, workgroups, budget);
    const packDimX = work[0];
    let [x, z] = [work[0], work[2]];
    while (x > MAX_DIMENSION) {
      x = Math.ceil(x / 2);
      z *= 2;
    }
    const y = work[1];
    if (y > MAX_DIMENSION || z > MAX_DIMENSION) {
      fail(`a grid of ${packDimX} x ${y} workgroups is more than WebGPU dispatches`);
    }
    if (x === 0 || y === 0) return;
    // Uniform and bind group creation can fail too: inside the batch's error scopes.
    ctx.batch.openScope();
    const bound: GPUBuffer[] = [];
    for (const [b, i] of k.buffers.entries()) {
      const t = launch.args[i];
      if (!(t instanceof NDArray)) return fail(`argument ${i} must be a tensor`);
      if (t.device !== device) {
        fail(`argument ${i} is on ${t.device}, the kernel runs on ${device}`);
      }
      if (t.byteOffset !== 0 && !launch.offsets?.[i]) {
        fail(
          `argument ${i} starts at byte ${t.byteOffset} of its buffer; TVM's kernels bind whole buffers and need offset 0`,
        );
      }
      const buffer = t.block as GPUBuffer;
      const twice = bound.indexOf(buffer);
      if (twice >= 0 && (k.writes[b] || k.writes[twice])) {
        fail(
          `buffers ${twice} and ${b} are the same GPU buffer, and the kernel writes one of them`,
        );
      }
      bound.push(buffer);
    }
    const words = new DataView(new ArrayBuffer(4 * (k.pods.length + 1)));
    k.pods.forEach((i, slot) => {
      const v = launch.args[i];
      const type = k.info.arg_types[i];
      if (typeof v !== "number") return fail(`argument ${i} must be a ${type} scalar`);
      if (type === "float32") words.setFloat32(4 * slot, v, true);
      else if (type === "int32") {
        if (!(Number.isInteger(v) && v >= -(2 ** 31) && v < 2 ** 31)) {
          fail(`argument ${i} is ${v}, which does not fit the kernel's int32`);
        }
        words.setInt32(4 * slot, v, true);
      } else {
        if (!(Number.isInteger(v) && v >= 0 && v < 2 ** 32)) {
          fail(`argument ${i} is ${v}, which does not fit the kernel's uint32`);
        }
        words.setUint32(4 * slot, v, true);
      }
    });
    words.setUint32(4 * k.pods.length, packDimX, true);
    const uniform = ctx.bindings.uniform(new Uint32Array(words.buffer));
    const group = ctx.bindings.bindGroup(k.layout, [...bound, uniform]);
    ctx.batch.dispatch(k.pipeline, group, x, y, z);
  }
}
