/**
 * CPU kernels for int64 tensors (`BigInt64Array`): the binary and unary
 * operators and the `sum`/`max` reductions, with two's-complement wrapping
 * as int32 has it — every result is stored into a `BigInt64Array`, which
 * keeps the low 64 bits. Division truncates toward zero and a zero divisor
 * yields the dividend (int32's rule, from WGSL), and `-2^63 / -1` wraps to
 * `-2^63`. Exact at every magnitude, and slower than the number kernels:
 * int64 tensors are shapes, token ids and indices, not bulk data.
 *
 * @module
 */

import type { BinaryOp, UnaryOp } from "../kernel_backend.ts";
import type { RowLoops } from "./row_loops.ts";

type Loops = RowLoops<BigInt64Array, bigint>;

/** The four loops of `f`, written once (int64 is not a hot path). */
function loopsOf(f: (x: bigint, y: bigint) => bigint): Loops {
  return {
    flat: (a, b, o, n) => {
      for (let i = 0; i < n; i++) o[i] = f(a[i], b[i]);
    },
    vv: (a, ao, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = f(a[ao + i], b[bo + i]);
    },
    vs: (a, ao, b, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = f(a[ao + i], b);
    },
    sv: (a, b, bo, o, oo, n) => {
      for (let i = 0; i < n; i++) o[oo + i] = f(a, b[bo + i]);
    },
  };
}

/** The int64 loops of each binary operator. */
export const INT64_LOOPS: Readonly<Record<BinaryOp, Loops>> = {
  add: loopsOf((x, y) => x + y),
  subtract: loopsOf((x, y) => x - y),
  multiply: loopsOf((x, y) => x * y),
  divide: loopsOf((x, y) => y === 0n ? x : x / y),
  maximum: loopsOf((x, y) => x > y ? x : y),
  minimum: loopsOf((x, y) => x < y ? x : y),
};

/** `o[i] = op(x[i])` for the operators defined on integers (`negative`, `relu`, `abs`). */
export function unaryInt64(op: UnaryOp, x: BigInt64Array, o: BigInt64Array, n: number): void {
  if (op === "negative") {
    for (let i = 0; i < n; i++) o[i] = -x[i];
  } else if (op === "relu") {
    for (let i = 0; i < n; i++) o[i] = x[i] > 0n ? x[i] : 0n;
  } else if (op === "abs") {
    for (let i = 0; i < n; i++) o[i] = BigInt.asIntN(64, x[i] < 0n ? -x[i] : x[i]);
  } else {
    throw new TypeError(`${op} is not defined on int64 tensors`);
  }
}

/** The smallest int64: what `max` of an empty run gives. */
const INT64_MIN = -(2n ** 63n);

/**
 * Folds every element of contiguous `xv` into `ov` at the output offsets
 * that `so` (output strides over the collapsed `shape`) gives: `sum` wraps,
 * `max` of an empty run is the smallest int64.
 */
export function reduceInt64(
  isMax: boolean,
  xv: BigInt64Array,
  ov: BigInt64Array,
  shape: readonly number[],
  so: readonly number[],
): void {
  ov.fill(isMax ? INT64_MIN : 0n);
  if (xv.length === 0) return;
  const rank = shape.length;
  const n = shape[rank - 1], inner = so[rank - 1];
  const index = new Array<number>(rank - 1).fill(0);
  let o = 0;
  for (let xo = 0; xo < xv.length; xo += n) {
    for (let i = 0; i < n; i++) {
      const at = o + i * inner, v = xv[xo + i];
      ov[at] = isMax ? (v > ov[at] ? v : ov[at]) : ov[at] + v;
    }
    for (let axis = rank - 2; axis >= 0; axis--) {
      o += so[axis];
      if (++index[axis] < shape[axis]) break;
      o -= so[axis] * shape[axis];
      index[axis] = 0;
    }
  }
}
