/**
 * `vm.builtin.call_on_host`: any packed function run on the host's copies
 * of its tensor arguments, its tensor result copied back to the device of
 * the first. What runs where relaxvm's kernels cannot: int64 arithmetic,
 * which WGSL has no 64-bit integers for, is computed this way by the ONNX
 * importer on every device (on the CPU the call goes straight through).
 *
 * @example int64 addition, wherever the tensors are
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const onHost = getGlobalFunc("vm.builtin.call_on_host")!;
 * using a = tensor(new BigInt64Array([1n, 2n]), { shape: [2] });
 * using b = tensor(new BigInt64Array([10n, 20n]), { shape: [2] });
 * using c = await onHost("vm.op.add", a, b) as NDArray;
 * assertEquals([...c.dataSync()], [11n, 22n]);
 * ```
 *
 * @module
 */

import { cpu } from "../../devices/cpu_device.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { activateAllocators, activeAllocators } from "../../devices/allocation_context.ts";
import { getGlobalFunc } from "../../ground/registry.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { describe } from "../describe.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const hostCallBuiltins = new BuiltinTable("Host calls", import.meta.url);

hostCallBuiltins.add("vm.builtin.call_on_host", (name: unknown, ...args: unknown[]) => {
  const who = "call_on_host";
  if (typeof name !== "string" || name === "vm.builtin.call_on_host") {
    throw new TypeError(`${who}: expected the name of another function, got ${describe(name)}`);
  }
  const f = getGlobalFunc(name);
  if (f === undefined) throw new TypeError(`${who}: no function named ${name}`);
  const tensors = args.filter((a): a is NDArray => a instanceof NDArray);
  const device = tensors[0]?.device;
  if (device === undefined || tensors.every((t) => t.device.kind === "cpu")) return f(...args);
  const allocators = activeAllocators();
  return (async () => {
    const copies = await Promise.all(
      args.map((a) =>
        a instanceof NDArray && a.device.kind !== "cpu" ? a.copyToFloating(cpu()) : a
      ),
    );
    const previous = activateAllocators(allocators);
    try {
      const result = await f(...copies);
      if (!(result instanceof NDArray) || result.device === device) return result;
      try {
        return await result.copyToFloating(device);
      } finally {
        result.releaseIfUnowned();
      }
    } finally {
      activateAllocators(previous);
      copies.forEach((c, i) => {
        if (c !== args[i] && c instanceof NDArray) c.releaseIfUnowned();
      });
    }
  })();
}, {
  signature: "(name, ...args) → the function's result",
  summary:
    "Calls the packed function `name` with `args`, its tensors copied to the CPU first when any is elsewhere, and a tensor result copied back to the device of the first tensor argument: how a program runs on the host what a device's kernels cannot (int64 arithmetic on WebGPU). With every tensor on the CPU it is the plain call.",
  dtypes: "any",
  devices: ["cpu", "webgpu"],
  errors: "`TypeError` (not the name of a registered function), and what the function throws.",
  tvm: null,
});
