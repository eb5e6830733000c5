/**
 * The operator suite on the CPU backend, three times: with the WebAssembly
 * SIMD kernels taking every size they cover (`"wasm"`) on one thread and on
 * two (the worker pool started before each test, so every product is
 * split), and with the TypeScript kernels alone (`"typescript"`, what runs
 * where WebAssembly cannot be compiled). Each is compared with the plain-JS
 * references.
 *
 * @module
 */

import { assertEquals } from "@std/assert";
import { cpu, cpuThreadSetting } from "../devices/cpu_device.ts";
import {
  type CpuKernelMode,
  cpuThreadsReady,
  setCpuKernelMode,
} from "../kernels/cpu/wasm/runtime.ts";
import { defineOperatorTests } from "./operators_suite.ts";

const VARIANTS: [CpuKernelMode, number][] = [["wasm", 1], ["wasm", 2], ["typescript", 1]];
const defaultThreads = cpuThreadSetting();

for (const [mode, threads] of VARIANTS) {
  const label = `cpu (${mode} kernels${mode === "wasm" ? `, ${threads} thread(s)` : ""})`;
  defineOperatorTests(
    label,
    () => Promise.resolve(cpu()),
    (name, fn) =>
      Deno.test(name, async () => {
        setCpuKernelMode(mode);
        cpu(0, { threads });
        if (threads > 1) assertEquals(await cpuThreadsReady(), threads);
        try {
          await fn();
        } finally {
          setCpuKernelMode("auto");
          cpu(0, { threads: defaultThreads });
        }
      }),
  );
}
