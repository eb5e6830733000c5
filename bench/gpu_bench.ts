/**
 * `deno task bench:gpu`: relaxvm on the machine's WebGPU adapter against
 * TF.js's WebGPU backend on the same adapter and, where PyTorch with CUDA is
 * installed, PyTorch on the same GPU (bench/torch_reference.py) as the
 * hardware reference.
 *
 * Every per-op figure is a slope: one VM call (or one TF.js loop) runs the
 * op n₁ times and then n₂ times, each ending in one read back, and the time
 * per op is `(t(n₂) − t(n₁)) / (n₂ − n₁)`. Fixed costs — the wait for the
 * GPU, the read back, launching the call — cancel, so what remains is what
 * the GPU spends on the op. The fixed costs get rows of their own.
 *
 * ```sh
 * deno task bench:gpu                 # sizes for the adapter (small on a software adapter)
 * deno task bench:gpu --full          # the issue's sizes (4096³ matmul, 16M add), any adapter
 * deno task bench:gpu --torch t.json  # PyTorch figures from a file written elsewhere
 * ```
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

const gpu = await webgpu();
tf.enableProdMode();
await tf.setBackend("webgpu");
await tf.ready();

const software = gpu.adapter.info.isFallbackAdapter ||
  /llvmpipe|swiftshader/i.test(`${gpu.adapter.info.description} ${gpu.adapter.info.device}`);
const full = Deno.args.includes("--full") || (!software && !Deno.args.includes("--quick"));

/** One measured operation: how to make its inputs, and the op on both libraries. */
interface OpCase {
  name: string;
  op: "vm.op.matmul" | "vm.op.add";
  aShape: number[];
  bShape: number[];
  /** Floating-point operations per op (0: memory-bound, report bandwidth). */
  flops: number;
  /** Bytes an op must move at least (for GB/s). */
  bytes: number;
  /** Op counts for the slope. */
  counts: [number, number];
}

/** A VM function `ops(a, b)` calling `op` `n` times (each result is dead at once) and returning one more. */
function chainVM(op: string, n: number): VirtualMachine {
  const ib = new ExecBuilder();
  ib.function("ops", { num_inputs: 2 }, () => {
    for (let i = 0; i < n; i++) ib.emit_call(op, [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_call(op, [ib.r(0), ib.r(1)], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  return new VirtualMachine(ib.get(), gpu);
}

/** Median ms of `run()` over `rounds`, after two warm-up runs. */
async function timed(run: () => Promise<void>, rounds: number): Promise<number> {
  await run();
  await run();
  const times: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    await run();
    times.push(performance.now() - t0);
  }
  return median(times);
}

/** Per-op ms of relaxvm and TF.js for one case, by the slope. */
async function measureOp(c: OpCase, rounds: number): Promise<{ relaxvm: number; tfjs: number }> {
  const av = randomValues(c.aShape.reduce((x, y) => x * y, 1), 1);
  const bv = randomValues(c.bShape.reduce((x, y) => x * y, 1), 2);
  using a = tensor(av, { shape: c.aShape, device: gpu });
  using b = tensor(bv, { shape: c.bShape, device: gpu });
  const ta = tf.tensor(av, c.aShape), tb = tf.tensor(bv, c.bShape);
  const tfOp = c.op === "vm.op.matmul"
    ? (x: tf.Tensor, y: tf.Tensor) => tf.matMul(x as tf.Tensor2D, y as tf.Tensor2D)
    : tf.add;
  const ours: number[] = [], theirs: number[] = [];
  for (const n of c.counts) {
    const vm = chainVM(c.op, n);
    ours.push(
      await timed(async () => {
        using out = await vm.invoke("ops", a, b) as NDArray;
        await out.data();
      }, rounds),
    );
    theirs.push(
      await timed(async () => {
        let last = tfOp(ta, tb);
        for (let i = 0; i < n; i++) {
          last.dispose();
          last = tfOp(ta, tb);
        }
        await last.data();
        last.dispose();
      }, rounds),
    );
  }
  ta.dispose();
  tb.dispose();
  const dn = c.counts[1] - c.counts[0];
  return { relaxvm: (ours[1] - ours[0]) / dn, tfjs: (theirs[1] - theirs[0]) / dn };
}

/** The figure for `ms` per op: TFLOP/s for compute-bound cases, µs and GB/s for memory-bound ones. */
function figure(c: OpCase, ms: number | undefined): string {
  if (ms === undefined || !(ms > 0)) return "—";
  if (c.flops > 0) {
    const tflops = c.flops / ms / 1e9;
    return tflops >= 1 ? `${tflops.toFixed(1)} TFLOP/s` : `${(tflops * 1000).toFixed(1)} GFLOP/s`;
  }
  return `${(ms * 1000).toFixed(0)} µs (${(c.bytes / ms / 1e6).toFixed(0)} GB/s)`;
}

/** PyTorch's per-op ms by case name: from `--torch file`, or by running the reference script. */
async function torchFigures(): Promise<Record<string, number> | null> {
  const at = Deno.args.indexOf("--torch");
  if (at >= 0) return JSON.parse(await Deno.readTextFile(Deno.args[at + 1])).ops;
  try {
    const script = new URL("./torch_reference.py", import.meta.url).pathname;
    const { code, stdout } = await new Deno.Command("python3", {
      args: [script, full ? "--full" : "--quick"],
      stdout: "piped",
      stderr: "null",
    }).output();
    if (code !== 0) return null;
    return JSON.parse(new TextDecoder().decode(stdout)).ops;
  } catch {
    return null; // no python3 here
  }
}

const N = full ? 4096 : 512;
const K = full ? 4096 : 1024;
const ADD = full ? 1 << 24 : 1 << 22;
const cases: OpCase[] = [
  {
    name: `matmul ${N}³ f32`,
    op: "vm.op.matmul",
    aShape: [N, N],
    bShape: [N, N],
    flops: 2 * N ** 3,
    bytes: 12 * N * N,
    counts: full ? [2, 6] : [1, 5],
  },
  {
    name: "matmul 256³ f32",
    op: "vm.op.matmul",
    aShape: [256, 256],
    bShape: [256, 256],
    flops: 2 * 256 ** 3,
    bytes: 12 * 256 * 256,
    counts: [4, 24],
  },
  {
    name: `GEMV 1×${K} · ${K}×${K} f32`,
    op: "vm.op.matmul",
    aShape: [1, K],
    bShape: [K, K],
    flops: 0,
    bytes: 4 * K * K,
    counts: [4, 24],
  },
  {
    name: `add ${ADD >> 20}M f32`,
    op: "vm.op.add",
    aShape: [ADD],
    bShape: [ADD],
    flops: 0,
    bytes: 12 * ADD,
    counts: [2, 10],
  },
];

/** One wait for the GPU: an empty queue, and one dispatch read back with `mapAsync`. */
async function waitFloor(rounds: number): Promise<{ empty: number; oneDispatch: number }> {
  const empty = await timed(() => gpu.gpu.queue.onSubmittedWorkDone(), rounds);
  const vm = chainVM("vm.op.add", 0);
  using a = tensor([1, 2, 3, 4], { device: gpu });
  const oneDispatch = await timed(async () => {
    using out = await vm.invoke("ops", a, a) as NDArray;
    await out.data();
  }, rounds);
  return { empty, oneDispatch };
}

/** The fixed cost of a call whose result is `bytes` long: the call minus its op. */
async function readbackCost(bytes: number, rounds: number, perOpMs: number): Promise<number> {
  const n = bytes / 4;
  const vm = chainVM("vm.op.add", 0);
  using a = tensor(randomValues(n, 3), { device: gpu });
  const total = await timed(async () => {
    using out = await vm.invoke("ops", a, a) as NDArray;
    await out.data();
  }, rounds);
  return total - perOpMs;
}

if (import.meta.main) {
  const info = gpu.adapter.info;
  console.log(
    `adapter: ${info.vendor} ${info.architecture} ${info.description || info.device}` +
      (full ? "" : " — software adapter: small sizes (--full for the issue's)"),
  );
  const torch = await torchFigures();
  console.log(
    "| measurement (per op, slope between two op counts in one call) | relaxvm | TF.js WebGPU | PyTorch |",
  );
  console.log("| --- | ---: | ---: | ---: |");
  let addMs = 0;
  for (const c of cases) {
    const r = await measureOp(c, full ? 5 : 3);
    if (c.op === "vm.op.add") addMs = r.relaxvm;
    console.log(
      `| ${c.name} | ${figure(c, r.relaxvm)} | ${figure(c, r.tfjs)} | ${
        figure(c, torch?.[c.name])
      } |`,
    );
  }
  const wait = await waitFloor(15);
  console.log(
    `| one wait: empty queue / 1 dispatch + mapAsync | ${wait.empty.toFixed(1)} ms / ${
      wait.oneDispatch.toFixed(1)
    } ms | same wait | ${torch?.["wait"] !== undefined ? `${torch["wait"].toFixed(3)} ms` : "—"} |`,
  );
  const fixed = await readbackCost(ADD * 4, 7, addMs);
  const overFloor = fixed - wait.oneDispatch;
  console.log(
    `| fixed cost of a call returning ${(ADD * 4) >> 20} MB | ${fixed.toFixed(1)} ms (${
      overFloor.toFixed(1)
    } ms over one wait, ${((ADD * 4) / Math.max(overFloor, 1e-3) / 1e6).toFixed(1)} GB/s) | | |`,
  );
}
