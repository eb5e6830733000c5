/**
 * Input placement (TVM's `set_input` behaviour, `ConvertArgToDevice`): a VM
 * whose first device is not the CPU copies the CPU tensors it is called
 * with to that device before the call, so `new VirtualMachine(ex, gpu)`
 * called with `tensor([1, 2])` computes on the GPU instead of silently on
 * the CPU. `new VirtualMachine(ex, gpu, { moveInputs: false })` passes
 * arguments as they are.
 *
 * What is copied: every `NDArray` in CPU memory among the arguments, and
 * inside arrays (tuples) the caller passes, at any depth. Tensors already on
 * a device other than the CPU, released tensors (the call then reports them
 * as usual) and other values are passed as they are; an array that holds
 * nothing to copy is passed as the same array.
 *
 * Lifetime (ground/object.ts). A copy comes from the VM's allocator on that
 * device, so `memory_stats()` counts it. A copy passed as an argument itself
 * is *floating*: the frame's register is its only holder, so liveness frees
 * it right after its last use in the function, as it would free any
 * intermediate. A copy inside an array is held by the placement for the
 * whole call, because an array is not a holder: the program may read the
 * same field twice. `finish()`, called when the call has settled and its
 * result was handed out, drops the placement's holds and frees any copy
 * nobody took (a call that failed before its frame held its arguments). A
 * copy the result contains belongs to the caller, as every result does.
 *
 * For arguments kept across calls (`save_function`, `set_input`,
 * `time_evaluator`) the placement holds every copy (`holdAll`) until
 * `finish()`.
 *
 * @module
 */

import { activateAllocators, type AllocatorSet } from "../devices/allocation_context.ts";
import type { Device } from "../devices/device.ts";
import { NDArray } from "../devices/ndarray.ts";

/** Deepest array nesting searched for tensors to copy (deeper arrays pass as they are). */
const MAX_DEPTH = 1000;

/**
 * A floating copy of CPU tensor `t` on `target`, allocated from the
 * allocators active now (the VM's, when the caller activated them). The
 * stored bytes are copied, so bfloat16 and float16 tensors keep their bits.
 */
export function copyToDevice(t: NDArray, target: Device): NDArray {
  const copy = NDArray.empty(t.shape, t.dtype, target);
  const stored = t.cpuView();
  try {
    target.writeBlock(
      copy.block,
      copy.byteOffset,
      new Uint8Array(stored.buffer, stored.byteOffset, t.nbytes),
    );
  } catch (e) {
    copy.releaseIfUnowned();
    throw e;
  }
  return copy;
}

/** Arguments with their CPU tensors copied to a device, and the copies' holds. */
export class PlacedInputs {
  /** The arguments to call with. */
  readonly args: readonly unknown[];
  /** Copies passed as arguments themselves: floating unless `holdAll`. */
  readonly #top: NDArray[];
  /** Copies the placement holds (those inside arrays; every copy with `holdAll`). */
  readonly #held: NDArray[];
  #finished = false;

  /** Made by `placeInputs`. */
  constructor(args: readonly unknown[], top: NDArray[], held: NDArray[]) {
    this.args = args;
    this.#top = top;
    this.#held = held;
  }

  /** Bytes copied to the device. */
  get bytes(): number {
    let n = 0;
    for (const t of this.#top) n += t.nbytes;
    for (const t of this.#held) if (!this.#top.includes(t)) n += t.nbytes;
    return n;
  }

  /** Number of tensors copied. */
  get count(): number {
    return new Set([...this.#top, ...this.#held]).size;
  }

  /**
   * Drops the placement's holds and frees every copy nobody else holds.
   * Call it once the call has settled and its result was handed out; later
   * calls do nothing.
   */
  finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    for (const t of this.#held) t.release();
    for (const t of this.#top) t.releaseIfUnowned();
  }
}

/**
 * `args` with every CPU tensor (also inside arrays) copied to `target`
 * through the allocators of `scope`, or null when there is nothing to copy.
 * `holdAll`: the placement holds every copy until `finish()` (arguments kept
 * across calls); otherwise copies passed as arguments are left floating for
 * the call's frame. A failure (the VM's memory limit, say) frees the copies
 * made so far and throws.
 */
export function placeInputs(
  args: readonly unknown[],
  target: Device,
  scope: AllocatorSet,
  holdAll: boolean,
): PlacedInputs | null {
  const top: NDArray[] = [];
  const held: NDArray[] = [];
  const previous = activateAllocators(scope);
  try {
    const place = (v: unknown, depth: number): unknown => {
      if (v instanceof NDArray) {
        if (v.disposed || v.device.kind !== "cpu") return v;
        const copy = copyToDevice(v, target);
        if (depth > 0 || holdAll) held.push(copy.retain());
        if (depth === 0) top.push(copy);
        return copy;
      }
      if (depth >= MAX_DEPTH || !isArray(v)) return v;
      const array = v as readonly unknown[];
      let out: unknown[] | null = null;
      for (let i = 0; i < array.length; i++) {
        const x = array[i];
        const y = place(x, depth + 1);
        if (y !== x) (out ??= array.slice())[i] = y;
      }
      return out ?? v;
    };
    let out: unknown[] | null = null;
    for (let i = 0; i < args.length; i++) {
      const x = args[i];
      const y = place(x, 0);
      if (y !== x) (out ??= args.slice())[i] = y;
    }
    if (out === null) return null;
    return new PlacedInputs(out, top, held);
  } catch (e) {
    for (const t of held) t.release();
    for (const t of top) t.releaseIfUnowned();
    throw e;
  } finally {
    activateAllocators(previous);
  }
}

/** `Array.isArray(v)`, false for a revoked Proxy (which throws there). */
function isArray(v: unknown): boolean {
  try {
    return Array.isArray(v);
  } catch {
    return false;
  }
}
