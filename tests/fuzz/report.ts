/**
 * What a fuzz family reports: how many cases it tried and how each ended.
 * The last four counts are bugs and must be 0; `examples` keeps the first
 * few of each kind of bug so they can be replayed.
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
  /** Cases after which memory stayed allocated: a bug. */
  leaks: number;
  /** VM constructions over their time budget: a bug. */
  overBudget: number;
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
    examples: [],
  };
}

/** Records a bug of `kind` with a description, keeping the first few descriptions. */
export function recordBug(
  report: FamilyReport,
  kind: "otherExceptions" | "hangs" | "leaks" | "overBudget",
  description: string,
): void {
  report[kind]++;
  if (report.examples.length < 8) report.examples.push(`${kind}: ${description}`);
}

/** The number of bugs a report holds. */
export function bugCount(r: FamilyReport): number {
  return r.otherExceptions + r.hangs + r.leaks + r.overBudget;
}

/** The reports as a markdown table. */
export function reportTable(reports: readonly FamilyReport[]): string {
  const rows = reports.map((r) =>
    `| ${r.family} | ${r.tried} | ${r.loaded} | ${r.rejected} | ${r.otherExceptions} | ${r.hangs} | ${r.leaks} | ${r.overBudget} |`
  );
  return [
    "| family | tried | loaded | rejected | other exceptions | hangs | leaks | over-budget constructions |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...rows,
  ].join("\n");
}
