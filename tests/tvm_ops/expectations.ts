/**
 * Every case of the operator suite and the random-module differential that
 * does not pass, and why: the list `tvm_ops_test.ts` holds the run to. A
 * case that neither passes nor matches an entry here fails the test, so a
 * silent wrong answer cannot go unnoticed; an entry that no case of the
 * operator suite meets any more fails it too, so the list cannot go stale.
 *
 * @module
 */

import type { CaseResult, IndexEntry, Outcome, SuiteRun } from "./outcomes.ts";

/** What the adapter probe found (`SuiteRun` has it). */
export type Adapter = Pick<SuiteRun, "unsignedI32Remainder">;

/** One expected non-pass. */
export interface Expectation {
  /** Short label, used as the README table's footnote. */
  label: string;
  /** The cases it covers: matched against the case id (and a random module's chain). */
  cases: RegExp;
  /** What those cases do instead of passing. */
  outcome: "refused-at-load" | "export-refused" | "tvm-error" | "known-bug";
  /** Text the error must contain (a refusal names its kernel or host function and construct). */
  says: string;
  /** Why, in words: the README's note. */
  reason: string;
  /** For a known bug: what fixes it (a branch, an issue, upstream). */
  fixedBy?: string;
  /** Met only by random modules: not required to match a case of the operator suite. */
  randomOnly?: boolean;
  /** Applies only where `adapter_probe.ts` finds the adapter's unsigned i32 `%`. */
  needsUnsignedI32Remainder?: boolean;
}

/**
 * The list. Known bugs are the `known-bug` entries (KNOWN BUG in the README): a wrong
 * answer relaxvm gives without refusing, recorded here until the branch
 * named fixes it.
 */
export const EXPECTATIONS: readonly Expectation[] = [
  // --- TVM 0.27 itself does not compile these for WebGPU (relax.build raises). ---
  {
    label: "no-i64",
    cases: /\/(int64|float32->int64|int32->int64|int64->int32)$|^(take|gather|scatter)\//,
    outcome: "tvm-error",
    says: "CodeGenWebGPU: do not support i64",
    reason: "TVM's WebGPU codegen has no 64-bit integers (WGSL has none); int64 tensors, " +
      "int64 indices (take, gather_elements, scatter_elements) and argmax's int64 result fail " +
      "in relax.build",
  },
  {
    label: "argmax",
    cases: /^reduce\/arg(max|min)-/,
    outcome: "tvm-error",
    says: "InternalError",
    reason: "TVM's WebGPU build of argmax/argmin fails (InternalError on the int64 index of " +
      "its tuple reduction), even when the result is cast to int32",
  },
  {
    label: "i64-reduce",
    cases: /^reduce\/sum-axis-1\/.*\/int64$/,
    outcome: "tvm-error",
    says: "InternalError",
    reason: "TVM's WebGPU build of an int64 sum fails (InternalError on the int64 " +
      "cross-thread reduction buffer)",
  },
  {
    label: "i64-max",
    cases: /^reduce\/max-axis0,2\/.*\/int64$/,
    outcome: "tvm-error",
    says: "exceeds range of int32",
    reason: "TVM's WebGPU build of an int64 max narrows its identity, -2^63, to int32 and " +
      "fails",
  },
  {
    label: "group-conv",
    cases: /^conv[12]d\/conv[12]d-groups2\//,
    outcome: "tvm-error",
    says: "Cross-thread reduction requires",
    reason: "dlight's cross-thread reduction rule fails on grouped conv1d/conv2d (groups 2) " +
      "in relax.build",
  },
  {
    label: "sort-z",
    cases: /^sort\//,
    outcome: "tvm-error",
    says: "blockIdx.z is not supported in WebGPU",
    reason: "TVM's sort schedules a launch over blockIdx.z, which its WebGPU codegen refuses",
  },
  // --- The exporter refuses the host code (tools/tvm/export_webgpu.py, issue 28 item 4). ---
  {
    label: "attr-stmt",
    cases: /^scatter\/scatter_elements-axis0-i32\//,
    outcome: "export-refused",
    says: "unsupported statement AttrStmt",
    reason: "scatter_elements with int32 indices: its host function carries an AttrStmt " +
      "(a storage or thread annotation) that launch plans do not express",
  },
  {
    label: "scan-local",
    cases: /^cumsum\/cumprod-axis1\//,
    outcome: "export-refused",
    says: "of scope 'local' allocated on the host",
    reason: "cumprod (TVM's generic scan, not cumsum's) allocates each thread's scan indices " +
      "as `local` buffers in its host function and hands them to the kernel, where they are " +
      "one buffer every thread of the launch shares: the threads overwrite each other's " +
      "indices (relaxvm ran it to a wrong answer once the exporter stopped binding all the " +
      "unnamed scratch buffers as one)",
  },
  // --- Refused at load: relaxvm's loader names the kernel and the construct. ---
  {
    label: "no-f16",
    cases: /float16/,
    outcome: "refused-at-load",
    says: "float16",
    reason: "float16 tensors: host functions take float32, int32, uint32 and int64 tensors " +
      "(TVM's float16 kernels need the `shader-f16` feature, which the software adapter here " +
      "does not offer)",
  },
  {
    label: "no-bool",
    cases: /bool/,
    outcome: "refused-at-load",
    says: "bool",
    reason: "bool tensors as inputs or outputs: host functions do not take them, and TVM's " +
      "WebGPU codegen declares such a tensor `array<i8>`, a type WGSL does not have, so its " +
      "kernels would not compile either (a comparison fused into a cast or a where runs)",
  },
  {
    label: "int-min-literal",
    cases: /\/int32$|^random\//,
    outcome: "refused-at-load",
    says: "numeric literal not representable by target type",
    reason: "TVM writes int32's minimum as the WGSL literal -2147483648i (an int32 max " +
      "reduction's identity), which WGSL rejects: the kernel does not compile, and the load " +
      "names it",
  },
  // --- KNOWN BUGS: wrong answers with no refusal. The exporter fixes what TVM's WGSL gets wrong
  // (tools/tvm/tir_fixups.py, wgsl_literals.py, wgsl_scan.py); what is left is listed here.
  {
    label: "small-outputs",
    cases: /^random\/.*gelu/,
    outcome: "known-bug",
    says: "e-5 > 0.00001",
    reason: "precision, not a bug: random chains ending in gelu of inputs near -3 (outputs " +
      "near -1e-3; 2 of 1,000 modules, seed 28: m389, max-keep > negative > gelu > silu > " +
      "tanh > gelu, and m667, log_softmax > mean-keep > gelu) differ from TVM's llvm build by 1.9e-5 and 6.4e-5 of max|want|. TVM computes " +
      "gelu as x * (0.5 + 0.5 * erf(x / sqrt(2))), and near x = -3.3 the sum 1 + erf is about " +
      "1e-3: it cancels ten bits, so a last-bit difference in erf (6e-8 near -1, as between " +
      "the WGSL's fma-chained rational erf and LLVM's code for it) becomes 6e-5 of the output",
    fixedBy: "none: both builds round the same formula in float32; a gelu that does not " +
      "cancel (through erfc) would be TVM's to write",
    randomOnly: true,
  },
];

/** The first entry that covers `result` (of the case `entry`), if any. */
export function expectationFor(
  entry: IndexEntry,
  result: CaseResult,
  adapter: Adapter,
): Expectation | undefined {
  const outcome: Expectation["outcome"] | null = result.outcome === "mismatch" ||
      result.outcome === "run-error"
    ? "known-bug"
    : result.outcome === "pass"
    ? null
    : result.outcome;
  if (outcome === null) return undefined;
  const subject = entry.description === undefined ? entry.id : `${entry.id} ${entry.description}`;
  const covering = EXPECTATIONS.filter((e) =>
    e.outcome === outcome && e.cases.test(subject) &&
    (!e.needsUnsignedI32Remainder || adapter.unsignedI32Remainder)
  );
  // The one whose message the result gives; else the first (problemOf says what differs).
  return covering.find((e) => (result.message ?? "").includes(e.says)) ?? covering[0];
}

/** What is wrong with a case's result, or null when it passed or is on the list as it should be. */
export function problemOf(
  entry: IndexEntry,
  result: CaseResult,
  adapter: Adapter,
): string | null {
  if (result.outcome === "pass") return null;
  const e = expectationFor(entry, result, adapter);
  const what = `${entry.id}${entry.description ? ` (${entry.description})` : ""}: ` +
    `${result.outcome}: ${result.message ?? ""}`;
  if (e === undefined) {
    return result.outcome === "mismatch"
      ? `SILENT WRONG ANSWER, on no list: ${what}`
      : `not on the list of expected refusals: ${what}`;
  }
  if (!(result.message ?? "").includes(e.says)) {
    return `listed as ${e.label} (${e.outcome}), but the message does not say ` +
      `${JSON.stringify(e.says)}: ${what}`;
  }
  if (
    result.outcome === "refused-at-load" && !/kernels\["|host_functions\["/.test(result.message!)
  ) {
    return `refused at load without naming the kernel or host function: ${what}`;
  }
  return null;
}

/** The entries no result of the operator suite met (so the list has gone stale). */
export function unmetExpectations(
  entries: readonly IndexEntry[],
  results: readonly CaseResult[],
  adapter: Adapter,
): Expectation[] {
  const met = new Set<Expectation>();
  entries.forEach((entry, i) => {
    const e = expectationFor(entry, results[i], adapter);
    if (e !== undefined && problemOf(entry, results[i], adapter) === null) met.add(e);
  });
  return EXPECTATIONS.filter((e) =>
    !e.randomOnly && !met.has(e) &&
    !(e.needsUnsignedI32Remainder && !adapter.unsignedI32Remainder)
  );
}

/** The outcome as the README table names it. */
export function outcomeWord(outcome: Outcome): string {
  return outcome === "mismatch" || outcome === "run-error" ? "known bug" : outcome;
}
