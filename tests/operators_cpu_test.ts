/**
 * The operator suite on the CPU backend, twice: with the WebAssembly SIMD
 * kernels taking every size they cover (`"wasm"`), and with the TypeScript
 * kernels alone (`"typescript"`, what runs where WebAssembly cannot be
 * compiled). Both are compared with the plain-JS references.
 *
 * @module
 */

import { cpu } from "../devices/cpu_device.ts";
import { type CpuKernelMode, setCpuKernelMode } from "../kernels/cpu/wasm/runtime.ts";
import { defineOperatorTests } from "./operators_suite.ts";

for (const mode of ["wasm", "typescript"] as CpuKernelMode[]) {
  defineOperatorTests(
    `cpu (${mode} kernels)`,
    () => Promise.resolve(cpu()),
    (name, fn) =>
      Deno.test(name, async () => {
        setCpuKernelMode(mode);
        try {
          await fn();
        } finally {
          setCpuKernelMode("auto");
        }
      }),
  );
}
