/**
 * Choosing the device that runs a model faster here: WebGPU on a hardware
 * adapter, the CPU kernels otherwise. A software adapter (Mesa's llvmpipe,
 * Chromium's SwiftShader, Windows' WARP) runs shaders on the CPU, through a
 * layer the CPU kernels do not pay for, so it is slower than they are (the
 * README gives the figures).
 *
 * @module
 */

import { cpu } from "./cpu_device.ts";
import type { Device } from "./device.ts";
import { webgpu } from "./webgpu/webgpu_device.ts";

/** The device `preferredDevice()` chose, and why, in words for a log line. */
export interface DeviceChoice {
  /** The CPU, or WebGPU device 0. */
  readonly device: Device;
  /** Why: `the WebGPU adapter llvmpipe (…) is a software one, slower than the CPU kernels`. */
  readonly reason: string;
}

/** The words that name a software adapter in its vendor, architecture or description. */
const SOFTWARE_ADAPTER = /llvmpipe|lavapipe|softpipe|swiftshader|\bwarp\b|basic render driver/i;

/**
 * Whether an adapter runs shaders on the CPU: WebGPU's `isFallbackAdapter`
 * where the runtime reports it (Deno does), else the names of the known
 * software rasterizers in its info.
 *
 * @example
 * ```ts
 * import { isSoftwareAdapter } from "@relaxvm/relaxvm";
 * import { assert } from "@std/assert";
 *
 * assert(isSoftwareAdapter({ vendor: "mesa", architecture: "", description: "llvmpipe (LLVM 15)" }));
 * assert(!isSoftwareAdapter({ vendor: "nvidia", architecture: "hopper", description: "H100" }));
 * ```
 */
export function isSoftwareAdapter(
  info: { vendor: string; architecture: string; description?: string; isFallbackAdapter?: boolean },
): boolean {
  if (info.isFallbackAdapter === true) return true;
  return SOFTWARE_ADAPTER.test(`${info.vendor} ${info.architecture} ${info.description ?? ""}`);
}

/** An adapter's name for people: its description, else vendor and architecture. */
function adapterName(info: GPUAdapterInfo): string {
  return info.description || [info.vendor, info.architecture].filter((s) => s).join(" ") ||
    "unnamed";
}

/**
 * The device a model runs faster on here, and why: WebGPU device 0 on a
 * hardware adapter; the CPU where there is no WebGPU, no adapter, or only a
 * software one (`isSoftwareAdapter`). It looks at the adapter before it
 * acquires a device, so choosing the CPU costs no GPU device.
 *
 * @example
 * ```ts
 * import { preferredDevice, VirtualMachine, ExecBuilder } from "@relaxvm/relaxvm";
 *
 * if (import.meta.main) { // as a script; the doc tests only type-check it
 *   const { device, reason } = await preferredDevice();
 *   console.log(`running on ${device.kind}: ${reason}`);
 *   const vm = new VirtualMachine(new ExecBuilder().get(), device);
 * }
 * ```
 */
export async function preferredDevice(): Promise<DeviceChoice> {
  const gpu = (globalThis.navigator as { gpu?: GPU } | undefined)?.gpu;
  if (gpu === undefined) return { device: cpu(), reason: "this runtime has no WebGPU" };
  let adapter: GPUAdapter | null = null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: "high-performance" }) ??
      await gpu.requestAdapter();
  } catch {
    adapter = null;
  }
  if (adapter === null) return { device: cpu(), reason: "no WebGPU adapter was found" };
  const name = adapterName(adapter.info);
  if (isSoftwareAdapter(adapter.info)) {
    return {
      device: cpu(),
      reason: `the WebGPU adapter, ${name}, is a software one: the CPU kernels are faster`,
    };
  }
  try {
    return { device: await webgpu(), reason: `the WebGPU adapter, ${name}, is hardware` };
  } catch (e) {
    return { device: cpu(), reason: `WebGPU failed (${(e as Error).message})` };
  }
}
