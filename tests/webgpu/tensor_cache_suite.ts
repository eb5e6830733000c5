// A tensor-cache load streamed onto WebGPU (builtins/tensor_cache/cache_shard_reader.ts):
// records larger than the 1 MiB piece, at odd offsets, an unaligned tail, bfloat16 widened,
// uploaded piece by piece; the GPU's bytes checked against the shard laid out by hand.
import { assertEquals, assertRejects } from "@std/assert";
import { ExecBuilder, Executable, type NDArray, VirtualMachine, VMError } from "../../mod.ts";
import { BIG, handCache, LOCATION, serve, streamed } from "../_tensor_cache_hand.ts";
import { gpuTest } from "./suite_registry.ts";

/** `main()`: loads the cache onto WebGPU (device type 15), returns its tensors. */
function gpuLoader(): Executable {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.tensor_cache.load", [LOCATION, ib.imm(15), ib.imm(0)]);
    ib.emit_call("vm.builtin.param_array_from_cache", ["w", ib.imm(-1)], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  return Executable.load(ib.get().save());
}

gpuTest(
  "tensor_cache.load streams a shard larger than the piece onto WebGPU, byte for byte",
  async (gpu) => {
    const { index, shard, expected, tensorBytes } = handCache(BIG, 7);
    using vm = new VirtualMachine(gpuLoader(), gpu, {
      tensorCacheRoots: [serve(index, () => streamed(shard, [65521, 3, 300_001]))],
    });
    const got = await vm.invoke("main") as NDArray[];
    const want = [...expected.values()];
    assertEquals(got.length, want.length);
    for (const [i, t] of got.entries()) {
      assertEquals(t.device, gpu);
      const v = await t.data();
      const have = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
      assertEquals(have.length, want[i].length, `w_${i} length`);
      const first = have.findIndex((b, k) => b !== want[i][k]);
      assertEquals(first, -1, `w_${i} differs at byte ${first}`);
    }
    assertEquals(vm.memory_stats(gpu).liveBytes, tensorBytes, "exactly the tensors, on the GPU");
    // A cut shard: refused, the GPU tensors made before the cut released.
    using cut = new VirtualMachine(gpuLoader(), gpu, {
      tensorCacheRoots: [serve(index, () => streamed(shard.slice(0, 4_000_000), [65536]))],
    });
    await assertRejects(() => cut.invoke("main"), VMError, "the shard is 4000000 bytes");
    assertEquals([cut.tensorCache.size, cut.memory_stats(gpu).liveBytes], [0, 0]);
  },
);
