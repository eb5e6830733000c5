/**
 * Helpers for your own tests (`@relaxvm/relaxvm/testing`): a leak check
 * that fails a test when a VM's live bytes did not return to where they
 * started — a result not disposed, a packed function that made its result
 * with `tensor()` instead of `NDArray.empty`, a tensor kept in a closure.
 * It counts what the VM's allocators hold (`vm.memory_stats()`), on every
 * device of the VM, without waiting for the garbage collector.
 *
 * Works with `deno test` (or any runner): the check throws a `LeakError`.
 *
 * @example Fail a test that forgets to dispose a result
 * ```ts
 * import { ExecBuilder, type NDArray, tensor, VirtualMachine } from "@relaxvm/relaxvm";
 * import { assertNoLeaks, LeakError } from "@relaxvm/relaxvm/testing";
 * import { assertEquals, assertRejects } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("double", { num_inputs: 1 }, () => {
 *   ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
 *   ib.emit_ret(ib.r(1));
 * });
 * const vm = new VirtualMachine(ib.get());
 * using x = tensor([1, 2]);
 *
 * // Passes: the result is disposed at the end of its block.
 * await assertNoLeaks(vm, async () => {
 *   using y = await vm.invoke("double", x) as NDArray;
 *   assertEquals([...y.dataSync()], [2, 4]);
 * });
 *
 * // Fails: the result stays live.
 * let kept: NDArray | undefined;
 * await assertRejects(
 *   () => assertNoLeaks(vm, async () => { kept = await vm.invoke("double", x) as NDArray; }),
 *   LeakError,
 *   "bytes more than at the start",
 * );
 * kept?.dispose();
 * ```
 *
 * @module
 */

import type { Device, MemoryStats } from "./runtime.ts";

/** What the leak check needs of a VM: its devices and their memory counters. */
export interface MemoryCounted {
  /** The devices whose allocators are checked. */
  readonly devices: readonly Device[];
  /** The counters of one device's allocator. */
  memory_stats(device?: Device): MemoryStats;
}

/** One device whose live bytes did not return to their start. */
export interface Leak {
  /** The device. */
  readonly device: Device;
  /** Live bytes when the check started. */
  readonly before: number;
  /** Live bytes when it ended. */
  readonly after: number;
}

/**
 * Thrown by `assertNoLeaks` and `checkLeaks` when a VM holds more (or
 * fewer) live bytes than when the check started; `leaks` says where.
 *
 * @example
 * ```ts
 * import { LeakError } from "@relaxvm/relaxvm/testing";
 * import { cpu } from "@relaxvm/relaxvm";
 * import { assertStringIncludes } from "@std/assert";
 *
 * const e = new LeakError([{ device: cpu(), before: 0, after: 16 }]);
 * assertStringIncludes(e.message, "VM memory leaked: cpu(0) holds 16 bytes more than at the start (0 → 16 live bytes); dispose what the VM returns");
 * assertStringIncludes(e.message, "make results with `NDArray.empty(shape, dtype, device)`");
 * ```
 */
export class LeakError extends Error {
  /** Every device whose live bytes changed. */
  readonly leaks: readonly Leak[];

  /** Builds the error from the devices whose live bytes changed. */
  constructor(leaks: readonly Leak[]) {
    const parts = leaks.map(({ device, before, after }) => {
      const delta = after - before;
      return `${device} holds ${Math.abs(delta)} bytes ${
        delta > 0 ? "more" : "fewer"
      } than at the start (${before} → ${after} live bytes)`;
    });
    super(
      `VM memory leaked: ${parts.join("; ")}; dispose what the VM returns (or declare it with ` +
        "`using`). If you do, look at your packed functions: a result made with `tensor()` is " +
        "owned by the function and nothing disposes it; make results with " +
        "`NDArray.empty(shape, dtype, device)`, which the VM frees after their last use",
    );
    this.name = "LeakError";
    this.leaks = leaks;
  }
}

function liveBytes(vm: MemoryCounted): number[] {
  return vm.devices.map((d) => vm.memory_stats(d).liveBytes);
}

/**
 * Starts a leak check of `vm`: disposing the result (at the end of a
 * `using` block) throws a `LeakError` if any device's live bytes differ
 * from now.
 *
 * @example
 * ```ts
 * import { ExecBuilder, type NDArray, tensor, VirtualMachine } from "@relaxvm/relaxvm";
 * import { checkLeaks } from "@relaxvm/relaxvm/testing";
 *
 * const ib = new ExecBuilder();
 * ib.function("ident", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
 * const vm = new VirtualMachine(ib.get());
 * {
 *   using _check = checkLeaks(vm); // checked when the block ends
 *   using x = tensor([1, 2]);
 *   using y = await vm.invoke("ident", x) as NDArray;
 * }
 * ```
 */
export function checkLeaks(vm: MemoryCounted): Disposable {
  const devices = [...vm.devices];
  const before = liveBytes(vm);
  return {
    [Symbol.dispose]() {
      const after = devices.map((d) => vm.memory_stats(d).liveBytes);
      const leaks = devices.map((device, i) => ({ device, before: before[i], after: after[i] }))
        .filter(({ before, after }) => before !== after);
      if (leaks.length > 0) throw new LeakError(leaks);
    },
  };
}

/**
 * Runs `fn` (awaited) and throws a `LeakError` if `vm`'s live bytes on any
 * of its devices are not back where they started. An error `fn` throws is
 * passed on as it is, unchecked.
 *
 * @example
 * ```ts
 * import { ExecBuilder, type NDArray, tensor, VirtualMachine } from "@relaxvm/relaxvm";
 * import { assertNoLeaks } from "@relaxvm/relaxvm/testing";
 *
 * const ib = new ExecBuilder();
 * ib.function("ident", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
 * const vm = new VirtualMachine(ib.get());
 * Deno.test("ident leaks nothing", () =>
 *   assertNoLeaks(vm, async () => {
 *     using x = tensor([1, 2]);
 *     using _y = await vm.invoke("ident", x) as NDArray;
 *   }));
 * ```
 */
export async function assertNoLeaks(
  vm: MemoryCounted,
  fn: () => unknown | Promise<unknown>,
): Promise<void> {
  const check = checkLeaks(vm);
  await fn();
  check[Symbol.dispose]();
}
