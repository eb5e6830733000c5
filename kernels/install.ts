/**
 * `installKernels()`: makes the operator kernels of every device kind
 * available to the `vm.op.*` front end (TF.js's `register_all_kernels`).
 * Installing the WebGPU kernels needs no GPU: they are used only for
 * tensors that live on one.
 *
 * @module
 */

import { cpuBackend } from "./cpu/backend.ts";
import { registerBackend } from "./kernel_backend.ts";
import { webgpuBackend } from "./webgpu/backend.ts";

/** Installs the CPU and WebGPU kernels. */
export function installKernels(): void {
  registerBackend("cpu", cpuBackend);
  registerBackend("webgpu", webgpuBackend);
}
