/**
 * VM construction time on a branching program (issue target: linear in
 * program size, ≤ 50 ms per 10,000 instructions).
 *
 * The program, `branches(x)` for K: K registers computed from `x`, then K
 * `If`s, each testing one of them and jumping to a shared exit block when it
 * is zero, then a chain of adds that reads all K. All K registers are live
 * across every `If`, and the exit block releases all of them on entry: the
 * shape that made construction cubic (liveness visited blocks in the wrong
 * order) and the generated source quadratic (the exit's releases were copied
 * onto every jump edge). The program has 3K + 2 instructions.
 *
 *   deno run bench/construction_bench.ts
 *
 * @module
 */

import { ExecBuilder, type Executable, registerFunc, VirtualMachine } from "../mod.ts";
import { loadReport, type VirtualMachineOptions } from "../vm/virtual_machine.ts";
import { median } from "./_stats.ts";

registerFunc("bench.branch_add", (a: number, b: number) => a + b, { override: true });

/** The branching program of `k` `If`s over `k` live registers. */
export function branchingProgram(k: number): Executable {
  const ib = new ExecBuilder();
  ib.function("branches", { num_inputs: 1 }, () => {
    // pc 0..k-1: r[1+i] = x + i
    for (let i = 0; i < k; i++) {
      ib.emit_call("bench.branch_add", [ib.r(0), ib.imm(i)], { dst: ib.r(1 + i) });
    }
    // pc k..2k-1: If r[1+i] falls through, else jumps to the exit at pc 3k+1
    for (let i = 0; i < k; i++) ib.emit_if(ib.r(1 + i), 3 * k + 1 - (k + i));
    // pc 2k..3k-1: acc = r1 + r2 + … (acc in r[k+1])
    ib.emit_call("bench.branch_add", [ib.r(1), ib.imm(0)], { dst: ib.r(k + 1) });
    for (let i = 1; i < k; i++) {
      ib.emit_call("bench.branch_add", [ib.r(k + 1), ib.r(1 + i)], { dst: ib.r(k + 1) });
    }
    ib.emit_ret(ib.r(k + 1)); // pc 3k
    ib.emit_ret(ib.r(0)); // pc 3k+1: the exit
  });
  return ib.get();
}

/** Number of instructions of `branchingProgram(k)`. */
export function branchingInstructions(k: number): number {
  return 3 * k + 2;
}

/** Median ms of `new VirtualMachine(ex, cpu, options)` over `rounds`. */
export function constructionMs(
  ex: Executable,
  options: VirtualMachineOptions,
  rounds: number,
): number {
  const times: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    new VirtualMachine(ex, undefined, options);
    times.push(performance.now() - t0);
  }
  return median(times);
}

if (import.meta.main) {
  const ks = Deno.args.length > 0 ? Deno.args.map(Number) : [500, 1000, 2000, 4000];
  const modes: [string, VirtualMachineOptions][] = [
    ["generic loop", { execution: "generic" }],
    ["specialized", { execution: "specialized" }],
    ["compiled mode (default)", { execution: "compiled" }],
  ];
  // Warm the loader up, so the table shows steady-state times rather than V8's first runs.
  const small = branchingProgram(250);
  for (const [, options] of modes) constructionMs(small, options, 10);
  console.log(
    "VM construction of the branching program (K Ifs over K live registers); " +
      "ms, ms per 10,000 instructions, generated JS characters per code word",
  );
  console.log(`| K | instructions | ${modes.map(([m]) => m).join(" | ")} |`);
  console.log(`| ---: | ---: | ${modes.map(() => "---:").join(" | ")} |`);
  for (const k of ks) {
    const ex = branchingProgram(k);
    const n = branchingInstructions(k);
    const cells: string[] = [];
    for (const [, options] of modes) {
      const ms = constructionMs(ex, options, k <= 1000 ? 15 : 9);
      const vm = new VirtualMachine(ex, undefined, options);
      await vm.invoke("branches", 1); // compiled mode writes what it could not compile then
      const [report] = loadReport(vm);
      const perWord = (report.sourceLength / report.words).toFixed(0);
      // Compiled mode leaves functions this large to the interpreter (vm/compiled_mode.ts).
      const fallback = options.mode === "compiled" && report.runsAs !== "compiled"
        ? ` (runs ${report.runsAs})`
        : "";
      cells.push(
        `${ms.toFixed(1)} ms, ${
          (ms / n * 10_000).toFixed(1)
        } per 10k, ${perWord} ch/word${fallback}`,
      );
    }
    console.log(`| ${k} | ${n} | ${cells.join(" | ")} |`);
  }
}
