/**
 * `installKernels()`: makes the operator kernels of every device kind
 * available to the `vm.op.*` front end (TF.js's `register_all_kernels`).
 * Installing the WebGPU kernels needs no GPU: they are used only for
 * tensors that live on one.
 *
 * @module
 */

import { type CpuKernelHost, installCpuKernelHost } from "../devices/cpu_kernel_host.ts";
import { cpuBackend } from "./cpu/backend.ts";
import { registerKernels } from "./kernel_backend.ts";
import { webgpuBackend } from "./webgpu/backend.ts";
import { describeCpuKernelRuntime } from "./cpu/wasm/runtime.ts";
import {
  releaseCopiesChargedTo,
  releaseCopiesPastEnd,
  releaseSealCopies,
  residentStats,
} from "./cpu/wasm/resident.ts";

/**
 * What the devices layer asks of the CPU kernels (devices/cpu_kernel_host.ts): the one place
 * it reaches up to them, installed with them below.
 */
const cpuKernelHost: CpuKernelHost = {
  describeKernels: describeCpuKernelRuntime,
  residentStats,
  residentSettingChanged: releaseCopiesPastEnd,
  sealEnded: releaseSealCopies,
  releaseOptionalMemory: releaseCopiesChargedTo,
};

/**
 * Installs the CPU and WebGPU kernels (each backend's `Partial<OpBackend>`), and the CPU
 * kernels' side of the devices layer's seam (`CpuKernelHost`).
 */
export function installKernels(): void {
  installCpuKernelHost(cpuKernelHost);
  registerKernels("cpu", cpuBackend);
  registerKernels("webgpu", webgpuBackend);
}
