/**
 * `installKernels()`: makes the operator kernels of every device kind
 * available to the `vm.op.*` front end (TF.js's `register_all_kernels`).
 * Installing the WebGPU kernels needs no GPU: they are used only for
 * tensors that live on one.
 *
 * @module
 */

import { cpuBackend } from "./cpu/backend.ts";
import { registerKernels } from "./kernel_backend.ts";
import { webgpuBackend } from "./webgpu/backend.ts";

/** Installs the CPU and WebGPU kernels (each backend's `Partial<OpBackend>`). */
export function installKernels(): void {
  registerKernels("cpu", cpuBackend);
  registerKernels("webgpu", webgpuBackend);
}
