/**
 * The plumbing of the host operators (this folder's, and builtins/host_nn/'s
 * image, window, normalization and signal operators): operators whose output shape depends on their
 * inputs' values (a slice's bounds given as a tensor, `nonzero`, `unique`)
 * or that no device kernel has yet, computed on the host's copy of their
 * tensors. A GPU input is copied to the CPU first, and the result copied
 * back to the device of the operator's first tensor, so a WebGPU program
 * runs them as it runs int64 arithmetic: correct, at the price of the
 * copies.
 *
 * Elements are read and written through the dtype's own storage
 * (`cpuView()`: a `BigInt64Array` for int64, the raw bits for bfloat16),
 * so moving elements never rounds them; `numbersOf` gives them as numbers
 * for the operators that compute.
 *
 * @module
 */

import { cpu } from "../../devices/cpu_device.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { activateAllocators, activeAllocators } from "../../devices/allocation_context.ts";
import type { TensorDType, TypedArray } from "../../ground/dtype.ts";
import { describe } from "../describe.ts";
import { tensorArg } from "../validate.ts";
import { chargeWork } from "../operators/kernel_cost.ts";

/** What a host operator computes: the output's shape and dtype, and how to fill it. */
export interface HostResult {
  /** The output's shape. */
  readonly shape: readonly number[];
  /** The output's dtype. */
  readonly dtype: TensorDType;
  /** Writes the elements into `out` (the dtype's storage, zeroed). */
  fill(out: TypedArray): void;
}

/**
 * Runs `compute` on the host copies of `inputs` (`undefined` entries stay
 * undefined) and returns its result as a tensor on the device of the first
 * input. Synchronous when every input is in CPU memory; else a Promise (the
 * running VM's allocators are restored after the read back, so the result
 * still counts against it).
 */
export function onHost(
  who: string,
  inputs: readonly (NDArray | undefined)[],
  compute: (views: (TypedArray | undefined)[]) => HostResult,
): NDArray | Promise<NDArray> {
  const first = inputs.find((t) => t !== undefined);
  if (first === undefined) throw new TypeError(`${who}: no tensor input`);
  const device = first.device;
  const finish = (views: (TypedArray | undefined)[]): NDArray => {
    const r = compute(views);
    let size = 1;
    for (const d of r.shape) size *= d;
    chargeWork("a host operator", Math.max(size, first.size), device);
    const out = NDArray.empty([...r.shape], r.dtype, cpu());
    try {
      const view = out.cpuView();
      // The allocator may hand back used memory: the fill starts from zeros.
      if (view instanceof BigInt64Array) view.fill(0n);
      else (view as Float32Array).fill(0);
      r.fill(view);
    } catch (e) {
      out.releaseIfUnowned();
      throw e;
    }
    return out;
  };
  if (inputs.every((t) => t === undefined || t.device.kind === "cpu")) {
    return finish(inputs.map((t) => t?.cpuView()));
  }
  const allocators = activeAllocators();
  return (async () => {
    const copies = await Promise.all(
      inputs.map((t) => t === undefined || t.device.kind === "cpu" ? t : t.copyToFloating(cpu())),
    );
    const previous = activateAllocators(allocators);
    try {
      const out = finish(copies.map((t) => t?.cpuView()));
      if (device.kind === "cpu") return out;
      try {
        return await out.copyToFloating(device);
      } finally {
        out.releaseIfUnowned();
      }
    } finally {
      activateAllocators(previous);
      copies.forEach((c, i) => {
        if (c !== undefined && c !== inputs[i]) c.releaseIfUnowned();
      });
    }
  })();
}

/** A tensor argument (of `dtype` when given), or `undefined` when absent or null. */
export function optionalTensor(
  v: unknown,
  what: string,
  who: string,
  dtype?: TensorDType,
): NDArray | undefined {
  return v === undefined || v === null ? undefined : tensorArg(v, what, who, dtype);
}

/** The elements of a storage view as numbers (int64 converted; bfloat16 bits decoded by dtype). */
export function numbersOf(view: TypedArray): number[] {
  return Array.from(view as ArrayLike<number | bigint>, Number);
}

/** Integer contents of a tensor's view, each a safe integer (int64 past 2^53 clamps to ±2^53). */
export function integersOf(view: TypedArray, what: string, who: string): number[] {
  return Array.from(view as ArrayLike<number | bigint>, (v) => {
    const n = typeof v === "bigint"
      ? Number(v > 2n ** 53n ? 2n ** 53n : v < -(2n ** 53n) ? -(2n ** 53n) : v)
      : v;
    if (!Number.isInteger(n)) throw new TypeError(`${who}: ${what} must hold integers, got ${n}`);
    return n;
  });
}

/** Writes number `x` into element `i` of `out` (a `BigInt64Array` takes it as a bigint). */
export function put(out: TypedArray, i: number, x: number): void {
  if (out instanceof BigInt64Array) out[i] = BigInt(Math.trunc(x));
  else (out as Float32Array)[i] = x;
}

/** NumPy's `rint` (and `round`): to the nearest integer, halves to even. */
export function rint(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Row-major strides of `shape`. */
export function stridesOf(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length);
  let k = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = k;
    k *= shape[i];
  }
  return s;
}

/** For each flat index of `out`, the flat index of `shape` broadcast to it. */
export function broadcastIndex(
  shape: readonly number[],
  out: readonly number[],
): (i: number) => number {
  const s = stridesOf(shape), o = stridesOf(out), lead = out.length - shape.length;
  return (i) => {
    let j = 0;
    for (let a = lead; a < out.length; a++) {
      if (shape[a - lead] !== 1) j += (Math.floor(i / o[a]) % out[a]) * s[a - lead];
    }
    return j;
  };
}

/** Number of elements of `shape`. */
export function sizeOf(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** An axis of a rank-`rank` tensor, negative counting from the end; a `RangeError` if outside. */
export function axisOf(who: string, axis: unknown, rank: number): number {
  if (typeof axis !== "number" || !Number.isInteger(axis)) {
    throw new TypeError(`${who}: axis must be an integer, got ${describe(axis)}`);
  }
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    throw new RangeError(`${who}: axis ${axis} out of range for rank ${rank}`);
  }
  return a;
}

/** A string argument among `choices`. */
export function choiceArg<T extends string>(
  who: string,
  v: unknown,
  what: string,
  choices: readonly T[],
): T {
  if (typeof v !== "string" || !(choices as readonly string[]).includes(v)) {
    throw new TypeError(`${who}: ${what} must be one of ${choices.join(", ")}, got ${describe(v)}`);
  }
  return v as T;
}
