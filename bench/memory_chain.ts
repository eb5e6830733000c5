/**
 * Memory figures (issue: memory and liveness) on a 32-layer chain of
 * matmul + add + relu over 128×128 activations, on the CPU and on WebGPU:
 *
 * - peak bytes with liveness against without it (target: ≤ 1/5);
 * - over 1000 invocations: the share of allocations the pool serves from
 *   the second invocation on (target ≥ 95%), and whether live bytes and live
 *   device blocks (GPUBuffers on WebGPU) are back to their baseline after
 *   every invocation.
 *
 *   deno run bench/memory_chain.ts [--invocations N]
 *
 * @module
 */

import { cpu, type Device, type NDArray, VirtualMachine, webgpu } from "../mod.ts";
import { chainInputs, chainProgram } from "./chain_program.ts";

const LAYERS = 32, SIZE = 128;

async function peak(device: Device, liveness: boolean, inputs: NDArray[]): Promise<number> {
  const vm = new VirtualMachine(chainProgram(LAYERS, liveness), device);
  const out = await vm.invoke("chain", ...inputs) as NDArray;
  await out.data();
  out.dispose();
  return vm.memory_stats().peakBytes;
}

async function repeated(device: Device, inputs: NDArray[], invocations: number) {
  const vm = new VirtualMachine(chainProgram(LAYERS, true), device);
  const baseline = vm.memory_stats();
  let first = baseline, blocksAfterFirst = -1, drifted = 0;
  for (let i = 0; i < invocations; i++) {
    const out = await vm.invoke("chain", ...inputs) as NDArray;
    if (i % 100 === 0 || i === invocations - 1) await out.data();
    out.dispose();
    const s = vm.memory_stats();
    if (i === 0) {
      first = s;
      blocksAfterFirst = s.liveBlocks;
    }
    if (s.liveBytes !== baseline.liveBytes || s.liveBlocks !== blocksAfterFirst) drifted++;
  }
  const last = vm.memory_stats();
  const hits = last.poolHits - first.poolHits, misses = last.poolMisses - first.poolMisses;
  return {
    hitRate: hits / (hits + misses),
    drifted,
    liveBytes: last.liveBytes,
    blocks: last.liveBlocks,
  };
}

if (import.meta.main) {
  const at = Deno.args.indexOf("--invocations");
  const invocations = at >= 0 ? Number(Deno.args[at + 1]) : 1000;
  const devices: Device[] = [cpu()];
  try {
    devices.push(await webgpu());
  } catch (e) {
    console.log(`(no WebGPU: ${(e as Error).message})`);
  }
  console.log(
    `| device | peak, liveness off | peak, liveness on | ratio | pool hits from 2nd call | invocations drifting | live bytes after |`,
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const device of devices) {
    const inputs = chainInputs(LAYERS, SIZE, device);
    const off = await peak(device, false, inputs);
    const on = await peak(device, true, inputs);
    const r = await repeated(device, inputs, invocations);
    inputs.forEach((t) => t.dispose());
    const kib = (n: number) => `${(n / 1024).toFixed(0)} KiB`;
    console.log(
      `| ${device} | ${kib(off)} | ${kib(on)} | ${(on / off).toFixed(3)} (1/${
        (off / on).toFixed(0)
      }) | ${
        (100 * r.hitRate).toFixed(1)
      }% | ${r.drifted} of ${invocations} | ${r.liveBytes} B, ${r.blocks} blocks |`,
    );
  }
}
