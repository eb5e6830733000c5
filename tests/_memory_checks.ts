/**
 * Memory checks shared by the CPU tests (`memory_test.ts`) and the WebGPU
 * suite (`webgpu/memory_suite.ts`), so both devices are held to the same figures.
 *
 * @module
 */

import { assert, assertEquals, assertRejects } from "@std/assert";
import {
  type Device,
  type NDArray,
  tensor,
  VirtualMachine,
  type VirtualMachineOptions,
  VMError,
} from "../mod.ts";
import { chainInputs, chainProgram } from "../bench/chain_program.ts";

function closeTo(actual: ArrayLike<number>, expected: ArrayLike<number>) {
  assertEquals(actual.length, expected.length);
  for (let i = 0; i < actual.length; i++) {
    assert(
      Math.abs(actual[i] - expected[i]) <= 1e-4 * (1 + Math.abs(expected[i])),
      `at ${i}: ${actual[i]} vs ${expected[i]}`,
    );
  }
}

async function chainPeaks(device: Device, options: VirtualMachineOptions) {
  const layers = 8, size = 32;
  const inputs = chainInputs(layers, size, device);
  const results: Record<string, { peak: number; out: ArrayLike<number> }> = {};
  for (const liveness of [true, false]) {
    const vm = new VirtualMachine(chainProgram(layers, liveness), device, options);
    using out = await vm.invoke("chain", ...inputs) as NDArray;
    results[String(liveness)] = {
      peak: vm.memory_stats().peakBytes,
      out: await out.data() as Float32Array,
    };
  }
  inputs.forEach((t) => t.dispose());
  return results;
}

/** Liveness keeps the chain's peak memory to a few activations, with the same result. */
export async function checkLiveness(
  device: Device,
  options: VirtualMachineOptions = {},
): Promise<void> {
  await livenessPeaks(device, options);
}

/** `checkLiveness`, returning the peaks (with liveness, without) for comparing VM forms. */
export async function livenessPeaks(
  device: Device,
  options: VirtualMachineOptions = {},
): Promise<[number, number]> {
  const { true: on, false: off } = await chainPeaks(device, options);
  closeTo(on.out, off.out);
  // 8 layers × 3 activations of 4 KiB without liveness; at most a few with it.
  assertEquals(off.peak, 8 * 3 * 4096);
  assert(on.peak <= 3 * 4096, `peak with liveness ${on.peak}`);
  return [on.peak, off.peak];
}

/** Live bytes and blocks return to baseline after every invocation, failed ones too. */
export async function checkBaseline(device: Device, options: VirtualMachineOptions = {}) {
  const layers = 4;
  const inputs = chainInputs(layers, 16, device);
  const vm = new VirtualMachine(chainProgram(layers, true), device, options);
  const before = vm.memory_stats();
  let afterFirst = 0;
  for (let i = 0; i < 20; i++) {
    const out = await vm.invoke("chain", ...inputs) as NDArray;
    out.dispose();
    const s = vm.memory_stats();
    assertEquals(s.liveBytes, before.liveBytes, `invocation ${i}`);
    if (i > 0) assertEquals(s.liveBlocks, afterFirst, `live blocks after invocation ${i}`);
    afterFirst = s.liveBlocks;
  }
  const s = vm.memory_stats();
  assert(s.poolHits / (s.poolHits + s.poolMisses) > 0.9, JSON.stringify(s));
  // Failed invocations release everything too.
  const bad = inputs.slice();
  bad[1] = tensor([1, 2, 3], { device }); // wrong matmul shape
  await assertRejects(() => vm.invoke("chain", ...bad), VMError, "vm.op.matmul");
  assertEquals(vm.memory_stats().liveBytes, before.liveBytes);
  bad[1].dispose();
  inputs.forEach((t) => t.dispose());
  for (const t of inputs) assert(t.disposed);
}
