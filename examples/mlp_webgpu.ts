/**
 * A two-layer perceptron, `softmax(gelu(x @ W1 + b1) @ W2)`, built once with
 * `ExecBuilder` and run by two VMs: one on the CPU, one on WebGPU. The
 * weights are tensor constants of the executable (each VM moves them to its
 * device when it loads); the input is copied to the GPU by the caller.
 *
 * On WebGPU the five kernels of a call are recorded into one command
 * encoder, submitted when the call ends, and waited for once, by `data()`.
 *
 * Run: `deno run examples/mlp_webgpu.ts` (without a WebGPU adapter it runs
 * on the CPU only and says so).
 *
 * @module
 */

import {
  cpu,
  type Device,
  ExecBuilder,
  type NDArray,
  tensor,
  VirtualMachine,
  webgpu,
} from "../mod.ts";

const BATCH = 64, IN = 256, HIDDEN = 512, CLASSES = 10;

/** Deterministic values in [-scale, scale). */
function values(n: number, seed: number, scale: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 2 ** 31 - 1) * scale;
  }
  return out;
}

// Weights scaled like a fresh layer (about 1/sqrt(fan_in)), so activations stay in range.
const w1 = tensor(values(IN * HIDDEN, 1, 1 / Math.sqrt(IN)), { shape: [IN, HIDDEN] });
const b1 = tensor(values(HIDDEN, 2, 0.1));
const w2 = tensor(values(HIDDEN * CLASSES, 3, 1 / Math.sqrt(HIDDEN)), { shape: [HIDDEN, CLASSES] });

const ib = new ExecBuilder();
ib.function("mlp", { num_inputs: 1 }, () => {
  ib.emit_call("vm.op.matmul", [ib.r(0), w1], { dst: ib.r(1) });
  ib.emit_call("vm.op.add", [ib.r(1), b1], { dst: ib.r(2) });
  ib.emit_call("vm.op.gelu", [ib.r(2)], { dst: ib.r(3) });
  ib.emit_call("vm.op.matmul", [ib.r(3), w2], { dst: ib.r(4) });
  ib.emit_call("vm.op.softmax", [ib.r(4)], { dst: ib.r(5) });
  ib.emit_ret(ib.r(5));
});
const ex = ib.get();
console.log(ex.as_text().trimEnd());
console.log();

using x = tensor(values(BATCH * IN, 4, 1), { shape: [BATCH, IN] });

/** Runs `mlp` on `device` a few times; returns the probabilities and the median time. */
async function run(device: Device): Promise<{ probs: Float32Array; ms: number }> {
  const vm = new VirtualMachine(ex, device);
  using input = await x.copyTo(device);
  let probs: Float32Array = new Float32Array(0);
  const times: number[] = [];
  for (let i = 0; i < 6; i++) {
    const t0 = performance.now();
    using out = await vm.invoke("mlp", input) as NDArray;
    probs = await out.data() as Float32Array;
    // The first call compiles shaders and fills the memory pool: not timed.
    if (i > 0) times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { probs, ms: times[times.length >> 1] };
}

/** The most likely class of each of the first `rows` examples. */
function predictions(probs: Float32Array, rows: number): number[] {
  const out: number[] = [];
  for (let r = 0; r < rows; r++) {
    const row = probs.subarray(r * CLASSES, (r + 1) * CLASSES);
    out.push(row.indexOf(Math.max(...row)));
  }
  return out;
}

const flops = 2 * BATCH * (IN * HIDDEN + HIDDEN * CLASSES);
const onCpu = await run(cpu());
console.log(
  `cpu:    ${onCpu.ms.toFixed(2)} ms per call (${(flops / onCpu.ms / 1e6).toFixed(2)} GFLOP/s)`,
);
console.log(`        classes of the first 8 inputs: ${predictions(onCpu.probs, 8).join(", ")}`);

let gpu: Device | null = null;
try {
  gpu = await webgpu();
} catch (e) {
  console.log(`webgpu: not available here (${(e as Error).message}); ran on the CPU only`);
}
if (gpu !== null) {
  const onGpu = await run(gpu);
  console.log(`webgpu: ${onGpu.ms.toFixed(2)} ms per call, one GPU wait included`);
  console.log(`        classes of the first 8 inputs: ${predictions(onGpu.probs, 8).join(", ")}`);
  let maxDiff = 0;
  for (let i = 0; i < onCpu.probs.length; i++) {
    maxDiff = Math.max(maxDiff, Math.abs(onCpu.probs[i] - onGpu.probs[i]));
  }
  console.log(`max |cpu - webgpu| = ${maxDiff.toExponential(2)}`);
  console.log(`cpu and webgpu agree within 1e-5: ${maxDiff <= 1e-5 ? "yes" : "NO"}`);
}
