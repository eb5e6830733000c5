/**
 * `MemoryScope`: the devices of one VM and their allocators, one per device,
 * of the kind the VM was created with. It is what the special register `%vm`
 * passes to builtins such as `alloc_storage` (seed 002's VM state), and what
 * the allocation context makes current while the VM runs, so every tensor a
 * kernel allocates is counted in that VM's `memory_stats()`. Its allocators
 * share one `MemoryLimit` (`maxMemoryBytes`), so the VM's memory is bounded
 * on all its devices together.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../ground/brand.ts";
import type { Device } from "./device.ts";
import { type Allocator, type AllocatorKind, MemoryLimit } from "./allocator.ts";
import type { AllocatorSet } from "./allocation_context.ts";
import { NaiveAllocator } from "./naive_allocator.ts";
import { PooledAllocator } from "./pooled_allocator.ts";
import { TensorCache, type TensorCacheRoot } from "./tensor_cache.ts";

const MEMORY_SCOPE_BRAND = brandKey("MemoryScope");

/** A VM's devices and allocators, as builtins see them through `%vm`. */
export class MemoryScope implements AllocatorSet {
  static {
    brand(this, MEMORY_SCOPE_BRAND);
  }

  /**
   * True for a `MemoryScope` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static [Symbol.hasInstance](v: unknown): v is MemoryScope {
    return typeof v === "object" && v !== null && (v as Branded)[MEMORY_SCOPE_BRAND] === true;
  }

  /** The devices the VM was created with; index 0 is the default. */
  readonly devices: readonly Device[];
  /** Which allocator each device gets. */
  readonly allocatorKind: AllocatorKind;
  /** What the allocators may hold together. */
  readonly limit: MemoryLimit;
  readonly #allocators = new Map<Device, Allocator>();
  #tensorCache: TensorCache | null;
  /** Whether the tensor cache was made here (and so is cleared with the VM). */
  #ownsTensorCache = false;
  /**
   * What the VM's programs may load into their tensor cache
   * (`tensor_cache.load`): nothing unless the host granted roots (VM option
   * `tensorCacheRoots`). Checked in builtins/tensor_cache/cache_access.ts.
   */
  tensorCacheRoots: readonly TensorCacheRoot[] = [];
  /**
   * The `AbortSignal` of the call running now, if it has limits to watch
   * (a timeout, a signal): aborts when that call stops or ends, so work a
   * builtin started for it (a download) stops too. Set by the VM.
   */
  callSignal: () => AbortSignal | undefined = () => undefined;
  /** The last device asked for and its allocator: most VMs allocate on one device. */
  #lastDevice: Device | undefined = undefined;
  #lastAllocator: Allocator | undefined = undefined;

  /**
   * Made by the VM: its allocators hold at most `maxBytes` together.
   *
   * @ignore
   */
  constructor(
    devices: readonly Device[],
    allocatorKind: AllocatorKind,
    maxBytes = Infinity,
    tensorCache: TensorCache | null = null,
  ) {
    this.#tensorCache = tensorCache;
    this.devices = devices;
    this.allocatorKind = allocatorKind;
    // Over the limit, every pool gives its free blocks back before a request fails.
    this.limit = new MemoryLimit(maxBytes, () => {
      for (const a of this.#allocators.values()) a.clear();
    });
  }

  /**
   * The tensor cache the VM's programs see: the one the VM was given, or its
   * own, made on first use.
   */
  get tensorCache(): TensorCache {
    if (this.#tensorCache === null) {
      this.#tensorCache = new TensorCache();
      this.#ownsTensorCache = true;
    }
    return this.#tensorCache;
  }

  /** Empties the tensor cache if it is the VM's own (the VM is being disposed). */
  clearOwnTensorCache(): void {
    if (this.#ownsTensorCache) this.#tensorCache!.clear();
  }

  /** The allocator serving `device` (created on first use). */
  allocatorFor(device: Device): Allocator {
    if (device === this.#lastDevice) return this.#lastAllocator!;
    let a = this.#allocators.get(device);
    if (a === undefined) {
      a = this.allocatorKind === "naive"
        ? new NaiveAllocator(device, this.limit)
        : new PooledAllocator(device, this.limit);
      this.#allocators.set(device, a);
    }
    this.#lastDevice = device;
    this.#lastAllocator = a;
    return a;
  }

  /** The device at `index` in the VM's device list. */
  deviceAt(index: number): Device {
    const d = this.devices[index];
    if (d === undefined) {
      throw new RangeError(
        `Device index ${index} is out of range: the VM has ${this.devices.length} device(s)`,
      );
    }
    return d;
  }

  /** The first device of `kind`, if the VM has one. */
  deviceOfType(deviceType: number, id = 0): Device | undefined {
    return this.devices.find((d) => d.deviceType === deviceType && d.id === id);
  }

  /** Every allocator created so far. */
  allocators(): Allocator[] {
    return [...this.#allocators.values()];
  }
}
