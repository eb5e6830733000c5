/**
 * The truth of a condition, one rule for the `If` instruction
 * (vm/call_boundary.ts) and `vm.builtin.read_if_cond`
 * (builtins/values/runtime_values.ts), as TVM reads them (`If` in vm.cc and
 * `ReadIfCond` in builtin.cc: an integer or boolean is true when nonzero, a
 * tensor by its element). In JavaScript an Int is a number or, beyond 2^53, a
 * bigint, so both count; so does any number, as relaxvm's prim values do.
 *
 * @module
 */

import type { NDArray } from "./ndarray.ts";

/**
 * The truth of a number, bigint or boolean (nonzero is true), or undefined
 * for any other value.
 */
export function scalarTruth(v: unknown): boolean | undefined {
  if (typeof v === "number") return v !== 0;
  if (typeof v === "boolean") return v;
  if (typeof v === "bigint") return v !== 0n;
  return undefined;
}

/**
 * The truth of a one-element tensor's element (nonzero is true): at once
 * for a CPU tensor, as a Promise for one on another device (read back). A
 * `TypeError` naming `who` for a tensor of another size.
 */
export function tensorTruth(t: NDArray, who: string): boolean | Promise<boolean> {
  if (t.size !== 1) {
    throw new TypeError(`${who}: expected a one-element tensor, got shape [${t.shape.join(", ")}]`);
  }
  // Number(): an int64 element is a bigint (0n !== 0); dataSync/data give bfloat16 values.
  if (t.device.kind === "cpu") return Number(t.dataSync()[0]) !== 0;
  return t.data().then((d) => Number(d[0]) !== 0);
}
