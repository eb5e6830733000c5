/**
 * `vm.op.conv2d` on the CPU, on both kernel paths (WebAssembly SIMD matrix
 * products and the TypeScript fallback), against the float64 definition
 * (tests/_conv2d_checks.ts), and its argument errors.
 *
 * @module
 */

import { assertThrows } from "@std/assert";
import { getGlobalFunc, tensor } from "../mod.ts";
import { cpuKernelMode, setCpuKernelMode } from "../kernels/cpu/wasm/runtime.ts";
import { checkConv2d } from "./_conv2d_checks.ts";

for (const mode of ["wasm", "typescript"] as const) {
  Deno.test(`vm.op.conv2d matches the definition (${mode} kernels)`, async () => {
    const before = cpuKernelMode();
    setCpuKernelMode(mode);
    try {
      await checkConv2d();
    } finally {
      setCpuKernelMode(before);
    }
  });
}

Deno.test("vm.op.conv2d refuses shapes and geometry that do not fit, naming itself", () => {
  const conv2d = getGlobalFunc("vm.op.conv2d")!;
  using x = tensor(new Float32Array(2 * 4 * 4), { shape: [1, 2, 4, 4] });
  using w = tensor(new Float32Array(3 * 2 * 3 * 3), { shape: [3, 2, 3, 3] });
  using w5 = tensor(new Float32Array(3 * 2 * 5 * 5), { shape: [3, 2, 5, 5] });
  using b = tensor(new Float32Array(2));
  assertThrows(
    () => conv2d(x, w, null, null, null, 2),
    RangeError,
    "vm.op.conv2d: weight [3, 2, 3, 3] does not fit",
  );
  assertThrows(() => conv2d(x, w5), RangeError, "does not fit x [1, 2, 4, 4]");
  assertThrows(() => conv2d(x, w, [0, 1]), RangeError, "strides must be 2 integers of at least 1");
  assertThrows(() => conv2d(x, w, null, [1, 1]), RangeError, "padding must be 4 integers");
  assertThrows(
    () => conv2d(x, w, null, null, null, null, null, b),
    RangeError,
    "bias [2] must be [3]",
  );
  assertThrows(
    () => conv2d(x, w, null, null, null, 1.5),
    TypeError,
    "groups must be a positive integer",
  );
  assertThrows(
    () => conv2d(x, w, null, null, null, null, null, null, "swish(1, 2)"),
    RangeError,
    'vm.op.conv2d: epilogue step "swish(1,2)" is not relu',
  );
  assertThrows(
    () => conv2d(x, w, null, null, null, null, null, null, "affine(1)"),
    RangeError,
    "is not relu, sigmoid or affine/clip/hardsigmoid/hardswish(a, b)",
  );
  assertThrows(
    () => conv2d(x, w, null, null, null, null, null, null, "sigmoid(1, 2)"),
    RangeError,
    'epilogue step "sigmoid(1,2)" is not relu, sigmoid',
  );
  assertThrows(
    () => conv2d(x, w, null, null, null, null, null, null, 3),
    TypeError,
    "epilogue must be a string of steps",
  );
});
