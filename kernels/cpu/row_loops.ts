/**
 * The shape of a binary operator's CPU loops, shared by the number kernels
 * (elementwise.ts) and the int64 ones (int64.ts).
 *
 * @module
 */

import type { NumberArray } from "../../ground/dtype.ts";

/**
 * The loops of one binary operator over arrays `A` whose elements are `S`
 * (numbers, or bigints for int64):
 *
 * - `flat` fills `o[0 .. n)` from `a[0 ..]` and `b[0 ..]`: same shapes, the hottest case;
 * - `vv` fills `o[oo .. oo+n)` from `a[ao ..]` and `b[bo ..]`, both advancing;
 * - `vs` fills `o[oo .. oo+n)` from `a[ao ..]` and the fixed right operand `b`;
 * - `sv` fills `o[oo .. oo+n)` from the fixed left operand `a` and `b[bo ..]`.
 */
export interface RowLoops<A = NumberArray, S = number> {
  flat: (a: A, b: A, o: A, n: number) => void;
  vv: (a: A, ao: number, b: A, bo: number, o: A, oo: number, n: number) => void;
  vs: (a: A, ao: number, b: S, o: A, oo: number, n: number) => void;
  sv: (a: S, b: A, bo: number, o: A, oo: number, n: number) => void;
}
