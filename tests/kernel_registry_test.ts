/**
 * The kernel registry's contract (kernels/kernel_backend.ts): one kernel per
 * (op, device kind), a backend registers what it has, and an op a kind lacks
 * fails with an error naming the op and the kind. The installed CPU and
 * WebGPU backends fill every op.
 *
 * @module
 */

import { assertEquals, assertStrictEquals, assertThrows } from "@std/assert";
import { cpu } from "../devices/cpu_device.ts";
import { NDArray } from "../devices/ndarray.ts";
import { installKernels } from "../kernels/install.ts";
import {
  backendFor,
  hasKernel,
  KERNEL_NAMES,
  KernelRegistry,
  type OpBackend,
} from "../kernels/kernel_backend.ts";
import { cpuBackend } from "../kernels/cpu/backend.ts";
import { webgpuBackend } from "../kernels/webgpu/backend.ts";

Deno.test("the CPU and WebGPU backends each register a kernel for every op", () => {
  installKernels();
  for (const op of KERNEL_NAMES) {
    assertEquals(typeof cpuBackend[op], "function", `cpu ${op}`);
    assertEquals(typeof webgpuBackend[op], "function", `webgpu ${op}`);
    assertEquals(hasKernel("cpu", op), true, `cpu ${op}`);
    assertEquals(hasKernel("webgpu", op), true, `webgpu ${op}`);
    assertStrictEquals(backendFor("cpu")[op], cpuBackend[op]);
  }
});

Deno.test("a backend that registers some ops runs them and names the op and device for the rest", () => {
  const registry = new KernelRegistry();
  const calls: string[] = [];
  const relu: OpBackend["unary"] = (op, x, out) => {
    calls.push(op);
    (out.cpuView() as Float32Array).set(x.cpuView() as Float32Array);
  };
  registry.registerAll("webgpu", { unary: relu });
  const table = registry.tableFor("webgpu");
  const x = NDArray.empty([3], "float32", cpu());
  (x.cpuView() as Float32Array).set([1, 2, 3]);
  const out = NDArray.empty([3], "float32", cpu());
  table.unary("relu", x, out);
  assertEquals(calls, ["relu"]);
  assertEquals([...out.cpuView()], [1, 2, 3]);
  assertEquals(registry.has("webgpu", "unary"), true);
  assertEquals(registry.has("webgpu", "softmax"), false);
  assertThrows(
    () => table.softmax(x, out),
    Error,
    "No softmax kernel is installed for webgpu devices (webgpu has: unary)",
  );
  // A kind with no kernels at all fails at the lookup.
  assertThrows(() => registry.tableFor("cpu"), Error, "No operator kernels are installed for cpu");
});

Deno.test("registering one kernel adds or replaces that op alone, in the same table", () => {
  const registry = new KernelRegistry();
  registry.registerAll("cpu", cpuBackend);
  const table = registry.tableFor("cpu");
  const mine: OpBackend["softmax"] = (_x, out) => (out.cpuView() as Float32Array).fill(7);
  registry.register("cpu", "softmax", mine);
  assertStrictEquals(table.softmax, mine);
  assertStrictEquals(registry.tableFor("cpu").softmax, mine);
  assertStrictEquals(table.unary, cpuBackend.unary);
  assertThrows(
    () => registry.register("cpu", "conv3d" as keyof OpBackend, mine as never),
    TypeError,
    'No op named "conv3d"',
  );
  assertThrows(
    () => registry.register("cpu", "softmax", undefined as never),
    TypeError,
    "The softmax kernel for cpu devices must be a function",
  );
});
