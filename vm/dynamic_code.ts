/**
 * `makeFunction()`: the one place the VM turns generated source into a
 * function (`new Function`), for specialized dispatch
 * (vm/specialized_dispatch.ts) and compiled mode (vm/compiled_mode.ts).
 *
 * Under a Content-Security-Policy without `'unsafe-eval'`, `new Function`
 * throws an `EvalError`, and the browser also reports the attempt as a
 * `securitypolicyviolation` (an event, and a report to the policy's
 * `report-uri` / `report-to` endpoint if it names one). Every VM function of
 * every VM would try again and be refused again: dozens of identical
 * reports for one page. So the first `EvalError` is remembered for the rest
 * of the realm, and later requests return null without trying: one report
 * per page, and the generic loop runs everything (same results, slower).
 * The flag lives on `globalThis` (ground/shared.ts), so a second copy of
 * the library in the same page does not try again either.
 *
 * Other errors (a `SyntaxError` would be a bug in the emitter) do not set
 * the flag: that one function stays on the generic loop, and the next is
 * tried.
 *
 * @module
 */

import { shared } from "../ground/shared.ts";

/** Whether this realm refused `new Function` once. */
const evalState: { refused: boolean } = shared("relaxvm.evalRefused.v1", () => ({
  refused: false,
}));

/**
 * `new Function(...params, body)`, or null where generated code cannot run:
 * this realm refused `new Function` before (CSP), refuses it now (the first
 * `EvalError`, remembered), or the source does not compile.
 */
export function makeFunction(
  params: readonly string[],
  body: string,
): ((...args: unknown[]) => unknown) | null {
  if (evalState.refused) return null;
  try {
    return new Function(...params, body) as (...args: unknown[]) => unknown;
  } catch (e) {
    if (e instanceof EvalError) evalState.refused = true;
    return null;
  }
}

/** Whether this realm refused `new Function` (a CSP without `'unsafe-eval'`). */
export function evalRefused(): boolean {
  return evalState.refused;
}

/**
 * Forgets a refusal, so the next `makeFunction` tries again. For tests that
 * simulate a refusing realm.
 */
export function resetEvalRefused(): void {
  evalState.refused = false;
}
