/**
 * A tensor made by `NDArray.empty` owns its block until something asks for
 * its `storage` (devices/ndarray.ts): then the block moves into a `Storage`
 * that every view shares. Either way the block goes back exactly once, when
 * its last holder lets go, and a released tensor cannot be reached through
 * a new view.
 */

import { assert, assertEquals, assertRejects, assertStrictEquals, assertThrows } from "@std/assert";
import { activateAllocators } from "../devices/allocation_context.ts";
import { cpu } from "../devices/cpu_device.ts";
import { MemoryScope } from "../devices/memory_scope.ts";
import { NDArray } from "../devices/ndarray.ts";
import { ExecBuilder, tensor, VirtualMachine, VMError } from "../mod.ts";

/** Runs `body` with a fresh VM-style scope active; returns the scope's CPU allocator stats reader. */
function inScope(kind: "pooled" | "naive", body: (live: () => number) => void): void {
  const scope = new MemoryScope([cpu()], kind);
  const previous = activateAllocators(scope);
  try {
    body(() => scope.allocatorFor(cpu()).stats().liveBytes);
  } finally {
    activateAllocators(previous);
  }
}

for (const kind of ["pooled", "naive"] as const) {
  Deno.test(`ownership (${kind}): an owned block returns when the tensor is released`, () => {
    inScope(kind, (live) => {
      const t = NDArray.empty([4], "float32").retain();
      assertEquals(live(), 16);
      t.release();
      assertEquals(live(), 0);
      t.release(); // harmless
      assertEquals(live(), 0);
    });
  });

  Deno.test(`ownership (${kind}): asking for the storage moves the block into it; views share it`, () => {
    inScope(kind, (live) => {
      const t = NDArray.empty([2, 2], "float32").retain();
      (t.cpuView() as Float32Array).set([1, 2, 3, 4]);
      const storage = t.storage;
      assertStrictEquals(t.storage, storage, "made once");
      assertEquals([storage.refCount, storage.nbytes], [1, 16]);
      const row = new NDArray(storage, 8, [2], "float32").retain();
      assertEquals(storage.refCount, 2);
      t.release();
      assertEquals(live(), 16, "the view keeps the block");
      assertEquals([...row.cpuView()], [3, 4]);
      row.release();
      assertEquals([storage.disposed, live()], [true, 0]);
    });
  });

  Deno.test(`ownership (${kind}): a released tensor's storage cannot be reached for a new view`, () => {
    inScope(kind, () => {
      const t = NDArray.empty([4], "float32").retain();
      t.release();
      assertThrows(() => t.storage, ReferenceError, "used after its memory was released");
      const u = NDArray.empty([4], "float32").retain();
      const s = u.storage;
      u.release();
      assert(s.disposed);
      assertThrows(() => new NDArray(s, 0, [4], "float32"), ReferenceError);
    });
  });

  Deno.test(`ownership (${kind}): kill frees an owned block at once, whoever holds the tensor`, () => {
    inScope(kind, (live) => {
      const t = NDArray.empty([4], "float32").retain().retain();
      t.kill();
      assertEquals([t.disposed, live()], [true, 0]);
      t.release();
      t.release();
      assertEquals(live(), 0, "no second return");
    });
  });
}

Deno.test("ownership: reshape of a killed tensor is a use after free, not a view of reused memory", async () => {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.kill", [ib.r(1)]);
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(2) }); // takes r1's block
    ib.emit_call("vm.builtin.reshape", [ib.r(1), [2, 2]], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  const vm = new VirtualMachine(ib.get());
  using x = tensor([1, 2, 3, 4]);
  const e = await assertRejects(
    () => vm.invoke("main", x),
    VMError,
    "used after its memory was released",
  );
  assertEquals(e.packedFunc, "vm.builtin.reshape");
  assertEquals(vm.memory_stats().liveBytes, 0);
});

Deno.test("ownership: a reshaped result handed to the user keeps the block after the original goes", async () => {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.reshape", [ib.r(1), [2, 2]], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  const vm = new VirtualMachine(ib.get());
  using x = tensor([1, 2, 3, 4]);
  const out = await vm.invoke("main", x) as NDArray;
  assertEquals(vm.memory_stats().liveBytes, 16, "r1 is gone, its block lives on in the view");
  assertEquals([out.shape, [...out.dataSync()]], [[2, 2], [2, 4, 6, 8]]);
  out.dispose();
  assertEquals(vm.memory_stats().liveBytes, 0);
});
