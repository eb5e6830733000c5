/**
 * Finding a device by its DLPack type code and index, as
 * `vm.builtin.to_device` and `alloc_storage` name devices.
 *
 * @module
 */

import { cpu } from "./cpu_device.ts";
import { acquiredDevices, type Device, DLDeviceType } from "./device.ts";

/**
 * The device with DLPack type code `deviceType` and index `id` that this
 * process has acquired, if any (a CPU device always exists).
 */
export function findDevice(deviceType: number, id: number): Device | undefined {
  if (deviceType === DLDeviceType.CPU) return cpu(id);
  return acquiredDevices().find((d) => d.deviceType === deviceType && d.id === id);
}
