/**
 * Which allocator a new tensor comes from. Packed functions receive only
 * their arguments, so the VM makes its allocators the active ones whenever
 * its loop runs (on entry and after every resumed await); kernels allocate
 * their outputs synchronously, before any await, so they always see the VM
 * that called them. Outside any VM, tensors come from a per-device default
 * allocator.
 *
 * @module
 */

import type { Device } from "./device.ts";
import { type Allocator, LARGE_BLOCK_BYTES, type WorkBudget } from "./allocator.ts";
import { NaiveAllocator } from "./naive_allocator.ts";
import { shared } from "../ground/shared.ts";

/** Maps a device to the allocator that serves it. */
export interface AllocatorSet {
  /** The allocator for `device`. */
  allocatorFor(device: Device): Allocator;
  /** The memory limit the set's allocators share, whose hook checks the running call's clock. */
  readonly limit?: ActiveLimit;
}

/**
 * What a running VM's memory limit offers the code it calls: a `MemoryLimit` (allocator.ts),
 * described by its members rather than its class so that a limit made by another copy of
 * the library (ground/shared.ts) serves as well.
 */
export interface ActiveLimit {
  /** Checks the running call's clock before a large block (`MemoryLimit.onLargeBlock`). */
  readonly onLargeBlock: (() => void) | null;
  /** The running call's budgets (`MemoryLimit.workBudget`). */
  readonly workBudget?: (() => WorkBudget | null) | null;
  /**
   * Counts `blockBytes` against the limit, or throws a `RangeError` (`MemoryLimit.take`): what
   * the CPU kernels charge a weight copy to (kernels/cpu/wasm/resident.ts).
   */
  take(blockBytes: number, device: Device, nbytes: number): void;
  /** Gives `blockBytes` back (`MemoryLimit.give`). */
  give(blockBytes: number): void;
}

/**
 * One context per process, shared by every copy of the library (see
 * ground/shared.ts): a builtin of one copy that runs inside another copy's
 * VM allocates from that VM.
 */
const context: { active: AllocatorSet | null; readonly defaults: Map<Device, Allocator> } = shared(
  "relaxvm.allocation.v1",
  () => ({ active: null, defaults: new Map() }),
);

/** The allocator that new tensors on `device` come from right now. */
export function currentAllocator(device: Device): Allocator {
  const active = context.active;
  if (active !== null) return active.allocatorFor(device);
  return defaultAllocator(device);
}

/** The allocator used outside any VM (tensors made by `tensor()`, say). */
export function defaultAllocator(device: Device): Allocator {
  let a = context.defaults.get(device);
  if (a === undefined) {
    a = new NaiveAllocator(device);
    context.defaults.set(device, a);
  }
  return a;
}

/**
 * True while a VM's allocators are active, i.e. while its loop runs: what
 * is made then is held by the VM's protocol unless handed on.
 */
export function allocatorsActive(): boolean {
  return context.active !== null;
}

/**
 * The active allocators (a running VM's `MemoryScope`), or null outside any
 * VM: how a builtin finds the VM that called it (its tensor cache, say).
 */
export function activeAllocators(): AllocatorSet | null {
  return context.active;
}

/** Makes `set` the active allocators; returns the previous ones to restore later. */
export function activateAllocators(set: AllocatorSet | null): AllocatorSet | null {
  const previous = context.active;
  context.active = set;
  return previous;
}

/**
 * Called by builtins for each tensor they take (`tensorArg`): before a kernel
 * reads a large input, the running call checks its clock and signal, as it
 * does before a large allocation (`MemoryLimit.onLargeBlock`). A reduction
 * reads megabytes into a 4-byte result, so the allocation check alone would
 * let a run of them go on past the call's timeout. One comparison for a small
 * tensor; a clock read for a large one.
 */
export function beforeLargeInput(nbytes: number): void {
  if (nbytes >= LARGE_BLOCK_BYTES) context.active?.limit?.onLargeBlock?.();
}

/**
 * The budgets of the VM call running now (`MemoryLimit.workBudget`), or null
 * outside any call: what a kernel's work is charged to.
 */
export function currentWorkBudget(): WorkBudget | null {
  return context.active?.limit?.workBudget?.() ?? null;
}
