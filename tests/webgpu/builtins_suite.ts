// The builtins that touch device memory, on WebGPU: ensure_zero_offset, the
// KV cache, the tensor cache. Each checks the GPU's bytes against the CPU's.
import { assert, assertEquals, assertThrows } from "@std/assert";
import {
  type AttentionKVCache,
  cpu,
  ExecBuilder,
  getGlobalFunc,
  type NDArray,
  registerFunc,
  tensor,
  VirtualMachine,
} from "../../mod.ts";
import {
  checkCreateAppendView,
  checkErrors,
  checkGrowthPopClear,
  checkInVM,
  checkWindowOverride,
  checkWindowSinks,
} from "../_kv_cache_checks.ts";
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
    src.device.copyBlock(src.block, src.byteOffset, dst.block, dst.byteOffset, 12);
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

gpuTest("TVM test_attention_kv_cache on WebGPU", (gpu) => checkCreateAppendView(gpu));
gpuTest(
  "KV cache on WebGPU: growth, popn, update, clear, aliasing views",
  (gpu) => checkGrowthPopClear(gpu),
);
gpuTest("TVM test_attention_kv_cache_window_override on WebGPU", (gpu) => checkWindowOverride(gpu));
gpuTest("TVM window_override_with_sinks on WebGPU", (gpu) => checkWindowSinks(gpu));
gpuTest("KV cache errors on WebGPU", (gpu) => checkErrors(gpu));
gpuTest("KV cache in a WebGPU VM: device copies only, counted, freed", (gpu) => checkInVM(gpu));

gpuTest("KV cache on WebGPU takes CPU rows and CPU caches take GPU rows", async (gpu) => {
  const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args);
  using init = tensor(new Float32Array(2), { shape: [1, 2], device: gpu });
  const onGpu = call("vm.builtin.attention_kv_cache_create", init, [1, 2], 0) as AttentionKVCache;
  using cpuRow = tensor([3, 4], { shape: [1, 2] });
  await call("vm.builtin.attention_kv_cache_append", onGpu, cpuRow);
  using cpuInit = tensor(new Float32Array(2), { shape: [1, 2] });
  const onCpu = call(
    "vm.builtin.attention_kv_cache_create",
    cpuInit,
    [1, 2],
    0,
  ) as AttentionKVCache;
  using gpuRow = tensor([5, 6], { shape: [1, 2], device: gpu });
  await call("vm.builtin.attention_kv_cache_append", onCpu, gpuRow); // waits for the GPU
  const a = call("vm.builtin.attention_kv_cache_view", onGpu) as NDArray;
  const b = call("vm.builtin.attention_kv_cache_view", onCpu) as NDArray;
  assertEquals([a.device, b.device], [gpu, cpu()]);
  assertEquals([...await a.data(), ...await b.data()], [3, 4, 5, 6]);
  for (const v of [a, b, onGpu, onCpu]) v.releaseIfUnowned();
});

gpuTest("sampling reads WebGPU tensors back; in-place processing wants the CPU", async (gpu) => {
  const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args);
  using logits = tensor([1, 2, 3, 4], { device: gpu });
  assertEquals(await call("vm.builtin.sample_top_p_from_logits", logits, 1, 0.9, 0.7), 2);
  using prob = tensor([0.1, 0.2, 0.3, 0.4], { device: gpu });
  assertEquals(await call("vm.builtin.sample_top_p_from_prob", prob, 0.9, 0.5), 2);
  using probs = tensor([[0.1, 0.2, 0.3, 0.4]], { device: gpu });
  using u = tensor([[0.35]], { device: gpu });
  const out = await call("vm.builtin.multinomial_from_uniform", probs, u) as NDArray;
  assertEquals([out.device, out.dtype, [...out.dataSync()]], [cpu(), "int64", [2n]]);
  out.releaseIfUnowned();
  assertThrows(
    () => call("vm.builtin.apply_softmax_with_temperature", logits, 1),
    TypeError,
    "must be on the CPU",
  );
});

gpuTest("tensor_cache.load puts a TVM-written cache on WebGPU", async (gpu) => {
  const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args);
  call("vm.builtin.tensor_cache.clear");
  const fixture = new URL("../../testdata/tensor_cache/", import.meta.url).href;
  const ib = new ExecBuilder();
  ib.function("main", 0, () => {
    ib.emit_call("vm.builtin.tensor_cache.load", [fixture, ib.imm(15), ib.imm(0)]);
    ib.emit_call("vm.builtin.param_array_from_cache", ["x", ib.imm(-1)], { dst: ib.r(0) });
    ib.emit_call("vm.builtin.tuple_getitem", [ib.r(0), ib.imm(1)], { dst: ib.r(1) });
    ib.emit_call("vm.op.add", [ib.r(1), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  using vm = new VirtualMachine(ib.get(), gpu, { tensorCacheRoots: [fixture] });
  using doubled = await vm.invoke("main") as NDArray;
  assertEquals(doubled.device, gpu);
  assertEquals(
    call("vm.builtin.tensor_cache.get", "x_0"),
    null,
    "the VM's own cache, not the host's",
  );
  const x0 = vm.tensorCache.get("x_0")!;
  assertEquals([x0.device, [...await x0.data()]], [gpu, [1, 2, 3]]);
  assertEquals([...await doubled.data()].slice(1, 4), [-5, 6.28125, 131072]);
  assert(vm.memory_stats(gpu).liveBytes > 0, "the weights count in the VM's memory");
  vm.tensorCache.clear();
  assert(x0.disposed, "clearing the cache frees its GPU tensors");
});
