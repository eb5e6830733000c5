/**
 * WebGPU operator benchmark: relaxvm's `vm.op.matmul` (512, 1024) and
 * `vm.op.add` (16M floats), each run as a one-instruction VM function on
 * `await webgpu()`, against TensorFlow.js's `tfjs-backend-webgpu` on the same
 * adapter, end to end: the op plus reading the result back to the host.
 *
 * ```sh
 * deno run -A bench/webgpu_ops_bench.ts           # the table
 * deno run -A bench/webgpu_ops_bench.ts --quick   # without matmul 1024
 * ```
 *
 * Under `deno bench` it registers small cases only (matmul 256, add 1M).
 *
 * Runs of the two libraries are interleaved, so drift on a shared machine
 * hits both; medians are reported. Inputs are uploaded once, before timing.
 * Targets (the issue): matmul ≥ 1.5× TF.js, add ≥ 1.0×.
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import * as tf from "npm:@tensorflow/tfjs-core@4.22.0";
// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import "npm:@tensorflow/tfjs-backend-webgpu@4.22.0";
import { ExecBuilder, type NDArray, tensor, VirtualMachine, webgpu } from "../mod.ts";
import { randomValues } from "./_random.ts";
import { median } from "./_stats.ts";

interface Case {
  name: string;
  /** Floating-point operations per run, for GFLOP/s (0: not reported; an add is memory-bound). */
  flops: number;
  runs: number;
  target: number;
  relaxvm: () => Promise<void>;
  tfjs: () => Promise<void>;
}

const gpu = await webgpu();
tf.enableProdMode();
await tf.setBackend("webgpu");
await tf.ready();

/** A VM whose `main(a, b)` calls `op` once. */
function oneOpVM(op: string): VirtualMachine {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 2 }, () => {
    ib.emit_call(op, [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  return new VirtualMachine(ib.get(), gpu);
}

function makeCase(
  name: string,
  op: string,
  shape: number[],
  flops: number,
  runs: number,
  target: number,
): Case {
  const n = shape.reduce((a, b) => a * b, 1);
  const av = randomValues(n, 1), bv = randomValues(n, 2);
  const a = tensor(av, { shape, device: gpu }), b = tensor(bv, { shape, device: gpu });
  const ta = tf.tensor(av, shape), tb = tf.tensor(bv, shape);
  const vm = oneOpVM(op);
  const tfOp = op === "vm.op.matmul"
    ? (x: tf.Tensor, y: tf.Tensor) => tf.matMul(x as tf.Tensor2D, y as tf.Tensor2D)
    : tf.add;
  return {
    name,
    flops,
    runs,
    target,
    relaxvm: async () => {
      using out = await vm.invoke("main", a, b) as NDArray;
      await out.data();
    },
    tfjs: async () => {
      const c = tfOp(ta, tb);
      await c.data();
      c.dispose();
    },
  };
}

async function time(fn: () => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function printTable(quick: boolean): Promise<void> {
  const cases: Case[] = [
    makeCase("matmul 512×512", "vm.op.matmul", [512, 512], 2 * 512 ** 3, 9, 1.5),
    ...(quick
      ? []
      : [makeCase("matmul 1024×1024", "vm.op.matmul", [1024, 1024], 2 * 1024 ** 3, 5, 1.5)]),
    makeCase("add 16M floats", "vm.op.add", [1 << 24], 0, 7, 1.0),
  ];
  console.log(`adapter: ${gpu.adapter.info.description || gpu.adapter.info.vendor}`);
  console.log("| case | relaxvm ms | tfjs-webgpu ms | speedup | relaxvm GFLOP/s | target | met |");
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | --- |");
  for (const c of cases) {
    // Warm up both: shader compilation, buffer pools, staging buffers.
    for (let i = 0; i < 2; i++) {
      await c.relaxvm();
      await c.tfjs();
    }
    const ours: number[] = [], theirs: number[] = [];
    for (let i = 0; i < c.runs; i++) {
      ours.push(await time(c.relaxvm));
      theirs.push(await time(c.tfjs));
    }
    const mo = median(ours), mt = median(theirs), ratio = mt / mo;
    console.log(
      `| ${c.name} | ${mo.toFixed(1)} | ${mt.toFixed(1)} | ${ratio.toFixed(2)}× | ${
        c.flops === 0 ? "—" : (c.flops / mo / 1e6).toFixed(2)
      } | ≥ ${c.target.toFixed(1)}× | ${ratio >= c.target ? "yes" : "NO"} |`,
    );
  }
}

if (import.meta.main) {
  await printTable(Deno.args.includes("--quick"));
} else {
  // `deno bench`: small cases, TF.js as the comparison in each group.
  for (
    const c of [
      makeCase("matmul 256×256", "vm.op.matmul", [256, 256], 0, 0, 0),
      makeCase("add 1M floats", "vm.op.add", [1 << 20], 0, 0, 0),
    ]
  ) {
    Deno.bench({ name: `relaxvm ${c.name}`, group: c.name, baseline: true, fn: c.relaxvm });
    Deno.bench({ name: `tfjs-webgpu ${c.name}`, group: c.name, fn: c.tfjs });
  }
}
