/**
 * The CPU device: blocks are `ArrayBuffer`s, and every copy is synchronous.
 * It is also the host every other device copies through.
 *
 * @module
 */

import { Device, DLDeviceType } from "./device.ts";
import { brand, type Branded, brandKey } from "../ground/brand.ts";
import { shared } from "../ground/shared.ts";
import { cpuKernelHost, type ResidentStats } from "./cpu_kernel_host.ts";

export type { ResidentStats };

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

  /**
   * The device and the kernels that compute on it, e.g. `"cpu(0): WebAssembly
   * relaxed-simd kernels, 2 threads"`, or why they run on one thread or in
   * TypeScript (a page that is not cross-origin isolated, a CSP refusing
   * WebAssembly).
   */
  override get description(): string {
    return `${this}: ${describeCpuKernels()}`;
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

/**
 * Which kernels compute on the CPU, e.g. `"WebAssembly relaxed-simd kernels, 2 threads"`.
 *
 * @ignore
 */
export function describeCpuKernels(): string {
  return cpuKernelHost().describeKernels();
}

/** One CPU device per id in the process, whichever copy of the library asks (ground/shared.ts). */
const cpuDevices: Map<number, Device> = shared("relaxvm.cpuDevices.v1", () => new Map());

/** Options of `cpu()`. */
export interface CpuOptions {
  /**
   * Threads the CPU kernels use, the calling one included: the WebAssembly
   * kernels split large products over a pool of `threads - 1` workers
   * sharing their memory. Default: `navigator.hardwareConcurrency`, at most
   * 8. Shared memory needs `SharedArrayBuffer`, which a browser offers only
   * on a cross-origin-isolated page; elsewhere the kernels run on the
   * calling thread alone, whatever this says (`cpu().description` says
   * which). One setting for the whole realm: the last `cpu()` call that
   * gives it wins.
   */
  threads?: number;
  /**
   * Bytes of the CPU kernels' WebAssembly memory that may hold copies of
   * sealed weights (what a tensor cache loads), laid out for the kernels so
   * that a decode step reads each weight once, from there, instead of
   * copying it in on every call (kernels/cpu/wasm/resident.ts). 0 turns the
   * copies off (every call then copies its weight in). Default: `DEFAULT_RESIDENT_BYTES`, 1 GiB. The region
   * starts at 512 MiB of that memory and ends at its 2 GiB maximum, so at
   * most 1.5 GiB is used whatever this says (32-bit WebAssembly addresses
   * 4 GiB; the kernels' memory is declared with 2 GiB at most so that every
   * address fits a signed 32-bit integer). Copies count in the CPU device's
   * `memory_stats()` (`residentBytes`) and in the `maxMemoryBytes` of the VM
   * whose call made them; one that does not fit either is not made (the
   * kernel copies its weight in, with the same results). One setting for
   * the whole realm: the last `cpu()` call that gives it wins; lowering it
   * gives back the copies past the new end.
   */
  residentBytes?: number;
}

/** The default of `cpu({ residentBytes })`: 1 GiB. */
export const DEFAULT_RESIDENT_BYTES = 2 ** 30;

/** The `cpu({ residentBytes })` setting, shared by every copy of the library. */
const residentSettings: { bytes: number } = shared(
  "relaxvm.cpuResidentSettings.v1",
  () => ({ bytes: DEFAULT_RESIDENT_BYTES }),
);

/**
 * Bytes the CPU kernels may keep weight copies in (`cpu(id, { residentBytes })`).
 *
 * @ignore
 */
export function cpuResidentSetting(): number {
  return residentSettings.bytes;
}

/**
 * The resident copies' counters now (zero before the kernels made any).
 *
 * @ignore
 */
export function cpuResidentStats(): ResidentStats {
  return cpuKernelHost().residentStats();
}

/** The thread setting of `cpu({ threads })`, shared by every copy of the library. */
const cpuSettings: { threads: number } = shared("relaxvm.cpuSettings.v1", () => ({
  threads: Math.max(
    1,
    Math.min(
      8,
      (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator
        ?.hardwareConcurrency ?? 1,
    ),
  ),
}));

/**
 * Threads the CPU kernels are asked to use (`cpu(id, { threads })`).
 *
 * @ignore
 */
export function cpuThreadSetting(): number {
  return cpuSettings.threads;
}

/**
 * The CPU device. The same object is returned for the same id.
 * `options.threads` sets how many threads the CPU kernels use, and
 * `options.residentBytes` how much of their memory may hold weight copies
 * (see `CpuOptions`).
 *
 * @example
 * ```ts
 * import { cpu } from "@relaxvm/relaxvm";
 * import { assertStrictEquals } from "@std/assert";
 *
 * assertStrictEquals(cpu(), cpu(0));
 * assertStrictEquals(cpu(0, { threads: 2 }), cpu());
 * assertStrictEquals(cpu(0, { residentBytes: 2 ** 30 }), cpu()); // up to 1 GiB of weight copies
 * ```
 */
export function cpu(id = 0, options: CpuOptions = {}): Device {
  if (options.threads !== undefined) {
    const n = options.threads;
    if (!Number.isInteger(n) || n < 1 || n > 256) {
      throw new RangeError(`cpu(): threads must be an integer from 1 to 256, got ${n}`);
    }
    cpuSettings.threads = n;
  }
  if (options.residentBytes !== undefined) {
    const b = options.residentBytes;
    if (!Number.isSafeInteger(b) || b < 0) {
      throw new RangeError(
        `cpu(): residentBytes must be a non-negative integer number of bytes, got ${b}`,
      );
    }
    residentSettings.bytes = b;
    cpuKernelHost().residentSettingChanged();
  }
  let dev = cpuDevices.get(id);
  if (dev === undefined) {
    dev = new CpuDevice(id);
    cpuDevices.set(id, dev);
  }
  return dev;
}
