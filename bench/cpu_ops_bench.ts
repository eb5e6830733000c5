/**
 * CPU operator benchmark: relaxvm's `vm.op.matmul` and `vm.op.add` against
 * TensorFlow.js's `tfjs-backend-cpu`, in the same process, end to end (the
 * op plus reading the result with `dataSync()`).
 *
 * Run it as a script for the comparison table (median of several runs,
 * relaxvm and TF.js runs interleaved so drift on a shared machine hits both):
 *
 * ```sh
 * deno run -A bench/cpu_ops_bench.ts           # matmul 256, 512, 1024; add 16M
 * deno run -A bench/cpu_ops_bench.ts --quick   # without matmul 1024
 * ```
 *
 * Under `deno bench` it registers small cases only (matmul 256, add 1M).
 *
 * When `mod.ts` exports `VirtualMachine` and `ExecBuilder`, the same ops are
 * also timed through a one-instruction VM function (`vm.invoke` plus
 * `dataSync()`), which adds the interpreter and the pooled allocator.
 *
 * @module
 */

import "../builtins/ops/operators.ts";
import "../builtins/cpu/backend.ts";
import * as tf from "@tensorflow/tfjs-core";
import "@tensorflow/tfjs-backend-cpu";
import { getGlobalFunc } from "../builtins/registry.ts";
import { cpu } from "../vm/device.ts";
import { type NDArray, tensor } from "../vm/ndarray.ts";
import { randomValues } from "./_random.ts";

// Production mode: no debug checks, and no "install tfjs-node" banner.
tf.enableProdMode();
await tf.setBackend("cpu");

/** One benchmark case. */
interface Case {
  name: string;
  /** Floating-point operations per run (matmul: 2·M·N·K; add: one per element). */
  flops: number;
  runs: number;
  relaxvm: () => void;
  tfjs: () => void;
  /** Through the VM, when one is available. */
  vm?: () => Promise<void>;
  dispose: () => void;
}

/** A one-instruction VM function calling `op`, when the VM exists; else `undefined`. */
async function vmRunner(
  op: string,
): Promise<((a: NDArray, b: NDArray) => Promise<NDArray>) | undefined> {
  try {
    // A computed specifier: the VM is written concurrently and may not exist yet.
    const specifier = "../mod.ts";
    // deno-lint-ignore no-explicit-any
    const mod: any = await import(specifier);
    if (mod.VirtualMachine === undefined || mod.ExecBuilder === undefined) return undefined;
    const ib = new mod.ExecBuilder();
    ib.function("main", { num_inputs: 2 }, () => {
      ib.emit_call(op, [ib.r(0), ib.r(1)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    const vm = new mod.VirtualMachine(ib.get(), cpu());
    return (a, b) => vm.invoke("main", a, b);
  } catch {
    return undefined;
  }
}

async function matmulCase(n: number, runs: number): Promise<Case> {
  const av = randomValues(n * n, 1), bv = randomValues(n * n, 2);
  const a = tensor(av, { shape: [n, n] }), b = tensor(bv, { shape: [n, n] });
  const ta = tf.tensor2d(av, [n, n]), tb = tf.tensor2d(bv, [n, n]);
  const matmul = getGlobalFunc("vm.op.matmul")!;
  const vm = await vmRunner("vm.op.matmul");
  return {
    name: `matmul ${n}×${n}`,
    flops: 2 * n ** 3,
    runs,
    relaxvm: () => {
      const out = matmul(a, b) as NDArray;
      out.dataSync();
      out.releaseIfUnowned();
    },
    tfjs: () => {
      const c = tf.matMul(ta, tb);
      c.dataSync();
      c.dispose();
    },
    vm: vm && (async () => {
      const out = await vm(a, b);
      out.dataSync();
      out.dispose();
    }),
    dispose: () => {
      a.dispose();
      b.dispose();
      ta.dispose();
      tb.dispose();
    },
  };
}

async function addCase(n: number, runs: number): Promise<Case> {
  const av = randomValues(n, 3), bv = randomValues(n, 4);
  const a = tensor(av), b = tensor(bv);
  const ta = tf.tensor1d(av), tb = tf.tensor1d(bv);
  const add = getGlobalFunc("vm.op.add")!;
  const vm = await vmRunner("vm.op.add");
  const millions = n / 2 ** 20;
  return {
    name: `add ${Number.isInteger(millions) ? `${millions}M` : n} floats`,
    flops: n,
    runs,
    relaxvm: () => {
      const out = add(a, b) as NDArray;
      out.dataSync();
      out.releaseIfUnowned();
    },
    tfjs: () => {
      const c = tf.add(ta, tb);
      c.dataSync();
      c.dispose();
    },
    vm: vm && (async () => {
      const out = await vm(a, b);
      out.dataSync();
      out.dispose();
    }),
    dispose: () => {
      a.dispose();
      b.dispose();
      ta.dispose();
      tb.dispose();
    },
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Times one case: a warm-up run each, then `runs` interleaved runs; medians in ms. */
async function measure(c: Case): Promise<{ relaxvm: number; tfjs: number; vm?: number }> {
  c.relaxvm();
  c.tfjs();
  await c.vm?.();
  const times = { relaxvm: [] as number[], tfjs: [] as number[], vm: [] as number[] };
  for (let r = 0; r < c.runs; r++) {
    let t0 = performance.now();
    c.relaxvm();
    times.relaxvm.push(performance.now() - t0);
    t0 = performance.now();
    c.tfjs();
    times.tfjs.push(performance.now() - t0);
    if (c.vm !== undefined) {
      t0 = performance.now();
      await c.vm();
      times.vm.push(performance.now() - t0);
    }
  }
  return {
    relaxvm: median(times.relaxvm),
    tfjs: median(times.tfjs),
    vm: c.vm === undefined ? undefined : median(times.vm),
  };
}

async function printTable(quick: boolean): Promise<void> {
  const makers = [
    () => matmulCase(256, 15),
    () => matmulCase(512, 9),
    ...(quick ? [] : [() => matmulCase(1024, 3)]),
    () => addCase(16 * 2 ** 20, 15),
  ];
  const header = [
    "case",
    "tfjs-cpu ms",
    "GFLOP/s",
    "relaxvm op ms",
    "GFLOP/s",
    "speedup",
    "via VM ms",
    "GFLOP/s",
    "speedup",
  ];
  const rows: string[][] = [];
  for (const make of makers) {
    const c = await make();
    const t = await measure(c);
    c.dispose();
    const gflops = (ms: number) => (c.flops / ms / 1e6).toFixed(2);
    const speedup = (ms: number) => `${(t.tfjs / ms).toFixed(2)}×`;
    rows.push([
      c.name,
      t.tfjs.toFixed(2),
      gflops(t.tfjs),
      t.relaxvm.toFixed(2),
      gflops(t.relaxvm),
      speedup(t.relaxvm),
      ...(t.vm === undefined
        ? ["n/a", "n/a", "n/a"]
        : [t.vm.toFixed(2), gflops(t.vm), speedup(t.vm)]),
    ]);
    console.error(`measured ${c.name}`);
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    `| ${
      cells.map((s, i) => (i === 0 ? s.padEnd(widths[i]) : s.padStart(widths[i]))).join(" | ")
    } |`;
  console.log(line(header));
  const rule = widths.map((w, i) => "-".repeat(w + 1) + (i === 0 ? "-" : ":"));
  console.log(`|${rule.join("|")}|`);
  for (const r of rows) console.log(line(r));
  console.log(
    "\nMedian of interleaved runs, each the op plus dataSync(). speedup = tfjs-cpu time / relaxvm\n" +
      'time. "relaxvm op" calls the packed function directly (outputs from the default naive\n' +
      'allocator: a fresh ArrayBuffer per call); "via VM" runs it in a VirtualMachine (pooled).',
  );
}

if (import.meta.main) {
  await printTable(Deno.args.includes("--quick"));
} else {
  // `deno bench`: small cases, TF.js as the comparison in each group.
  for (const c of [await matmulCase(256, 0), await addCase(2 ** 20, 0)]) {
    Deno.bench({ name: `relaxvm ${c.name}`, group: c.name, baseline: true, fn: c.relaxvm });
    Deno.bench({ name: `tfjs-cpu ${c.name}`, group: c.name, fn: c.tfjs });
  }
}
