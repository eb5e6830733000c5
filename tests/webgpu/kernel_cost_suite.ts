// Issue 27, finding 4 on WebGPU: a kernel cannot be interrupted once dispatched, so its work is
// charged to the call's fuel, and checked against the time left, before it is queued.
import { assertEquals, assertRejects, assertStringIncludes } from "@std/assert";
import { ExecBuilder, NDArray, VirtualMachine, VMError } from "../../mod.ts";
import { gpuTest } from "./suite_registry.ts";

gpuTest(
  "finding 4: a WebGPU matmul is refused before dispatch by fuel and by the time left",
  async (gpu) => {
    const ib = new ExecBuilder();
    ib.function("main", { num_inputs: 1 }, () => {
      ib.emit_call("vm.op.matmul", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    using vm = new VirtualMachine(ib.get(), [gpu]);
    const n = 1024; // 2^30 multiply-adds: 2^24 fuel, about 1 ms at the assumed 1 TMAC/s
    const input = () => NDArray.empty([n, n], "float32", gpu);
    await assertRejects(
      () => vm.with({ fuel: 1000 }).invoke("main", input()),
      VMError,
      "Out of fuel",
    );
    // A deadline a 4096³ product (2^36 multiply-adds, 69 ms at 1 TMAC/s) could not meet: refused
    // before it is queued, naming the kernel.
    const big = NDArray.empty([4096, 4096], "float32", gpu);
    const e = await assertRejects(
      () => vm.with({ timeoutMs: 30 }).invoke("main", big),
      VMError,
      "Timed out",
    );
    assertStringIncludes(e.message, "vm.op.matmul on webgpu");
    assertStringIncludes(e.message, "cannot be interrupted once dispatched");
    assertEquals(vm.memory_stats().liveBytes, 0);
    // With the fuel and time it needs, it runs.
    const out = await vm.with({ fuel: 2 ** 25, timeoutMs: 60_000 }).invoke(
      "main",
      input(),
    ) as NDArray;
    assertEquals(out.shape, [n, n]);
    out.dispose();
  },
);
