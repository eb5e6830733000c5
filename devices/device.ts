/**
 * Devices: where tensor memory lives and kernels run. A `Device` knows how to
 * create and destroy raw memory blocks and move bytes in and out of them; the
 * allocators (vm/memory/) decide when. Kernels are chosen by `kind`.
 *
 * This file is browser-safe: no `Deno.*`.
 *
 * @module
 */

/** DLPack device type codes used by `vm.builtin.to_device` and `alloc_storage`. */
export const DLDeviceType = { CPU: 1, WebGPU: 15 } as const;

/** The kinds of device relaxvm runs on. */
export type DeviceKind = "cpu" | "webgpu";

/**
 * A device. Obtain one with `cpu()` or `await webgpu()`.
 *
 * @example
 * ```ts
 * import { cpu } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const dev = cpu();
 * assertEquals([dev.kind, dev.id], ["cpu", 0]);
 * ```
 */
export abstract class Device {
  /** What kind of device this is; kernels dispatch on it. */
  abstract readonly kind: DeviceKind;
  /** Index among devices of the same kind. */
  readonly id: number;

  /** Called by subclasses; the device becomes findable by `findDevice`. */
  protected constructor(id: number) {
    this.id = id;
    knownDevices.push(this);
  }

  /** The DLPack device type code (1 = CPU, 15 = WebGPU). */
  abstract get deviceType(): number;

  /** The largest single block this device can allocate, in bytes. */
  abstract get maxAllocationBytes(): number;

  /** Creates a raw memory block of `nbytes` (an `ArrayBuffer`, a `GPUBuffer`, …). */
  abstract createBlock(nbytes: number): unknown;

  /** Gives a raw block's memory back to the device now. */
  abstract destroyBlock(block: unknown): void;

  /** Writes `bytes` into `block` at `byteOffset`, in order with earlier queued work. */
  abstract writeBlock(block: unknown, byteOffset: number, bytes: Uint8Array): void;

  /** Reads `nbytes` from `block` at `byteOffset` once all queued work is done. */
  abstract readBlock(block: unknown, byteOffset: number, nbytes: number): Promise<Uint8Array>;

  /** Copies bytes between two blocks of this device, in order with queued work. */
  abstract copyBlock(
    src: unknown,
    srcOffset: number,
    dst: unknown,
    dstOffset: number,
    nbytes: number,
  ): void;

  /**
   * Submits work queued so far (a GPU's open command encoder) without waiting
   * for it. The VM calls it when a call ends; reads call it themselves.
   */
  flush(): void {}

  /** Resolves once all work submitted so far has finished (for timing). */
  synchronize(): Promise<void> {
    this.flush();
    return Promise.resolve();
  }

  /** `cpu(0)`, `webgpu(0)`. */
  toString(): string {
    return `${this.kind}(${this.id})`;
  }

  /** Shown by `console.log`. */
  [Symbol.for("Deno.customInspect")](): string {
    return this.toString();
  }
}

const knownDevices: Device[] = [];

/**
 * The device with DLPack type code `deviceType` and index `id` that this
 * process has acquired, if any (`vm.builtin.to_device` names devices so).
 */
export function findDevice(deviceType: number, id: number): Device | undefined {
  if (deviceType === DLDeviceType.CPU) return cpu(id);
  return knownDevices.find((d) => d.deviceType === deviceType && d.id === id);
}

/** The CPU: blocks are `ArrayBuffer`s. */
export class CpuDevice extends Device {
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

const cpuDevices = new Map<number, CpuDevice>();

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
