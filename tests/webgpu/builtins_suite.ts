// The builtins that touch device memory, on WebGPU: ensure_zero_offset, the
// KV cache, the tensor cache. Each checks the GPU's bytes against the CPU's.
import { assert, assertEquals } from "@std/assert";
import { cpu, ExecBuilder, type NDArray, registerFunc, tensor, VirtualMachine } from "../../mod.ts";
import { gpuTest } from "./suite_registry.ts";

gpuTest("ensure_zero_offset copies an offset WebGPU tensor on the device", async (gpu) => {
  const ib = new ExecBuilder();
  ib.function("main", 1, () => {
    ib.emit_call("vm.builtin.alloc_storage", [ib.vm_state(), [4], ib.imm(1), "float32"], {
      dst: ib.r(1),
    });
    ib.emit_call("vm.builtin.alloc_tensor", [ib.r(1), ib.imm(4), [3], "float32"], {
      dst: ib.r(2),
    });
    // Fill the offset view from the input, then make it start at byte 0.
    ib.emit_call("vm.builtin.to_device", [ib.r(0), ib.imm(15), ib.imm(0)], { dst: ib.r(3) });
    ib.emit_call("vm.op.add", [ib.r(3), ib.r(3)], { dst: ib.r(4) });
    ib.emit_call("test.gpu.copy_into", [ib.r(4), ib.r(2)]);
    ib.emit_call("vm.builtin.ensure_zero_offset", [ib.r(2)], { dst: ib.r(5) });
    ib.emit_ret(ib.r(5));
  });
  registerFunc("test.gpu.copy_into", (src: NDArray, dst: NDArray) => {
    src.device.copyBlock(src.storage.block, src.byteOffset, dst.storage.block, dst.byteOffset, 12);
  }, { override: true });
  const vm = new VirtualMachine(ib.get(), [cpu(), gpu]);
  using x = tensor([1, 2, 3]);
  const submits = gpu.submitCount;
  using out = await vm.invoke("main", x) as NDArray;
  assertEquals([out.device, out.byteOffset, out.shape], [gpu, 0, [3]]);
  assertEquals(gpu.submitCount, submits + 1, "no readback inside the call");
  assertEquals([...await out.data()], [2, 4, 6]);
  assert(vm.memory_stats(gpu).liveBytes >= 12);
});
