/**
 * Attention benchmark: relaxvm's fused `vm.op.attention` against the same
 * computation written with TensorFlow.js ops (`matMul(q, k, false, true)`,
 * `mul(scale)`, a precomputed additive mask, `softmax`, `matMul(p, v)`), on
 * the CPU (`tfjs-backend-cpu`) and on WebGPU (`tfjs-backend-webgpu`, same
 * adapter). Shapes are a GPT-2-small decoder layer's: 6 heads of 64, decode
 * steps (`Tq = 1`, `Tk` = 64…256) and a causal prefill (`Tq = Tk = 64`). The
 * unfused relaxvm path (`transpose`, `matmul`, `multiply`, `causal_mask`,
 * `softmax`, `matmul` in one VM function) is timed too, for reference.
 *
 * ```sh
 * deno run -A bench/attention_bench.ts           # the table
 * deno run -A bench/attention_bench.ts --quick   # fewer runs
 * ```
 *
 * A relaxvm attention is a VM call (`vm.invoke`); a TF.js one is the ops
 * under `tf.tidy`. Each sample runs 20 of them and then `await data()` on
 * the last (one, for the WebGPU `call` rows) and reports the time per
 * attention.
 * Inputs are uploaded once, before timing. Runs of the libraries are
 * interleaved so drift on a shared machine hits all of them; medians are
 * reported. On WebGPU two figures are given: `call` is one attention and a
 * read back, whose fixed latency (printed as the floor: a read back of one
 * float after a trivial op) is most of it on a software adapter; `in batch`
 * is the time per attention when 20 are queued before one read back, as the
 * layers of a decode step are, and is the row the targets apply to.
 *
 * Targets (issue 11, for the whole decoder: decode ≥ 2× TF.js tokens/s,
 * prefill faster): here, fused attention ≥ 2× TF.js per decode step and
 * ≥ 1× per prefill, on the CPU and on WebGPU in batch.
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import * as tf from "npm:@tensorflow/tfjs-core@4.22.0";
// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import "npm:@tensorflow/tfjs-backend-cpu@4.22.0";
// deno-lint-ignore no-import-prefix -- a peer: kept out of deno.json, see tests/std/assert.ts
import "npm:@tensorflow/tfjs-backend-webgpu@4.22.0";
import {
  cpu,
  type Device,
  ExecBuilder,
  type NDArray,
  shape,
  tensor,
  VirtualMachine,
  webgpu,
} from "../mod.ts";
import { randomValues } from "./_random.ts";
import { median } from "./_stats.ts";

const HEADS = 6, HEAD_SIZE = 64, BATCH = 20;

/** One attention shape. */
interface Shape {
  name: string;
  Tq: number;
  Tk: number;
}

const SHAPES: Shape[] = [
  { name: "decode Tk=64", Tq: 1, Tk: 64 },
  { name: "decode Tk=128", Tq: 1, Tk: 128 },
  { name: "decode Tk=256", Tq: 1, Tk: 256 },
  { name: "prefill 64 (causal)", Tq: 64, Tk: 64 },
];

/** Runners for one shape on one device: each runs `n` attentions and reads the last back. */
interface Runners {
  fused: (n: number) => Promise<void>;
  unfused: (n: number) => Promise<void>;
  tfjs: (n: number) => Promise<void>;
}

/** `attention(q, k, v, causal)` as one VM function. */
function fusedVM(device: Device): VirtualMachine {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 3 }, () => {
    ib.emit_call("vm.op.attention", [ib.r(0), ib.r(1), ib.r(2), ib.imm(1)], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  return new VirtualMachine(ib.get(), device);
}

/** The same computation from the unfused operators, as one VM function; `r(3)` is the scale. */
function unfusedVM(device: Device): VirtualMachine {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 4 }, () => {
    ib.emit_call("vm.op.transpose", [ib.r(1), shape(0, 1, 3, 2)], { dst: ib.r(4) });
    ib.emit_call("vm.op.matmul", [ib.r(0), ib.r(4)], { dst: ib.r(5) });
    ib.emit_call("vm.op.multiply", [ib.r(5), ib.r(3)], { dst: ib.r(6) });
    ib.emit_call("vm.op.causal_mask", [ib.r(6)], { dst: ib.r(7) });
    ib.emit_call("vm.op.softmax", [ib.r(7)], { dst: ib.r(8) });
    ib.emit_call("vm.op.matmul", [ib.r(8), ib.r(2)], { dst: ib.r(9) });
    ib.emit_ret(ib.r(9));
  });
  return new VirtualMachine(ib.get(), device);
}

/** Uploads one shape's inputs to `device` and TF.js's current backend. */
function runners(device: Device, { Tq, Tk }: Shape): Runners {
  const qShape = [1, HEADS, Tq, HEAD_SIZE], kvShape = [1, HEADS, Tk, HEAD_SIZE];
  const qv = randomValues(HEADS * Tq * HEAD_SIZE, 1);
  const kv = randomValues(HEADS * Tk * HEAD_SIZE, 2), vv = randomValues(HEADS * Tk * HEAD_SIZE, 3);
  const q = tensor(qv, { shape: qShape, device }), k = tensor(kv, { shape: kvShape, device });
  const v = tensor(vv, { shape: kvShape, device });
  const scale = 1 / Math.sqrt(HEAD_SIZE);
  // Passed as an argument: the constant pool holds CPU tensors, and the unfused path should
  // run on the device throughout.
  const scaleOnDevice = tensor(scale, { device });
  const fused = fusedVM(device), unfused = unfusedVM(device);
  const tq = tf.tensor(qv, qShape), tk = tf.tensor(kv, kvShape), tv = tf.tensor(vv, kvShape);
  // The mask is built once, outside the timed region: a TF.js model would precompute it too.
  // Query i sees keys j <= i + Tk - Tq; decode (Tq = 1) sees every key and skips the add.
  const maskValues = new Float32Array(Tq * Tk).map((_, e) =>
    e % Tk > Math.floor(e / Tk) + Tk - Tq ? -1e9 : 0
  );
  const mask = Tq === 1 ? null : tf.tensor(maskValues, [Tq, Tk]);
  const runVM = (vm: VirtualMachine, ...args: NDArray[]) => async (n: number) => {
    const outs: NDArray[] = [];
    for (let i = 0; i < n; i++) outs.push(await vm.invoke("main", ...args) as NDArray);
    await outs[n - 1].data();
    for (const o of outs) o.dispose();
  };
  return {
    fused: runVM(fused, q, k, v),
    unfused: runVM(unfused, q, k, v, scaleOnDevice),
    tfjs: async (n) => {
      const outs: tf.Tensor[] = [];
      for (let i = 0; i < n; i++) {
        outs.push(tf.tidy(() => {
          let s = tf.mul(tf.matMul(tq, tk, false, true), scale);
          if (mask !== null) s = tf.add(s, mask);
          return tf.matMul(tf.softmax(s), tv);
        }));
      }
      await outs[n - 1].data();
      for (const o of outs) o.dispose();
    },
  };
}

/** Median milliseconds per attention of `fn(n)` over `runs`, interleaved across the runners. */
async function timeAll(
  fns: ((n: number) => Promise<void>)[],
  n: number,
  runs: number,
): Promise<number[]> {
  for (const fn of fns) for (let i = 0; i < 2; i++) await fn(n); // warm up: compile, pools
  const times = fns.map(() => [] as number[]);
  for (let r = 0; r < runs; r++) {
    for (const [i, fn] of fns.entries()) {
      const t0 = performance.now();
      await fn(n);
      times[i].push((performance.now() - t0) / n);
    }
  }
  return times.map(median);
}

const ms = (t: number) => t < 1 ? t.toFixed(3) : t.toFixed(2);

async function printTable(quick: boolean): Promise<void> {
  const runs = quick ? 5 : 15;
  const gpu = await webgpu();
  console.log(`adapter: ${gpu.adapter.info.description || gpu.adapter.info.vendor}`);
  console.log(
    `attention, ${HEADS} heads × ${HEAD_SIZE}, float32; ms per attention (median of ${runs})`,
  );
  console.log(
    "| device | case | relaxvm fused | relaxvm unfused | TF.js | fused vs TF.js | target | met |",
  );
  console.log("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |");
  const modes: [string, Device, string, number][] = [
    // CPU calls are synchronous: 20 per sample only steadies the timer and the JIT.
    ["cpu", cpu(), "cpu", BATCH],
    ["webgpu call", gpu, "webgpu", 1],
    ["webgpu in batch", gpu, "webgpu", BATCH],
  ];
  const floor = await readBackFloor(gpu, runs);
  for (const [label, device, backend, n] of modes) {
    await tf.setBackend(backend);
    await tf.ready();
    tf.enableProdMode();
    for (const s of SHAPES) {
      const r = runners(device, s);
      const [fused, unfused, tfjs] = await timeAll([r.fused, r.unfused, r.tfjs], n, runs);
      const ratio = tfjs / fused;
      const target = s.Tq === 1 ? 2 : 1;
      // A single call's time is mostly the read back's latency, the same for every library.
      const judged = label !== "webgpu call";
      console.log(
        `| ${label} | ${s.name} | ${ms(fused)} | ${ms(unfused)} | ${ms(tfjs)} | ${
          ratio.toFixed(2)
        }× | ${judged ? `≥ ${target}×` : "—"} | ${
          judged ? (ratio >= target ? "yes" : "NO") : "—"
        } |`,
      );
    }
  }
  console.log(`webgpu read back floor (one float after a trivial op): ${ms(floor)} ms`);
}

/** Median milliseconds of a trivial relaxvm op on `gpu` and a read back of its one float. */
async function readBackFloor(gpu: Device, runs: number): Promise<number> {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.negative", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const vm = new VirtualMachine(ib.get(), gpu);
  using x = tensor([1], { device: gpu });
  const [t] = await timeAll(
    [async () => {
      using out = await vm.invoke("main", x) as NDArray;
      await out.data();
    }],
    1,
    runs,
  );
  return t;
}

if (import.meta.main) {
  await printTable(Deno.args.includes("--quick"));
} else {
  // `deno bench`: one decode step on the CPU, TF.js as the comparison.
  tf.enableProdMode();
  await tf.setBackend("cpu");
  const r = runners(cpu(), SHAPES[1]);
  const group = "attention decode Tk=128 (cpu)";
  Deno.bench({ name: "relaxvm fused", group, baseline: true, fn: () => r.fused(1) });
  Deno.bench({ name: "relaxvm unfused", group, fn: () => r.unfused(1) });
  Deno.bench({ name: "tfjs-cpu", group, fn: () => r.tfjs(1) });
}
