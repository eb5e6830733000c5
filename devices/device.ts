/**
 * `Device`: where tensor memory lives and kernels run. A device knows how to
 * create and destroy raw memory blocks and move bytes in and out of them; the
 * allocators (devices/*_allocator.ts) decide when. Kernels are chosen by
 * `kind`. The concrete devices: devices/cpu_device.ts and
 * devices/webgpu/webgpu_device.ts.
 *
 * @module
 */

import { brand, type Branded, brandKey, ordinaryInstanceOf } from "../ground/brand.ts";
import { shared } from "../ground/shared.ts";

/** DLPack device type codes used by `vm.builtin.to_device` and `alloc_storage`. */
export const DLDeviceType = { CPU: 1, WebGPU: 15 } as const;

/**
 * GPU time of the kernels a device records while a profile runs
 * (`vm.profile`; `Device.startTimer`).
 *
 * @ignore
 */
export interface DeviceTimer {
  /** Kernels recorded from now on are counted for `tag` (a call of the profile; -1: none). */
  setTag(tag: number): void;
  /**
   * Stops timing, submits what was recorded and resolves to every timed
   * kernel. Call it once, also when the profiled call failed.
   */
  finish(): Promise<TimedKernel[]>;
}

/**
 * One kernel timed by the device, in the device's clock.
 *
 * @ignore
 */
export interface TimedKernel {
  /** The tag it was recorded under (`DeviceTimer.setTag`). */
  tag: number;
  /** When it started, in nanoseconds after the first timed kernel started. */
  startNs: number;
  /** When it ended, on the same clock. */
  endNs: number;
  /** When the host submitted it (`performance.now()`). */
  submittedAtMs: number;
}

/** The kinds of device relaxvm runs on. */
export type DeviceKind = "cpu" | "webgpu";

const DEVICE_BRAND = brandKey("Device");

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
  static {
    brand(this, DEVICE_BRAND);
  }

  /**
   * True for a `Device` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static [Symbol.hasInstance](v: unknown): v is Device {
    if (this !== Device) return ordinaryInstanceOf.call(this, v);
    return typeof v === "object" && v !== null && (v as Branded)[DEVICE_BRAND] === true;
  }

  /** What kind of device this is; kernels dispatch on it. */
  abstract readonly kind: DeviceKind;
  /** Index among devices of the same kind. */
  readonly id: number;

  /**
   * Called by subclasses; the device joins the process's device list, where
   * `vm.builtin.to_device` finds devices by type and id.
   */
  protected constructor(id: number) {
    this.id = id;
    acquired.push(this);
  }

  /**
   * Called by a subclass whose device is gone for good (a lost GPU): it
   * leaves the process's device list, so `vm.builtin.to_device` and
   * `alloc_storage` never find it again; a fresh device takes its place.
   */
  protected leaveDeviceList(): void {
    const at = acquired.indexOf(this);
    if (at >= 0) acquired.splice(at, 1);
  }

  /** The DLPack device type code (1 = CPU, 15 = WebGPU). */
  abstract get deviceType(): number;

  /** The largest single block this device can allocate, in bytes. */
  abstract get maxAllocationBytes(): number;

  /**
   * Creates a raw memory block of `nbytes` (an `ArrayBuffer`, a `GPUBuffer`, …).
   *
   * @ignore
   */
  abstract createBlock(nbytes: number): unknown;

  /**
   * Gives a raw block's memory back to the device now.
   *
   * @ignore
   */
  abstract destroyBlock(block: unknown): void;

  /**
   * Writes `bytes` into `block` at `byteOffset`, in order with earlier queued work.
   *
   * @ignore
   */
  abstract writeBlock(block: unknown, byteOffset: number, bytes: Uint8Array): void;

  /**
   * Reads `nbytes` from `block` at `byteOffset` once all queued work is done.
   *
   * @ignore
   */
  abstract readBlock(block: unknown, byteOffset: number, nbytes: number): Promise<Uint8Array>;

  /**
   * Copies bytes between two blocks of this device, in order with queued work.
   *
   * @ignore
   */
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

  /**
   * Lets the device free what it holds for uploads made so far: WebGPU
   * keeps a copy of every `queue.writeBuffer` until the next submit, so a
   * long run of uploads (a tensor-cache load writing 47 MiB of weights)
   * would hold all of them. Submits nothing else; nothing to do elsewhere.
   *
   * @ignore
   */
  submitStagedWrites(): void {}

  /** Resolves once all work submitted so far has finished (for timing). */
  synchronize(): Promise<void> {
    this.flush();
    return Promise.resolve();
  }

  /**
   * Starts timing the kernels this device records on its own clock (for
   * `vm.profile`): a timer, a sentence saying why this device cannot
   * (a GPU without timestamp queries, a timer already running), or null
   * for a device whose kernels run while the host waits (the CPU), which a
   * host clock measures already.
   *
   * @ignore
   */
  startTimer(): DeviceTimer | string | null {
    return null;
  }

  /**
   * The device and what computes on it; the CPU says which kernels and how
   * many threads (`"cpu(0): WebAssembly relaxed-simd kernels, 2 threads"`).
   * Others: as `toString()`.
   */
  get description(): string {
    return this.toString();
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

/** Every device of the process, whichever copy of the library made it (ground/shared.ts). */
const acquired: Device[] = shared("relaxvm.devices.v1", () => []);

/** Every live device this process has created, in order (CPU devices included once used). */
export function acquiredDevices(): readonly Device[] {
  return acquired;
}
