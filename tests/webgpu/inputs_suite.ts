// A VM made for WebGPU computes on WebGPU whatever the caller passes: CPU tensor arguments move to
// the GPU at each call (TVM's set_input behaviour), counted by memory_stats() and freed after their
// last use; `moveInputs: false` passes them as they are.
import { assert, assertEquals, assertNotEquals, assertRejects } from "@std/assert";
import {
  cpu,
  ExecBuilder,
  type NDArray,
  registerFunc,
  tensor,
  VirtualMachine,
  VMError,
} from "../../mod.ts";
import { sizeClass } from "../../devices/pooled_allocator.ts";
import { gpuTest } from "./suite_registry.ts";

function addProgram() {
  const ib = new ExecBuilder();
  ib.function("add", { num_inputs: 2 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  ib.function("id", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  // Reads the same field of the tuple argument twice: the copy inside must outlive the first read.
  ib.function("sum_fields", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.tuple_getitem", [ib.r(0), ib.imm(0)], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.tuple_getitem", [ib.r(0), ib.imm(1)], { dst: ib.r(2) });
    ib.emit_call("vm.op.add", [ib.r(1), ib.r(2)], { dst: ib.r(3) });
    ib.emit_call("vm.builtin.tuple_getitem", [ib.r(0), ib.imm(0)], { dst: ib.r(4) });
    ib.emit_call("vm.op.add", [ib.r(3), ib.r(4)], { dst: ib.r(5) });
    ib.emit_ret(ib.r(5));
  });
  return ib.get();
}

gpuTest("inputs: CPU tensors passed to a WebGPU VM are computed on the GPU", async (gpu) => {
  for (const options of [{}, { dispatch: "generic" }, { mode: "compiled" }] as const) {
    const vm = new VirtualMachine(addProgram(), gpu, options);
    using a = tensor([1, 2]);
    using b = tensor([10, 20]);
    const dispatches = gpu.dispatchCount;
    using out = await vm.invokeTensor("add", a, b);
    assertEquals(out.device, gpu, "the result is on the GPU");
    assert(gpu.dispatchCount > dispatches, "the GPU ran the add");
    assertEquals([...await out.data()], [11, 22]);
    assertEquals([...a.dataSync()], [1, 2], "the caller's tensors are untouched");
    assertEquals(a.device, cpu());
    // The two copies were allocated by the VM on the GPU, and only the result is still live.
    const stats = vm.memory_stats(gpu);
    assertEquals(stats.poolMisses, 3, "two input copies and the result");
    assertEquals(stats.liveBytes, sizeClass(out.nbytes));
    out.dispose();
    assertEquals(vm.memory_stats(gpu).liveBytes, 0, "back to baseline");
    assertEquals(vm.memory_stats(cpu()).liveBytes, 0, "nothing allocated on the CPU");
  }
});

gpuTest(
  "inputs: a moved input is freed after its last use, not at the end of the call",
  async (gpu) => {
    let liveDuringCall = -1;
    // deno-lint-ignore prefer-const
    let vm: VirtualMachine;
    registerFunc("test.inputs.probe", (x: NDArray) => {
      liveDuringCall = vm.memory_stats(gpu).liveBytes;
      return x;
    }, { override: true });
    const ib = new ExecBuilder();
    ib.function("main", { num_inputs: 1 }, () => {
      ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) }); // last use of the input
      ib.emit_call("test.inputs.probe", [ib.r(1)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    vm = new VirtualMachine(ib.get(), gpu);
    using x = tensor(new Float32Array(1000)); // 4000 bytes: a 4096-byte block
    using out = await vm.invokeTensor("main", x);
    assertEquals(liveDuringCall, 4096, "only the sum is live once the input copy's last use ran");
    assertEquals(vm.memory_stats(gpu).peakBytes, 2 * 4096, "input copy and sum, never more");
    assertEquals(out.device, gpu);
    out.dispose();
    assertEquals(vm.memory_stats(gpu).liveBytes, 0);
  },
);

gpuTest(
  "inputs: tensors inside a tuple argument move and stay valid for the whole call",
  async (gpu) => {
    const vm = new VirtualMachine(addProgram(), gpu);
    using a = tensor([1, 2]);
    using b = tensor([10, 20]);
    using onGpu = tensor([100, 200], { device: gpu });
    const before = vm.memory_stats(gpu).allocatedBytes;
    using out = await vm.invokeTensor("sum_fields", [a, b]); // a + b + a
    assertEquals([...await out.data()], [12, 24]);
    out.dispose();
    assertEquals(vm.memory_stats(gpu).liveBytes, 0, "the copies inside the array were released");
    // A tensor already on the GPU is passed as it is: no copy.
    const allocated = vm.memory_stats(gpu).allocatedBytes;
    assert(allocated > before);
    using same = await vm.invokeTensor("id", onGpu);
    assertEquals(same, onGpu, "the very tensor, not a copy");
    assertEquals(vm.memory_stats(gpu).allocatedBytes, allocated);
  },
);

gpuTest("inputs: a call that fails frees the copies it made", async (gpu) => {
  const vm = new VirtualMachine(addProgram(), gpu);
  using a = tensor([1, 2]);
  using c = tensor([1, 2, 3]);
  await assertRejects(() => vm.invoke("add", a), VMError, "takes 2 arguments, got 1");
  await assertRejects(() => vm.invoke("add", a, c), VMError, "do not broadcast");
  assertEquals(vm.memory_stats(gpu).liveBytes, 0);
  // A copy past the VM's memory limit is refused before anything is written.
  const small = new VirtualMachine(addProgram(), gpu, { maxMemoryBytes: 64 });
  using big = tensor(new Float32Array(1024));
  const e = await assertRejects(() => small.invoke("id", big), VMError);
  assertEquals(e.functionName, "id");
  assert(e.message.startsWith(`Cannot move the arguments of @id to ${gpu}:`), e.message);
  assertEquals(small.memory_stats(gpu).liveBytes, 0);
});

gpuTest("inputs: a result that is a moved input belongs to the caller, on the GPU", async (gpu) => {
  const vm = new VirtualMachine(addProgram(), gpu);
  using x = tensor([5, 6]);
  using y = await vm.invokeTensor("id", x);
  assertNotEquals(y, x);
  assertEquals(y.device, gpu);
  assertEquals([...await y.data()], [5, 6]);
  assertEquals(vm.memory_stats(gpu).liveBytes, 16);
  y.dispose();
  assertEquals(vm.memory_stats(gpu).liveBytes, 0);
});

gpuTest(
  "inputs: set_input, save_function and time_evaluator move once; the VM holds the copies",
  async (gpu) => {
    const vm = new VirtualMachine(addProgram(), gpu);
    using a = tensor([1, 2]);
    using b = tensor([3, 4]);
    vm.set_input("add", a, b);
    assertEquals(vm.memory_stats(gpu).liveBytes, 32, "two copies held for invoke_stateful");
    await vm.invoke_stateful("add");
    await vm.invoke_stateful("add"); // the held copies serve every call
    using out = vm.get_outputs("add") as NDArray;
    assertEquals(out.device, gpu);
    assertEquals([...await out.data()], [4, 6]);
    vm.set_input("add", b, b); // replaces (and frees) the first copies
    assertEquals(vm.memory_stats(gpu).liveBytes, 16 + 32, "the output and two new copies");
    vm.save_function("add", "add_saved", a, a);
    using saved = await vm.invokeTensor("add_saved");
    assertEquals([...await saved.data()], [2, 4]);
    const timing = await vm.time_evaluator("add", { number: 3 })(a, b);
    assertEquals(timing.results.length, 1);
    saved.dispose();
    out.dispose();
    vm.set_input("add", 1, 2); // numbers: nothing to move; the copies are released
    vm.save_function("add", "add_saved", 1, 2);
    assertEquals(
      vm.memory_stats(gpu).liveBytes,
      16,
      "only the output the VM keeps for get_outputs",
    );
  },
);

gpuTest("inputs: moveInputs: false passes CPU tensors as they are", async (gpu) => {
  const vm = new VirtualMachine(addProgram(), gpu, { moveInputs: false });
  assertEquals(
    Deno.inspect(vm),
    `VirtualMachine(${gpu}; compiled mode; inputs not moved; add(2 inputs), id(1 input), ` +
      "sum_fields(1 input); live 0 B)",
  );
  using a = tensor([1, 2]);
  using out = await vm.invokeTensor("add", a, a);
  assertEquals(out.device, cpu(), "the CPU kernel ran");
  assertEquals([...out.dataSync()], [2, 4]);
  assertEquals(vm.memory_stats(gpu).allocatedBytes, 0, "nothing on the GPU");
  // A VM whose first device is the CPU never moves inputs, whatever else it has.
  const mixed = new VirtualMachine(addProgram(), [cpu(), gpu]);
  using same = await mixed.invokeTensor("id", a);
  assertEquals(same, a);
  assertEquals(same.device, cpu());
});
