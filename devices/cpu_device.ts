/**
 * The CPU device: blocks are `ArrayBuffer`s, and every copy is synchronous.
 * It is also the host every other device copies through.
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
 * Describes the CPU kernels for `CpuDevice.description` and the profiler:
 * registered by the kernels (kernels/cpu/wasm/runtime.ts), which this layer
 * cannot import.
 */
const kernelDescriber: { describe: () => string } = shared(
  "relaxvm.cpuKernelDescriber.v1",
  () => ({ describe: () => "TypeScript kernels" }),
);

/**
 * Registers what describes the CPU kernels (which instruction set, how many threads, and why).
 *
 * @ignore
 */
export function setCpuKernelDescriber(describe: () => string): void {
  kernelDescriber.describe = describe;
}

/**
 * Which kernels compute on the CPU, e.g. `"WebAssembly relaxed-simd kernels, 2 threads"`.
 *
 * @ignore
 */
export function describeCpuKernels(): string {
  return kernelDescriber.describe();
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
 * `options.threads` sets how many threads the CPU kernels use (see
 * `CpuOptions`).
 *
 * @example
 * ```ts
 * import { cpu } from "@relaxvm/relaxvm";
 * import { assertStrictEquals } from "@std/assert";
 *
 * assertStrictEquals(cpu(), cpu(0));
 * assertStrictEquals(cpu(0, { threads: 2 }), cpu());
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
  let dev = cpuDevices.get(id);
  if (dev === undefined) {
    dev = new CpuDevice(id);
    cpuDevices.set(id, dev);
  }
  return dev;
}
