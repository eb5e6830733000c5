/**
 * Dispatch cost per `Call` on a program with real register traffic, against
 * plain JavaScript baselines measured in the same process.
 *
 * The program: 1000 calls to 8 trivial 2-argument packed functions over 14
 * live registers. Call i reads the register written by call i−1 and the one
 * written 13 calls earlier, and writes register `2 + i mod 14`, so every value
 * flows into later calls and liveness releases one register after each call.
 * (bench/call_overhead.ts measures the best case, where nothing flows.)
 *
 * Baselines, built from the same call list:
 *
 * - the plain JS table loop: `regs[dst[i]] = table[f[i]](regs[a[i]], regs[b[i]])`
 * - straight-line JS emitted with `new Function`: `r5 = f3(r4, r1); …`
 *
 * Prints one markdown table; ratios are against the table loop (interpreter)
 * and against straight-line JS (compiled mode).
 *
 *   deno run bench/dispatch_bench.ts
 *
 * @module
 */

import { ExecBuilder, type Executable, registerFunc, VirtualMachine } from "../mod.ts";
import type { VirtualMachineOptions } from "../vm/virtual_machine.ts";
import { median } from "./_stats.ts";

/** Number of calls in the program. */
export const CALLS = 1000;
/** Registers the calls cycle through (besides the two inputs). */
export const LIVE = 14;

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
table.forEach((fn, i) => registerFunc(`bench.traffic${i}`, fn, { override: true }));

/** The call list: function, two argument registers and destination of each call. */
export interface CallList {
  fn: Int32Array;
  a: Int32Array;
  b: Int32Array;
  dst: Int32Array;
  /** The register returned. */
  ret: number;
}

/** Call i: `dst = 2 + i mod 14 ← op_{i mod 8}(reg of call i−1, reg of call i−13)`. */
export function callList(): CallList {
  const fn = new Int32Array(CALLS), a = new Int32Array(CALLS), b = new Int32Array(CALLS);
  const dst = new Int32Array(CALLS);
  const written = (i: number, input: number) => (i < 0 ? input : 2 + (i % LIVE));
  for (let i = 0; i < CALLS; i++) {
    fn[i] = i % table.length;
    a[i] = written(i - 1, 0);
    b[i] = written(i - (LIVE - 1), 1);
    dst[i] = written(i, 0);
  }
  return { fn, a, b, dst, ret: dst[CALLS - 1] };
}

/** The VM program for the call list: function `traffic(x, y)`. */
export function trafficProgram(liveness = true): Executable {
  const calls = callList();
  const ib = new ExecBuilder();
  ib.function("traffic", { num_inputs: 2 }, () => {
    for (let i = 0; i < CALLS; i++) {
      ib.emit_call(`bench.traffic${calls.fn[i]}`, [ib.r(calls.a[i]), ib.r(calls.b[i])], {
        dst: ib.r(calls.dst[i]),
      });
    }
    ib.emit_ret(ib.r(calls.ret));
  });
  return ib.get({ liveness });
}

/** Baseline 1: the same calls from a plain JS loop over the call list and a register array. */
export function tableLoop(calls: CallList): (x: number, y: number) => unknown {
  const { fn, a, b, dst, ret } = calls;
  return (x, y) => {
    const regs: unknown[] = [];
    for (let r = 0; r < 2 + LIVE; r++) regs.push(undefined);
    regs[0] = x;
    regs[1] = y;
    for (let i = 0; i < CALLS; i++) {
      regs[dst[i]] = table[fn[i]](regs[a[i]] as number, regs[b[i]] as number);
    }
    return regs[ret];
  };
}

/** Baseline 2: straight-line JS, one statement per call, registers as locals. */
export function straightLine(calls: CallList): (x: number, y: number) => unknown {
  let body = `let ${Array.from({ length: LIVE }, (_, k) => `r${k + 2}`).join(", ")};\n`;
  for (let i = 0; i < CALLS; i++) {
    body += `r${calls.dst[i]} = f${calls.fn[i]}(r${calls.a[i]}, r${calls.b[i]});\n`;
  }
  body += `return r${calls.ret};`;
  const names = table.map((_, i) => `f${i}`);
  return new Function(...names, `return function straight(r0, r1) {\n${body}\n};`)(
    ...table,
  ) as (x: number, y: number) => unknown;
}

/**
 * ns per call of each runner: a warm-up of `warmupMs` in turns (V8 optimizes
 * in background threads; a function of a thousand calls takes it a good part
 * of a second), then `rounds` rounds in which each runner runs `perRound`
 * times, in turn, so that noise from other processes reaches all of them
 * alike. Medians over rounds.
 */
export async function measureInTurns(
  runs: (() => unknown)[],
  { warmupMs = 8000, rounds = 21, perRound = 300 } = {},
): Promise<number[]> {
  const t0 = performance.now();
  while (performance.now() - t0 < warmupMs) {
    for (const run of runs) for (let i = 0; i < 50; i++) await run();
  }
  const samples: number[][] = runs.map(() => []);
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < runs.length; k++) {
      const run = runs[k];
      const start = performance.now();
      for (let i = 0; i < perRound; i++) await run();
      samples[k].push(((performance.now() - start) * 1e6) / (perRound * CALLS));
    }
  }
  return samples.map(median);
}

/**
 * From load to full speed: runs `run` in batches of `batch` for `ms`, and
 * returns the time from the start until a batch first ran within 1.25× of
 * the speed of the last second's batches, with the invocations it took.
 */
export async function timeToSpeed(
  run: () => unknown,
  { ms = 4000, batch = 20 } = {},
): Promise<{ ms: number; invocations: number; steadyNs: number }> {
  const series: { at: number; ns: number }[] = [];
  const t0 = performance.now();
  let now = t0;
  while (now - t0 < ms) {
    const start = performance.now();
    for (let i = 0; i < batch; i++) await run();
    now = performance.now();
    series.push({ at: now - t0, ns: ((now - start) * 1e6) / (batch * CALLS) });
  }
  const steadyNs = median(series.filter((p) => p.at > ms - 1000).map((p) => p.ns));
  const first = series.findIndex((p) => p.ns <= 1.25 * steadyNs);
  return { ms: series[first].at, invocations: (first + 1) * batch, steadyNs };
}

interface Variant {
  name: string;
  run: (x: number, y: number) => unknown;
  /** Which baseline its ratio is against. */
  baseline: "table" | "straight" | null;
}

if (import.meta.main) {
  const calls = callList();
  // First, before V8 has seen any of the generated code: what loading costs.
  console.log("From load to full speed (the register-traffic program, liveness on)");
  console.log("| form | new VirtualMachine (median of 7) | until within 1.25× of full speed |");
  console.log("| --- | ---: | ---: |");
  const forms: [string, VirtualMachineOptions][] = [
    ["specialized dispatch", { execution: "specialized" }],
    ["compiled mode (default)", { execution: "compiled" }],
  ];
  // Loads alternate between the forms, so that neither pays alone for warming up the loader.
  const ex = trafficProgram();
  const loads: number[][] = forms.map(() => []);
  for (let i = 0; i < 7; i++) {
    forms.forEach(([, options], k) => {
      const t0 = performance.now();
      new VirtualMachine(ex, undefined, options);
      loads[k].push(performance.now() - t0);
    });
  }
  for (const [k, [form, options]] of forms.entries()) {
    const f = new VirtualMachine(ex, undefined, options).get("traffic");
    const warm = await timeToSpeed(() => f(7, 3));
    console.log(
      `| ${form} | ${median(loads[k]).toFixed(1)} ms | ${
        warm.ms.toFixed(0)
      } ms (${warm.invocations} runs; then ${warm.steadyNs.toFixed(2)} ns per call) |`,
    );
  }
  console.log();

  const vmFor = (options: VirtualMachineOptions, liveness = true) =>
    new VirtualMachine(trafficProgram(liveness), undefined, options).get("traffic");
  const variants: Variant[] = [
    { name: "plain JS table loop", run: tableLoop(calls), baseline: null },
    { name: "straight-line JS (`new Function`)", run: straightLine(calls), baseline: null },
    {
      name: "interpreter, specialized dispatch",
      run: vmFor({ execution: "specialized" }),
      baseline: "table",
    },
    { name: "interpreter, generic loop", run: vmFor({ execution: "generic" }), baseline: "table" },
    {
      name: "interpreter, specialized, liveness off",
      run: vmFor({ execution: "specialized" }, false),
      baseline: "table",
    },
    {
      name: "compiled mode (default)",
      run: vmFor({ execution: "compiled" }),
      baseline: "straight",
    },
    {
      name: "compiled mode, liveness off",
      run: vmFor({ execution: "compiled" }, false),
      baseline: "straight",
    },
  ];
  const expected = variants[0].run(7, 3);
  for (const v of variants) {
    const got = await v.run(7, 3);
    if (!Object.is(got, expected)) throw new Error(`${v.name} computed ${got}, not ${expected}`);
  }
  const times = await measureInTurns(variants.map((v) => () => v.run(7, 3)));
  const ns = new Map(variants.map((v, i) => [v.name, times[i]]));
  const base = {
    table: ns.get(variants[0].name)!,
    straight: ns.get(variants[1].name)!,
  };
  console.log(
    `Dispatch with register traffic: ${CALLS} calls over ${LIVE} live registers, liveness on`,
  );
  console.log("| what | ns per call | vs table loop | vs straight-line JS |");
  console.log("| --- | ---: | ---: | ---: |");
  for (const v of variants) {
    const t = ns.get(v.name)!;
    console.log(
      `| ${v.name} | ${t.toFixed(2)} | ${(t / base.table).toFixed(2)}× | ${
        (t / base.straight).toFixed(2)
      }× |`,
    );
  }
}
