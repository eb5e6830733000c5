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
 * The same ops are also timed through a one-instruction VM function
 * (`vm.invoke` plus `dataSync()`), which adds the interpreter and the pooled
 * allocator.
 *
 * @module
 */

import { installBuiltins } from "../builtins/install.ts";
// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import * as tf from "npm:@tensorflow/tfjs-core@4.22.0";
// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import "npm:@tensorflow/tfjs-backend-cpu@4.22.0";
import { getGlobalFunc } from "../ground/registry.ts";
import { cpu } from "../devices/cpu_device.ts";
import type { NDArray } from "../devices/ndarray.ts";
import { tensor } from "../devices/tensor.ts";
import { ExecBuilder, VirtualMachine } from "../mod.ts";
import { randomValues } from "./_random.ts";
import { median } from "./_stats.ts";

installBuiltins();

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
  /** Through a one-instruction VM function. */
  vm: () => Promise<void>;
  dispose: () => void;
}

/** A one-instruction VM function calling `op` on its two arguments. */
function vmRunner(op: string): (a: NDArray, b: NDArray) => Promise<NDArray> {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 2 }, () => {
    ib.emit_call(op, [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  const vm = new VirtualMachine(ib.get(), cpu());
  return async (a, b) => await vm.invoke("main", a, b) as NDArray;
}

/** `op` on two same-shaped random operands, in relaxvm and in TF.js (`tfOp`). */
function binaryCase(
  name: string,
  op: string,
  tfOp: (a: tf.Tensor, b: tf.Tensor) => tf.Tensor,
  shape: number[],
  flops: number,
  runs: number,
): Case {
  const size = shape.reduce((x, y) => x * y, 1);
  const av = randomValues(size, 1), bv = randomValues(size, 2);
  const a = tensor(av, { shape }), b = tensor(bv, { shape });
  const ta = tf.tensor(av, shape), tb = tf.tensor(bv, shape);
  const direct = getGlobalFunc(op)!;
  const viaVM = vmRunner(op);
  return {
    name,
    flops,
    runs,
    relaxvm: () => {
      const out = direct(a, b) as NDArray;
      out.dataSync();
      out.releaseIfUnowned();
    },
    tfjs: () => {
      const c = tfOp(ta, tb);
      c.dataSync();
      c.dispose();
    },
    vm: async () => {
      const out = await viaVM(a, b);
      out.dataSync();
      out.dispose();
    },
    dispose: () => {
      a.dispose();
      b.dispose();
      ta.dispose();
      tb.dispose();
    },
  };
}

const matmulCase = (n: number, runs: number) =>
  binaryCase(`matmul ${n}×${n}`, "vm.op.matmul", tf.matMul, [n, n], 2 * n ** 3, runs);

function addCase(n: number, runs: number): Case {
  const millions = n / 2 ** 20;
  const name = `add ${Number.isInteger(millions) ? `${millions}M` : n} floats`;
  return binaryCase(name, "vm.op.add", tf.add, [n], n, runs);
}

/** Times one case: a warm-up run each, then `runs` interleaved runs; medians in ms. */
async function measure(c: Case): Promise<{ relaxvm: number; tfjs: number; vm: number }> {
  c.relaxvm();
  c.tfjs();
  await c.vm();
  const times = { relaxvm: [] as number[], tfjs: [] as number[], vm: [] as number[] };
  for (let r = 0; r < c.runs; r++) {
    let t0 = performance.now();
    c.relaxvm();
    times.relaxvm.push(performance.now() - t0);
    t0 = performance.now();
    c.tfjs();
    times.tfjs.push(performance.now() - t0);
    t0 = performance.now();
    await c.vm();
    times.vm.push(performance.now() - t0);
  }
  return {
    relaxvm: median(times.relaxvm),
    tfjs: median(times.tfjs),
    vm: median(times.vm),
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
    const c = make();
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
      t.vm.toFixed(2),
      gflops(t.vm),
      speedup(t.vm),
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
  for (const c of [matmulCase(256, 0), addCase(2 ** 20, 0)]) {
    Deno.bench({ name: `relaxvm ${c.name}`, group: c.name, baseline: true, fn: c.relaxvm });
    Deno.bench({ name: `tfjs-cpu ${c.name}`, group: c.name, fn: c.tfjs });
  }
}
