/**
 * The CPU device: blocks are `ArrayBuffer`s, and every copy is synchronous.
 * It is also the host every other device copies through.
 *
 * This file is browser-safe: no `Deno.*`.
 *
 * @module
 */

import { Device, DLDeviceType } from "./device.ts";
import { brand, type Branded, brandKey } from "../ground/brand.ts";
import { shared } from "../ground/shared.ts";

const CPU_DEVICE_BRAND = brandKey("CpuDevice");

/** The CPU: blocks are `ArrayBuffer`s. */
export class CpuDevice extends Device {
  static {
    brand(this, CPU_DEVICE_BRAND);
  }

  /**
   * True for a `CpuDevice` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is CpuDevice {
    return typeof v === "object" && v !== null && (v as Branded)[CPU_DEVICE_BRAND] === true;
  }

  /** Always `"cpu"`. */
  readonly kind = "cpu" as const;

  /** Use `cpu(id)` instead. */
  constructor(id: number) {
    super(id);
  }

  /** 1, DLPack's kDLCPU. */
  get deviceType(): number {
    return DLDeviceType.CPU;
  }

  /** The largest ArrayBuffer V8 allows, about 8 GiB on 64-bit machines. */
  get maxAllocationBytes(): number {
    return 2 ** 33;
  }

  /** Makes a zeroed ArrayBuffer. */
  createBlock(nbytes: number): ArrayBuffer {
    return new ArrayBuffer(nbytes);
  }

  /** ArrayBuffers are collected by the garbage collector; nothing to do. */
  destroyBlock(_block: unknown): void {}

  /** Copies bytes in. */
  writeBlock(block: unknown, byteOffset: number, bytes: Uint8Array): void {
    new Uint8Array(block as ArrayBuffer, byteOffset, bytes.byteLength).set(bytes);
  }

  /** Copies bytes out. */
  readBlock(block: unknown, byteOffset: number, nbytes: number): Promise<Uint8Array> {
    return Promise.resolve(
      new Uint8Array((block as ArrayBuffer).slice(byteOffset, byteOffset + nbytes)),
    );
  }

  /** Copies between two ArrayBuffers. */
  copyBlock(
    src: unknown,
    srcOffset: number,
    dst: unknown,
    dstOffset: number,
    nbytes: number,
  ): void {
    new Uint8Array(dst as ArrayBuffer, dstOffset, nbytes).set(
      new Uint8Array(src as ArrayBuffer, srcOffset, nbytes),
    );
  }
}

/** One CPU device per id in the process, whichever copy of the library asks (ground/shared.ts). */
const cpuDevices: Map<number, Device> = shared("relaxvm.cpuDevices.v1", () => new Map());

/**
 * The CPU device. The same object is returned for the same id.
 *
 * @example
 * ```ts
 * import { cpu } from "@relaxvm/relaxvm";
 * import { assertStrictEquals } from "@std/assert";
 *
 * assertStrictEquals(cpu(), cpu(0));
 * ```
 */
export function cpu(id = 0): Device {
  let dev = cpuDevices.get(id);
  if (dev === undefined) {
    dev = new CpuDevice(id);
    cpuDevices.set(id, dev);
  }
  return dev;
}
