/**
 * The leak check of `@relaxvm/relaxvm/testing` fails on a real leak and
 * passes otherwise.
 */

import { assertEquals, assertInstanceOf, assertRejects, assertThrows } from "@std/assert";
import { cpu, ExecBuilder, type NDArray, registerFunc, tensor, VirtualMachine } from "../mod.ts";
import { assertNoLeaks, checkLeaks, LeakError } from "../testing.ts";

// A packed function that breaks the ownership rule: its result comes from tensor(), which the
// caller owns, so it stays live after the VM is done with it (until the garbage collector).
registerFunc("test.testing.leaky_copy", (x: NDArray) => tensor(x.dataSync()), { override: true });

function program() {
  const ib = new ExecBuilder();
  ib.function("double", 1, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("leaky", 1, () => {
    ib.emit_call("test.testing.leaky_copy", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("vm.op.add", [ib.r(1), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  return ib.get();
}

Deno.test("assertNoLeaks: passes when every result is disposed", async () => {
  const vm = new VirtualMachine(program());
  using x = tensor([1, 2, 3]);
  await assertNoLeaks(vm, async () => {
    for (let i = 0; i < 10; i++) {
      using y = await vm.invoke("double", x) as NDArray;
      assertEquals([...y.dataSync()], [2, 4, 6]);
    }
  });
});

Deno.test("assertNoLeaks: fails on a result that is not disposed", async () => {
  const vm = new VirtualMachine(program());
  using x = tensor([1, 2, 3]);
  let kept: NDArray | undefined;
  const error = await assertRejects(
    () => assertNoLeaks(vm, async () => kept = await vm.invoke("double", x) as NDArray),
    LeakError,
    "cpu(0) holds",
  );
  assertEquals(error.leaks.length, 1);
  assertEquals(error.leaks[0].device, cpu());
  assertEquals(error.leaks[0].before, 0);
  kept!.dispose();
  assertEquals(vm.memory_stats().liveBytes, 0);
});

Deno.test("assertNoLeaks: fails on a packed function that breaks the ownership rule", async () => {
  const vm = new VirtualMachine(program());
  using x = tensor([1, 2, 3]);
  await assertRejects(
    () =>
      assertNoLeaks(vm, async () => {
        using _y = await vm.invoke("leaky", x) as NDArray;
      }),
    LeakError,
    // The result was disposed, so the message must also point at the packed function's fix.
    "make results with `NDArray.empty(shape, dtype, device)`",
  );
});

Deno.test("checkLeaks: a using block that leaks throws when it ends", async () => {
  const vm = new VirtualMachine(program());
  using x = tensor([1, 2, 3]);
  {
    using _check = checkLeaks(vm);
    using _y = await vm.invoke("double", x) as NDArray;
  }
  let kept: unknown;
  const check = checkLeaks(vm);
  kept = await vm.invoke("double", x);
  assertInstanceOf(assertThrows(() => check[Symbol.dispose](), LeakError), LeakError);
  (kept as NDArray).dispose();
  kept = undefined;
});

Deno.test("assertNoLeaks: an error from the function passes through unchecked", async () => {
  const vm = new VirtualMachine(program());
  await assertRejects(
    () =>
      assertNoLeaks(vm, () => {
        throw new RangeError("boom");
      }),
    RangeError,
    "boom",
  );
});
