/**
 * CPU kernels of the comparisons, the logical ops and `where`: one N-d walk
 * over the output with each operand's broadcast strides (a 0 stride repeats
 * an element). Values are compared as they are stored: bigints for int64,
 * numbers otherwise (NaN is unequal to everything, as IEEE 754 and NumPy
 * have it), bools as bytes that are 0 or not.
 *
 * @module
 */

import type { NDArray } from "../../devices/ndarray.ts";
import { broadcastStrides } from "../broadcast.ts";
import type { CompareOp } from "../kernel_backend.ts";

type Scalar = number | bigint;

const TESTS: Readonly<Record<CompareOp, (a: Scalar, b: Scalar) => boolean>> = {
  equal: (a, b) => a === b,
  not_equal: (a, b) => a !== b,
  less: (a, b) => a < b,
  less_equal: (a, b) => a <= b,
  greater: (a, b) => a > b,
  greater_equal: (a, b) => a >= b,
  logical_and: (a, b) => a !== 0 && b !== 0,
  logical_or: (a, b) => a !== 0 || b !== 0,
  logical_xor: (a, b) => (a !== 0) !== (b !== 0),
  logical_not: (a) => a === 0,
};

/** Calls `visit(i, offsets)` for each output element `i`, with each operand's element offset. */
function walk(
  shape: readonly number[],
  operands: readonly NDArray[],
  visit: (i: number, offsets: Int32Array | number[]) => void,
): void {
  const rank = shape.length;
  const strides = operands.map((t) => broadcastStrides(t.shape, shape));
  const index = new Array<number>(rank).fill(0);
  const offsets = operands.map(() => 0);
  let size = 1;
  for (const d of shape) size *= d;
  for (let i = 0; i < size; i++) {
    visit(i, offsets);
    // Odometer step: the last axis fastest, carrying into the ones before.
    for (let axis = rank - 1; axis >= 0; axis--) {
      index[axis]++;
      for (let k = 0; k < operands.length; k++) offsets[k] += strides[k][axis];
      if (index[axis] < shape[axis]) break;
      for (let k = 0; k < operands.length; k++) offsets[k] -= strides[k][axis] * shape[axis];
      index[axis] = 0;
    }
  }
}

/** `out = op(a, b)` as bool bytes. */
export function compareKernel(op: CompareOp, a: NDArray, b: NDArray, out: NDArray): void {
  const x = a.readView() as ArrayLike<Scalar>, y = b.readView() as ArrayLike<Scalar>;
  const o = out.cpuView() as Uint8Array;
  const test = TESTS[op];
  walk(out.shape, [a, b], (i, [p, q]) => {
    o[i] = test(x[p], y[q]) ? 1 : 0;
  });
}

/** `out = cond ? x : y`. */
export function whereKernel(cond: NDArray, x: NDArray, y: NDArray, out: NDArray): void {
  const c = cond.readView() as Uint8Array;
  const u = x.readView() as ArrayLike<Scalar>, v = y.readView() as ArrayLike<Scalar>;
  const o = out.cpuView() as unknown as { [i: number]: Scalar };
  walk(out.shape, [cond, x, y], (i, [p, q, r]) => {
    o[i] = c[p] !== 0 ? u[q] : v[r];
  });
}
