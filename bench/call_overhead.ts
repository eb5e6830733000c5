/**
 * Interpreter cost per `Call`, best case: a VM function of 1000 Calls to 8
 * different trivial 2-argument packed functions that all read `%0, %1` and
 * all write `%2`, against a plain JS loop calling the same 8 functions
 * through a table, in the same process. No value flows between calls and
 * liveness has nothing to release, so V8 folds most of the work away; this
 * is the floor of dispatch cost, not what programs see. The benchmark for
 * programs whose values flow between calls is bench/dispatch_bench.ts.
 *
 *   deno run bench/call_overhead.ts
 *
 * @module
 */

import { ExecBuilder, registerFunc, VirtualMachine } from "../mod.ts";
import { median } from "./_stats.ts";

const CALLS = 1000;
const table: ((a: number, b: number) => number)[] = [
  (a, b) => a + b,
  (a, b) => a - b,
  (a, b) => a * b,
  (a, b) => (a > b ? a : b),
  (a, b) => (a < b ? a : b),
  (a, b) => a ^ b,
  (a, b) => a & b,
  (a, b) => a | b,
];
table.forEach((fn, i) => registerFunc(`bench.op${i}`, fn, { override: true }));

/** The VM program: r2 = op_k(r0, r1) for k cycling through the table, 1000 times. */
export function buildCallProgram(
  execution: "specialized" | "generic" = "specialized",
): VirtualMachine {
  const ib = new ExecBuilder();
  ib.function("calls", { num_inputs: 2 }, () => {
    for (let i = 0; i < CALLS; i++) {
      ib.emit_call(`bench.op${i % 8}`, [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    }
    ib.emit_ret(ib.r(2));
  });
  return new VirtualMachine(ib.get(), undefined, { execution });
}

/** The baseline: the same 1000 calls from a plain JS loop through a table. */
export function plainLoop(a: number, b: number): number {
  let out = 0;
  for (let i = 0; i < CALLS; i++) out = table[i & 7](a, b);
  return out;
}

async function measure(run: () => unknown, rounds: number, perRound: number): Promise<number> {
  const samples: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    for (let i = 0; i < perRound; i++) await run();
    samples.push(((performance.now() - t0) * 1e6) / (perRound * CALLS));
  }
  return median(samples);
}

if (import.meta.main) {
  const specialized = buildCallProgram("specialized").get("calls");
  const generic = buildCallProgram("generic").get("calls");
  // Warm all three up so each runs optimized code.
  for (let i = 0; i < 3000; i++) {
    plainLoop(i, 3);
    await specialized(i, 3);
    await generic(i, 3);
  }
  const js = await measure(() => plainLoop(7, 3), 15, 2000);
  const fast = await measure(() => specialized(7, 3), 15, 2000);
  const slow = await measure(() => generic(7, 3), 15, 2000);
  console.log("Best case: 1000 calls that all read %0, %1 and write %2 (no register traffic)");
  console.log("| what | ns per call | vs plain JS |");
  console.log("| --- | ---: | ---: |");
  console.log(`| plain JS table loop | ${js.toFixed(2)} | 1.00× |`);
  console.log(
    `| relaxvm interpreter, specialized dispatch | ${fast.toFixed(2)} | ${
      (fast / js).toFixed(2)
    }× |`,
  );
  console.log(
    `| relaxvm interpreter, generic loop | ${slow.toFixed(2)} | ${(slow / js).toFixed(2)}× |`,
  );
}
