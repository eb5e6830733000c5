/**
 * The examples' `--device auto|webgpu|cpu`: `auto` (the default) takes
 * `preferredDevice()`, which is WebGPU on a hardware adapter and the CPU on a
 * software one (llvmpipe, SwiftShader) or none; the others ask for that
 * device, falling back to the CPU when WebGPU is missing. Prints which device
 * runs, why, and how to choose.
 *
 * @module
 */

import { cpu, type Device, preferredDevice, webgpu } from "../mod.ts";

/** The values `--device` takes. */
export const DEVICE_CHOICES = ["auto", "webgpu", "cpu"] as const;

/** The device for `--device <choice>`, after printing a line that says which and why. */
export async function chooseDevice(choice: string): Promise<Device> {
  let device: Device = cpu(), reason: string;
  if (choice === "auto") {
    ({ device, reason } = await preferredDevice());
  } else if (choice === "webgpu") {
    try {
      device = await webgpu();
      reason = "asked for with --device webgpu";
    } catch (e) {
      reason = `WebGPU is not available here (${(e as Error).message})`;
    }
  } else {
    reason = "asked for with --device cpu";
  }
  const name = device.kind === "webgpu"
    ? `webgpu (${
      (device as Awaited<ReturnType<typeof webgpu>>).adapter.info.description || "adapter"
    })`
    : "cpu";
  console.log(`device: ${name}: ${reason} (choose with --device auto|webgpu|cpu)`);
  return device;
}
