/**
 * The allocation API for packed functions: a result made with
 * `NDArray.empty` is floating and the VM takes it; a temporary is freed by
 * `dispose()`/`using`. Such a function leaves no live bytes behind, without
 * the garbage collector's help.
 */

import { assert, assertEquals } from "@std/assert";
import { ExecBuilder, NDArray, registerFunc, tensor, VirtualMachine } from "../mod.ts";

registerFunc("test.alloc.scaled_sum", (x: NDArray, y: NDArray) => {
  // A temporary, freed at the end of the scope.
  using twice = NDArray.empty(x.shape, "float32", x.device);
  const a = x.cpuView() as Float32Array, b = y.cpuView() as Float32Array;
  const t = twice.cpuView() as Float32Array;
  for (let i = 0; i < t.length; i++) t[i] = 2 * a[i];
  // The result: floating, taken by the VM.
  const out = NDArray.empty(x.shape, "float32", x.device);
  const o = out.cpuView() as Float32Array;
  for (let i = 0; i < o.length; i++) o[i] = t[i] + b[i];
  return out;
}, { override: true });

function program() {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 2 }, () => {
    ib.emit_call("test.alloc.scaled_sum", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("test.alloc.scaled_sum", [ib.r(2), ib.r(1)], { dst: ib.r(3) });
    ib.emit_call("test.alloc.scaled_sum", [ib.r(3), ib.r(1)]); // result discarded
    ib.emit_ret(ib.r(3));
  });
  return ib.get();
}

for (const allocator of ["pooled", "naive"] as const) {
  Deno.test(`packed functions: NDArray.empty results and temporaries leave no live bytes (${allocator})`, async () => {
    const vm = new VirtualMachine(program(), undefined, { allocator });
    using x = tensor([1, 2, 3, 4]);
    using y = tensor([1, 1, 1, 1]);
    for (let i = 0; i < 100; i++) {
      using out = await vm.invoke("main", x, y) as NDArray;
      if (i === 0) assertEquals([...out.dataSync()], [7, 11, 15, 19]);
      assert(vm.memory_stats().liveBytes > 0, "the result is live while the caller holds it");
    }
    assertEquals(vm.memory_stats().liveBytes, 0);
    assert(vm.memory_stats().allocatedBytes > 0, "the tensors came from the VM's allocator");
  });
}

Deno.test("NDArray.empty: dispose() frees a tensor nobody holds, outside a VM too", () => {
  const t = NDArray.empty([3], "float32");
  assert(!t.disposed);
  t.dispose();
  assert(t.disposed);
});
