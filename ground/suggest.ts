/**
 * `suggestName()`: the "did you mean …?" for a misspelt name, such as a
 * packed function a program calls that is not registered (`vm.op.reluu`).
 * The builder warns with it at `get()`; a loader can use it in its error.
 *
 * @module
 */

/**
 * The edit distance between `a` and `b` counting insertions, deletions,
 * substitutions and swaps of two neighbouring characters (optimal string
 * alignment), or `limit + 1` as soon as it is certain to exceed `limit`.
 */
export function editDistance(a: string, b: string, limit = Infinity): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let before = new Array<number>(b.length + 1).fill(0);
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  let current = new Array<number>(b.length + 1).fill(0);
  for (let i = 1; i <= a.length; i++) {
    current[0] = i;
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, before[j - 2] + 1);
      }
      current[j] = d;
      if (d < best) best = d;
    }
    if (best > limit) return limit + 1;
    [before, previous, current] = [previous, current, before];
  }
  return previous[b.length];
}

/**
 * The candidate `name` was most likely meant to be, or `undefined` when none
 * is close. A candidate that differs only in case, or that ends with
 * `.name` (`relu` for `vm.op.relu`), wins; otherwise the nearest by edit
 * distance, if it is within about a third of the name's length (at least
 * 2, so short names get a suggestion for one or two typos). Ties go to the
 * candidate that comes first.
 *
 * @example
 * ```ts
 * import { suggestName } from "./suggest.ts";
 * import { assertEquals } from "@std/assert";
 *
 * const names = ["vm.op.add", "vm.op.relu"];
 * assertEquals(suggestName("vm.op.reluu", names), "vm.op.relu");
 * assertEquals(suggestName("relu", names), "vm.op.relu");
 * assertEquals(suggestName("my.func", names), undefined);
 * ```
 */
export function suggestName(name: string, candidates: Iterable<string>): string | undefined {
  const lower = name.toLowerCase();
  const limit = Math.max(2, Math.floor(name.length / 3));
  let best: string | undefined, bestDistance = limit + 1;
  for (const candidate of candidates) {
    if (candidate === name) continue;
    if (candidate.toLowerCase() === lower || candidate.endsWith(`.${name}`)) return candidate;
    const d = editDistance(name, candidate, Math.min(limit, bestDistance - 1));
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}
