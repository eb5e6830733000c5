/**
 * What a fuzz family reports: how many cases it tried and how each ended.
 * The last five counts are bugs and must be 0; `examples` keeps the first
 * few bugs so they can be replayed.
 *
 * @module
 */

/** Counts of one family's run. */
export interface FamilyReport {
  /** The family's name. */
  family: string;
  /** Cases tried. */
  tried: number;
  /** Cases the library accepted (loaded, ran, returned). */
  loaded: number;
  /** Cases the library rejected with its own error class, as it should. */
  rejected: number;
  /** Exceptions of any other kind: a bug. */
  otherExceptions: number;
  /** Cases that took longer than the family's time budget: a bug. */
  hangs: number;
  /**
   * Cases after which memory stayed allocated: a bug. (Host memory is
   * checked for growth only: the garbage collector's safety net may free
   * tensors of earlier cases at any time.)
   */
  leaks: number;
  /** VM constructions over their time budget: a bug. */
  overBudget: number;
  /**
   * Wrong results: the dispatch forms disagreed, or a value was malformed (a
   * tensor or shape with a negative or fractional dimension): a bug.
   */
  wrong: number;
  /** The first few bugs, for replaying: seed, case number and what happened. */
  examples: string[];
}

/** A report with every count at zero. */
export function emptyReport(family: string): FamilyReport {
  return {
    family,
    tried: 0,
    loaded: 0,
    rejected: 0,
    otherExceptions: 0,
    hangs: 0,
    leaks: 0,
    overBudget: 0,
    wrong: 0,
    examples: [],
  };
}

/** Records a bug of `kind` with a description, keeping the first few descriptions. */
export function recordBug(
  report: FamilyReport,
  kind: "otherExceptions" | "hangs" | "leaks" | "overBudget" | "wrong",
  description: string,
): void {
  report[kind]++;
  if (report.examples.length < 8) report.examples.push(`${kind}: ${description}`);
}

/** The number of bugs a report holds. */
export function bugCount(r: FamilyReport): number {
  return r.otherExceptions + r.hangs + r.leaks + r.overBudget + r.wrong;
}

/** The reports as a markdown table. */
export function reportTable(reports: readonly FamilyReport[]): string {
  const rows = reports.map((r) =>
    `| ${r.family} | ${r.tried} | ${r.loaded} | ${r.rejected} | ${r.otherExceptions} | ${r.hangs} | ${r.leaks} | ${r.overBudget} | ${r.wrong} |`
  );
  return [
    "| family | tried | loaded | rejected | other exceptions | hangs | leaks | over-budget constructions | wrong results |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...rows,
  ].join("\n");
}

/**
 * The cases to run: `[index, seed]` for each, every case with its own seed
 * drawn from `rand`, so one case can be replayed alone: set `FUZZ_CASE` to
 * its index (with the same `--seed` and `--cases`).
 */
export function* caseSeeds(
  rand: { int(n: number): number },
  cases: number,
): Generator<[number, number]> {
  const only = Number(Deno.env.get("FUZZ_CASE") ?? NaN);
  for (let i = 0; i < cases; i++) {
    const seed = rand.int(2 ** 31);
    if (Number.isNaN(only) || only === i) yield [i, seed];
  }
}

/** Settles `p` or gives up after `ms`: "hang". */
export async function settle(p: Promise<unknown>, ms: number): Promise<
  { value: unknown } | { error: unknown } | "hang"
> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"hang">((resolve) => timer = setTimeout(() => resolve("hang"), ms));
  try {
    return await Promise.race([
      p.then((value) => ({ value }), (error) => ({ error })),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
