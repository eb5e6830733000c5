/**
 * Batched GPU execution: one VM call of 100 chained small WebGPU operators,
 * then `data()` on the result. Every kernel is recorded into one open
 * command encoder; the VM's end-of-call `flush()` submits it and the read
 * adds one copy, so the call costs a single wait for the GPU (about 11 ms on
 * the software adapter) however many kernels it runs. Target: ≤ 25 ms end to
 * end.
 *
 * ```sh
 * deno run -A bench/gpu_chain_bench.ts   # or under `deno bench`
 * ```
 *
 * @module
 */

import { ExecBuilder, type NDArray, tensor, VirtualMachine, webgpu } from "../mod.ts";

const OPS = 100;
const SIZE = [64, 64];
const TARGET_MS = 25;

const gpu = await webgpu();

/** `main(x, y)`: 100 ops, each consuming the previous result. */
function chain(): ExecBuilder {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 2 }, () => {
    let prev = ib.r(0);
    for (let i = 0; i < OPS; i++) {
      const dst = ib.r(2 + i);
      switch (i % 5) {
        case 0:
          ib.emit_call("vm.op.add", [prev, ib.r(1)], { dst });
          break;
        case 1:
          ib.emit_call("vm.op.multiply", [prev, ib.r(1)], { dst });
          break;
        case 2:
          ib.emit_call("vm.op.tanh", [prev], { dst });
          break;
        case 3:
          ib.emit_call("vm.op.subtract", [prev, ib.r(0)], { dst });
          break;
        default:
          ib.emit_call("vm.op.relu", [prev], { dst });
      }
      prev = dst;
    }
    ib.emit_ret(prev);
  });
  return ib;
}

const n = SIZE[0] * SIZE[1];
const x = tensor(new Float32Array(n).map((_, i) => Math.sin(i)), { shape: SIZE, device: gpu });
const y = tensor(new Float32Array(n).map((_, i) => Math.cos(i) * 0.5), {
  shape: SIZE,
  device: gpu,
});
const vm = new VirtualMachine(chain().get(), gpu);

async function once(): Promise<number> {
  const t0 = performance.now();
  using out = await vm.invoke("main", x, y) as NDArray;
  await out.data();
  return performance.now() - t0;
}

async function report(): Promise<void> {
  for (let i = 0; i < 3; i++) await once(); // compile the shaders, fill the pools
  const submitsBefore = gpu.submitCount, dispatchesBefore = gpu.dispatchCount;
  const runs = 15;
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(await once());
  times.sort((a, b) => a - b);
  const median = times[runs >> 1];
  console.log(`${OPS} chained ${SIZE.join("×")} ops in one VM call, then data():`);
  console.log(
    `  median ${median.toFixed(1)} ms, min ${times[0].toFixed(1)} ms, max ${
      times[runs - 1].toFixed(1)
    } ms`,
  );
  console.log(
    `  per call: ${(gpu.submitCount - submitsBefore) / runs} submits (VM flush + read copy), ${
      (gpu.dispatchCount - dispatchesBefore) / runs
    } dispatches`,
  );
  console.log(`  target ≤ ${TARGET_MS} ms: ${median <= TARGET_MS ? "met" : "NOT met"}`);
}

if (import.meta.main) {
  await report();
} else {
  Deno.bench({
    name: `${OPS} chained GPU ops, one VM call, then data()`,
    fn: async () => void (await once()),
  });
}
