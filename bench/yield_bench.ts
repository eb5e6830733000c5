/**
 * What yielding to the event loop costs a call that loops (issue 27,
 * finding 8): a VM function counting to N in a loop of three instructions,
 * about 400 ms a run, with `yieldIntervalMs` 10 (the default), 20 and
 * Infinity (never), in each execution form, the settings taking turns. Also
 * how long after a timer's `abort()` a looping call stops, and how many ticks
 * of a 5 ms interval land while it runs.
 *
 *   deno run bench/yield_bench.ts
 *
 * @module
 */

import { ExecBuilder, type Execution, registerFunc, VirtualMachine } from "../mod.ts";
import { median } from "./_stats.ts";

registerFunc("bench.yield.add", (a: number, b: number) => a + b, { override: true });
registerFunc("bench.yield.lt", (a: number, b: number) => a < b, { override: true });

/** `spin(n)`: counts to n (Infinity: forever) and returns the count. */
function spinProgram() {
  const ib = new ExecBuilder();
  ib.function("spin", { num_inputs: 1 }, () => {
    ib.emit_call("bench.yield.add", [ib.imm(0), ib.imm(0)], { dst: ib.r(1) });
    ib.label("top");
    ib.emit_call("bench.yield.lt", [ib.r(1), ib.r(0)], { dst: ib.r(2) });
    ib.emit_if(ib.r(2), "done");
    ib.emit_call("bench.yield.add", [ib.r(1), ib.imm(1)], { dst: ib.r(1) });
    ib.emit_goto("top");
    ib.label("done");
    ib.emit_ret(ib.r(1));
  });
  return ib.get();
}

const INTERVALS = [10, 20, Infinity];
const FORMS: Execution[] = ["compiled", "specialized", "generic"];
/** Counts that take about 400 ms in each form on the development machine. */
const COUNT: Record<Execution, number> = {
  compiled: 40_000_000,
  specialized: 20_000_000,
  generic: 5_000_000,
};

if (import.meta.main) {
  const ex = spinProgram();
  console.log("A loop of 3 instructions, ms per run (median of 7, settings in turns)");
  console.log(
    `| form | count | ${INTERVALS.map((i) => `yieldIntervalMs ${i}`).join(" | ")} | cost of 10 |`,
  );
  console.log(`| --- | ---: | ${INTERVALS.map(() => "---:").join(" | ")} | ---: |`);
  for (const form of FORMS) {
    const vms = INTERVALS.map((yieldIntervalMs) =>
      new VirtualMachine(ex, undefined, { execution: form, yieldIntervalMs })
    );
    const n = COUNT[form];
    for (const vm of vms) await vm.invoke("spin", n / 10); // warm up
    const samples: number[][] = INTERVALS.map(() => []);
    for (let round = 0; round < 7; round++) {
      for (let k = 0; k < vms.length; k++) {
        const t0 = performance.now();
        await vms[k].invoke("spin", n);
        samples[k].push(performance.now() - t0);
      }
    }
    const ms = samples.map(median);
    console.log(
      `| ${form} | ${n.toLocaleString("en-US")} | ${ms.map((m) => m.toFixed(0)).join(" | ")} | ${
        ((ms[0] / ms[2] - 1) * 100).toFixed(0)
      }% |`,
    );
    for (const vm of vms) vm.dispose();
  }

  console.log();
  console.log("An endless loop under a signal that a timer aborts after 50 ms (default interval)");
  console.log(
    "| form | abort landed after (ms, median of 5) | ticks of a 5 ms interval meanwhile |",
  );
  console.log("| --- | ---: | ---: |");
  for (const form of FORMS) {
    using vm = new VirtualMachine(ex, undefined, { execution: form, timeoutMs: 5000 });
    const landed: number[] = [], ticked: number[] = [];
    for (let round = 0; round < 5; round++) {
      const controller = new AbortController();
      let ticks = 0;
      const interval = setInterval(() => ticks++, 5);
      let aborted = 0;
      setTimeout(() => {
        aborted = performance.now();
        controller.abort();
      }, 50);
      await vm.with({ signal: controller.signal }).invoke("spin", Infinity).catch(() => {});
      landed.push(performance.now() - aborted);
      clearInterval(interval);
      ticked.push(ticks);
    }
    console.log(`| ${form} | ${median(landed).toFixed(1)} | ${median(ticked)} |`);
  }
}
