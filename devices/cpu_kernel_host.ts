/**
 * The one seam between the devices layer and the CPU kernels above it.
 *
 * A few things this layer owns need the CPU kernels at run time: a seal that ends must give
 * the kernels' copy of the sealed values back, a VM over its memory limit must be able to take
 * the memory of those copies, `cpu({ residentBytes })` must drop copies past its new end, and
 * `CpuDevice.description` and `memory_stats()` report on the kernels. This layer cannot import
 * the kernels (tests/check_layers.ts), so it declares what it needs of them here, as one typed
 * object, and the kernels' installer (`installKernels()`, kernels/install.ts) installs their
 * implementation, the only module outside this layer that imports this one (the layer check
 * enforces it, and that this layer exports no other slot for a callback).
 *
 * Before installation (a program that never installs the kernels) the host is `IDLE_HOST`: no
 * kernel has made a copy, so there is nothing to give back and nothing to count.
 *
 * @module
 */

import { shared } from "../ground/shared.ts";

/** The resident copies' counters, for `memory_stats()` of the CPU device. */
export interface ResidentStats {
  /** Bytes of live weight copies in the CPU kernels' memory, process-wide. */
  residentBytes: number;
  /** The most `residentBytes` has been. */
  residentPeakBytes: number;
}

/**
 * What the devices layer asks of the CPU kernels (kernels/cpu/wasm/runtime.ts and
 * resident.ts implement it; kernels/install.ts installs it).
 *
 * @ignore
 */
export interface CpuKernelHost {
  /**
   * Which kernels compute on the CPU, e.g. `"WebAssembly relaxed-simd kernels, 2 threads"`
   * (`CpuDevice.description`, the profiler).
   */
  describeKernels(): string;
  /** The resident copies' counters now (`memory_stats()` of the CPU device). */
  residentStats(): ResidentStats;
  /** `cpu({ residentBytes })` changed: copies past the region's new end are given back. */
  residentSettingChanged(): void;
  /**
   * A seal ended (`MemoryBlock.unseal()`, a new `seal()`, `reclaimed()`; devices/storage.ts):
   * `seal` is the object `sealFor` returned; the copies kept under it are given back.
   */
  sealEnded(seal: object): void;
  /**
   * A request of a VM would pass its memory limit (`MemoryLimit.take`, devices/allocator.ts):
   * the copies charged to `limit` are given back, as they only save time.
   */
  releaseOptionalMemory(limit: object): void;
}

/** The host before the kernels are installed: they have made no copy. */
export const IDLE_HOST: CpuKernelHost = {
  describeKernels: () => "TypeScript kernels",
  residentStats: () => ({ residentBytes: 0, residentPeakBytes: 0 }),
  residentSettingChanged: () => {},
  sealEnded: () => {},
  releaseOptionalMemory: () => {},
};

/**
 * The installed host, one per process, like the seals and copies it serves
 * (ground/shared.ts): a copy of the library that installs its kernels serves every copy's
 * devices.
 */
const slot: { host: CpuKernelHost } = shared("relaxvm.cpuKernelHost.v1", () => ({
  host: IDLE_HOST,
}));

/**
 * Installs the CPU kernels' side of the seam; called by `installKernels()` alone.
 *
 * @ignore
 */
export function installCpuKernelHost(host: CpuKernelHost): void {
  slot.host = host;
}

/**
 * The installed host (`IDLE_HOST` before `installKernels()`).
 *
 * @ignore
 */
export function cpuKernelHost(): CpuKernelHost {
  return slot.host;
}
