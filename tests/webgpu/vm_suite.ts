import { assert, assertEquals, assertRejects } from "@std/assert";
import { cpu, ExecBuilder, type NDArray, tensor, VirtualMachine, VMError } from "../../mod.ts";
import { gpuTest } from "./suite_registry.ts";

gpuTest("a WebGPU VM moves tensor constants to the GPU once, at load", async (gpu) => {
  const ib = new ExecBuilder();
  using bias = tensor([10, 20, 30]);
  ib.function("add_bias", 1, () => {
    ib.emit_call("vm.op.add", [ib.r(0), bias], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const vm = new VirtualMachine(ib.get(), gpu);
  const atLoad = vm.memory_stats().liveBytes;
  assert(atLoad >= 12, "the constant lives in the VM's GPU memory");
  using x = tensor([1, 2, 3], { device: gpu });
  for (let i = 0; i < 3; i++) {
    using out = await vm.invoke("add_bias", x) as NDArray;
    assertEquals(out.device, gpu);
    assertEquals([...await out.data()], [11, 22, 33]);
  }
  assertEquals(vm.memory_stats().liveBytes, atLoad, "no further constant uploads");
});

gpuTest("constants of every storage width reach a WebGPU VM with their values", async (gpu) => {
  const cases = [
    tensor([1.5, 2.5, 3.5], { dtype: "bfloat16" }),
    tensor([1.5, -2, 65504], { dtype: "float16" }),
    tensor([2n ** 60n + 1n, -3n], { dtype: "int64" }),
    tensor([1, 0, 1], { dtype: "bool" }),
  ];
  for (const c of cases) {
    const ib = new ExecBuilder();
    ib.function("constant", 0, () => {
      ib.emit_call("vm.builtin.copy", [c], { dst: ib.r(0) });
      ib.emit_ret(ib.r(0));
    });
    const vm = new VirtualMachine(ib.get(), gpu);
    using out = await vm.invoke("constant") as NDArray;
    assertEquals(out.device, gpu);
    assertEquals(await out.data(), await c.data(), c.dtype);
    c.dispose();
  }
});

gpuTest("to_device moves tensors between CPU and WebGPU inside the VM", async (gpu) => {
  const ib = new ExecBuilder();
  ib.function("round_trip", 1, () => {
    ib.emit_call("vm.builtin.to_device", [ib.r(0), ib.imm(15), ib.imm(0)], { dst: ib.r(1) });
    ib.emit_call("vm.op.multiply", [ib.r(1), ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("vm.builtin.to_device", [ib.r(2), ib.imm(1), ib.imm(0)], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  const vm = new VirtualMachine(ib.get(), [cpu(), gpu]);
  using x = tensor([1, 2, 3]);
  using out = await vm.invoke("round_trip", x) as NDArray;
  assertEquals(out.device, cpu());
  assertEquals([...out.dataSync()], [1, 4, 9]);
  assertEquals(vm.memory_stats(gpu).liveBytes, 0, "GPU intermediates released");
  const bad = new ExecBuilder();
  bad.function("f", 1, () => {
    bad.emit_call("vm.builtin.to_device", [bad.r(0), bad.imm(15), bad.imm(7)], { dst: bad.r(1) });
    bad.emit_ret(bad.r(1));
  });
  await assertRejects(
    () => new VirtualMachine(bad.get()).invoke("f", x),
    VMError,
    "no WebGPU device with id 7",
  );
});

gpuTest("alloc_storage and alloc_tensor on the VM's WebGPU device", async (gpu) => {
  const ib = new ExecBuilder();
  ib.function("f", 1, () => {
    ib.emit_call("vm.builtin.alloc_storage", [ib.vm_state(), [8], ib.imm(1), "float32", "global"], {
      dst: ib.r(1),
    });
    ib.emit_call("vm.builtin.alloc_tensor", [ib.r(1), ib.imm(16), [4], "float32"], {
      dst: ib.r(2),
    });
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(3) });
    ib.emit_call("vm.builtin.make_tuple", [ib.r(2), ib.r(3)], { dst: ib.r(4) });
    ib.emit_ret(ib.r(4));
  });
  const vm = new VirtualMachine(ib.get(), [cpu(), gpu]);
  using x = tensor([1, 2, 3, 4], { device: gpu });
  const [view, doubled] = await vm.invoke("f", x) as NDArray[];
  assertEquals([view.device, view.shape, view.byteOffset], [gpu, [4], 16]);
  assertEquals([...await doubled.data()], [2, 4, 6, 8]);
  assertEquals(vm.memory_stats(gpu).liveBytes > 0, true);
  view.dispose();
  doubled.dispose();
  assertEquals(vm.memory_stats(gpu).liveBytes, 0);
});
