/**
 * The operators' own argument checks (beside the builtins' shared ones in
 * builtins/validate.ts), each throwing with a message that starts with the
 * op name: argument counts, dtypes, devices, axes and flags; and `launch`,
 * which hands an operator's work to its device's kernels.
 *
 * @module
 */

import { elementBytes, type TensorDType } from "../../ground/dtype.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { ShapeTuple } from "../../ground/shape_tuple.ts";
import { describe } from "../describe.ts";
import { backendFor, type OpBackend } from "../../kernels/kernel_backend.ts";
import { formatShape } from "../../kernels/broadcast.ts";
import { chargeWork } from "./kernel_cost.ts";
export function checkArgCount(
  op: string,
  args: readonly unknown[],
  min: number,
  max: number,
): void {
  if (args.length >= min && args.length <= max) return;
  const expected = min === max ? `${min}` : `${min} to ${max}`;
  const noun = max === 1 ? "argument" : "arguments";
  throw new TypeError(`${op}: expected ${expected} ${noun}, got ${args.length}`);
}

export function checkDType(
  op: string,
  x: NDArray,
  role: string,
  allowed: readonly TensorDType[],
): void {
  if (!allowed.includes(x.dtype)) {
    const hint = x.dtype === "float16" || x.dtype === "bfloat16"
      ? ` (relaxvm's operators compute ${x.dtype} tensors as float32: cast them with vm.op.cast first${
        shaderF16Note(x)
      })`
      : "";
    throw new TypeError(
      `${op}: ${role} has dtype ${x.dtype}, expected ${allowed.join(" or ")}${hint}`,
    );
  }
  checkDevice(op, x);
}

/** What a WebGPU device offers for float16 code of one's own, for messages. */
export function shaderF16Note(x: NDArray): string {
  const device = x.device as { kind: string; shaderF16?: boolean };
  if (device.kind !== "webgpu") return "";
  return device.shaderF16
    ? `; this adapter offers shader-f16 to WGSL of your own`
    : `; this adapter does not offer shader-f16 either`;
}

/** int64 arithmetic runs on the CPU only: WGSL has no 64-bit integers. */
export function checkDevice(op: string, x: NDArray): void {
  if (x.dtype === "int64" && x.device.kind !== "cpu") {
    throw new TypeError(
      `${op}: int64 arithmetic is not available on ${x.device}: WGSL has no 64-bit integers ` +
        `(int64 tensors there can be stored, copied, moved with to_device and cast; ` +
        `compute on the CPU or cast to int32)`,
    );
  }
}

export function checkSameDType(op: string, tensors: readonly NDArray[]): void {
  const first = tensors[0];
  for (const t of tensors) {
    if (t.dtype !== first.dtype) {
      throw new TypeError(`${op}: dtypes ${tensors.map((t) => t.dtype).join(" and ")} differ`);
    }
  }
}

export function checkSameDevice(op: string, tensors: readonly NDArray[]): void {
  const first = tensors[0];
  for (const t of tensors) {
    if (t.device !== first.device) {
      const devices = tensors.map((t) => String(t.device)).join(" and ");
      throw new TypeError(`${op}: tensors are on different devices, ${devices}`);
    }
  }
}

/** An axis in `[-rank, rank)` normalized to `[0, rank)`. */
export function normalizeAxis(op: string, axis: number, shape: readonly number[]): number {
  const rank = shape.length;
  if (!Number.isInteger(axis) || axis < -rank || axis >= rank) {
    throw new RangeError(`${op}: axis ${axis} is out of range for shape ${formatShape(shape)}`);
  }
  return axis < 0 ? axis + rank : axis;
}

/** An axis list given as a ShapeTuple, a number[] or a single number; `undefined` when absent. */
export function axisList(op: string, value: unknown, role: string): number[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (value instanceof ShapeTuple) return [...value];
  if (typeof value === "number") return [value];
  if (Array.isArray(value) && value.every((v) => typeof v === "number")) return value;
  throw new TypeError(
    `${op}: ${role} must be a ShapeTuple or an array of integers, got ${describe(value)}`,
  );
}

/** Reduction axes: sorted, unique, non-negative; all axes when absent or empty. */
export function reductionAxes(op: string, value: unknown, shape: readonly number[]): number[] {
  const given = axisList(op, value, "axes");
  if (given === undefined || given.length === 0) return shape.map((_, i) => i);
  const axes = given.map((a) => normalizeAxis(op, a, shape));
  if (new Set(axes).size !== axes.length) {
    throw new RangeError(
      `${op}: axes [${given.join(", ")}] repeat an axis of shape ${formatShape(shape)}`,
    );
  }
  return axes.sort((a, b) => a - b);
}

export function flagArg(op: string, value: unknown, role: string): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value === "boolean") return value;
  if (value === 0 || value === 1) return value === 1;
  throw new TypeError(`${op}: ${role} must be 0, 1 or a boolean, got ${describe(value)}`);
}

/**
 * Allocates the output on `x`'s device, runs `kernel` and returns the output;
 * a kernel that throws does not leak the output's memory. The kernel's
 * `work` (multiply-adds; default: the larger of `x`'s and the output's
 * elements, for a kernel linear in its memory) is charged to the running
 * call first (kernel_cost.ts's `chargeWork`).
 */
export function launch(
  x: NDArray,
  shape: readonly number[],
  dtype: TensorDType,
  kernel: (backend: OpBackend, out: NDArray) => void,
  work?: number,
): NDArray {
  let w = work;
  if (w === undefined) {
    let elements = 1;
    for (const d of shape) elements *= d;
    w = Math.max(x.size, elements);
  }
  chargeWork("a kernel", w, x.device);
  const backend = backendFor(x.device.kind);
  const out = NDArray.empty(shape, dtype, x.device);
  try {
    kernel(backend, out);
  } catch (e) {
    out.releaseIfUnowned();
    throw e;
  }
  return out;
}

/** A view of `x`'s memory with another shape of the same size (for 1-D matmul operands). */
export function reshapedView(x: NDArray, shape: readonly number[]): NDArray {
  return new NDArray(x.storage, x.byteOffset, shape, x.dtype);
}

/**
 * A view of `shape` over `x`'s memory starting `elements` elements in (a row
 * block of one head or batch, for a kernel split into chunks).
 */
export function viewOf(x: NDArray, elements: number, shape: readonly number[]): NDArray {
  return new NDArray(x.storage, x.byteOffset + elements * elementBytes(x.dtype), shape, x.dtype);
}
