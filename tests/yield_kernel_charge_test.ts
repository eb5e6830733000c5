/**
 * A kernel's fuel charge never yields (vm/invocation.ts `chargeFuel`): it
 * runs inside a packed function, where the frame cannot park. It used to
 * throw the yield from there, and a compiled function without jumps (an
 * imported ONNX model is one) started again from its entry with its
 * registers gone: "expected a tensor, got undefined" at instruction 1, or a
 * memory limit "with 1073741824 bytes in use", on a call that ran long
 * kernels for more than `yieldIntervalMs`.
 */

import { assertEquals } from "@std/assert";
import { ExecBuilder, type NDArray, tensor, VirtualMachine } from "../mod.ts";

Deno.test("a straight-line program of long kernels runs past yieldIntervalMs in every mode", async () => {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.check_tensor_info", [ib.r(0), ib.imm(2), "float32", "x"]);
    for (let i = 1; i <= 6; i++) {
      ib.emit_call("vm.op.matmul", [ib.r(i - 1), ib.r(0)], { dst: ib.r(i) });
    }
    ib.emit_ret(ib.r(6));
  });
  const ex = ib.get();
  const n = 384;
  for (const mode of ["compiled", "interpret"] as const) {
    // A 1 ms interval: every charge of these kernels is past it.
    using vm = new VirtualMachine(ex, undefined, { mode, yieldIntervalMs: 1 });
    using x = tensor(new Float32Array(n * n).fill(1 / n), { shape: [n, n] });
    using y = await vm.invoke("main", x) as NDArray;
    assertEquals(y.shape, [n, n]);
    const v = (y.dataSync() as Float32Array)[0];
    assertEquals(Math.abs(v - 1 / n) < 1e-6, true, `${mode}: ${v}`);
  }
});
