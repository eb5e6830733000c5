import {
  assert,
  assertEquals,
  assertInstanceOf,
  assertRejects,
  assertStrictEquals,
} from "@std/assert";
import { backendFor } from "../../kernels/kernel_backend.ts";
import { WebGPUError } from "../../ground/errors.ts";
import { runProgram } from "../../devices/webgpu/kernel_program.ts";
import { DLDeviceType } from "../../devices/device.ts";
import { findDevice } from "../../devices/find_device.ts";
import { activateAllocators } from "../../devices/allocation_context.ts";
import { NaiveAllocator } from "../../devices/naive_allocator.ts";
import { PooledAllocator } from "../../devices/pooled_allocator.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { tensor } from "../../devices/tensor.ts";
import { kernelContext, webgpu } from "../../devices/webgpu/webgpu_device.ts";
import { ExecBuilder, getGlobalFunc, VirtualMachine } from "../../mod.ts";
import { gpuTest } from "./suite_registry.ts";

gpuTest("webgpu() returns the same device for the same id", async (gpu) => {
  assertStrictEquals(await webgpu(0), gpu);
  assertEquals([gpu.kind, gpu.id, gpu.deviceType], ["webgpu", 0, DLDeviceType.WebGPU]);
  assertEquals(String(gpu), "webgpu(0)");
  assertEquals(
    gpu.maxAllocationBytes,
    Math.min(gpu.gpu.limits.maxBufferSize, gpu.gpu.limits.maxStorageBufferBindingSize),
  );
});

gpuTest(
  "tensor() uploads and data() reads back float32, int32 and odd-sized uint8",
  async (gpu) => {
    using f = tensor([[1.5, -2], [3, 4e10]], { device: gpu });
    assertEquals(f.device, gpu);
    assertEquals(await f.data(), new Float32Array([1.5, -2, 3, 4e10]));
    using i = tensor([1, -2, 2147483647], { dtype: "int32", device: gpu });
    assertEquals(await i.data(), new Int32Array([1, -2, 2147483647]));
    // 5 bytes: not a multiple of 4, so the upload goes through the byte-copy kernel.
    using u = tensor([1, 2, 3, 4, 255], { dtype: "uint8", device: gpu });
    assertEquals(await u.data(), new Uint8Array([1, 2, 3, 4, 255]));
    using z = tensor([], { device: gpu });
    assertEquals(await z.data(), new Float32Array(0));
  },
);

gpuTest("copyTo() moves tensors between the CPU and the GPU", async (gpu) => {
  using c = tensor([1, 2, 3], { dtype: "int32" });
  using g = await c.copyTo(gpu);
  using g2 = await g.copyTo(gpu);
  using back = await g2.copyTo(c.device);
  assertEquals(back.dataSync(), new Int32Array([1, 2, 3]));
});

gpuTest("writeBlock and copyBlock handle offsets that are not multiples of 4", async (gpu) => {
  const block = gpu.createBlock(16);
  try {
    gpu.writeBlock(block, 0, new Uint8Array(16).fill(7));
    gpu.writeBlock(block, 3, new Uint8Array([1, 2, 3]));
    assertEquals(await gpu.readBlock(block, 0, 8), new Uint8Array([7, 7, 7, 1, 2, 3, 7, 7]));
    // Same buffer, overlapping, unaligned: goes through a temporary.
    gpu.copyBlock(block, 2, block, 5, 4);
    assertEquals(await gpu.readBlock(block, 0, 10), new Uint8Array([7, 7, 7, 1, 2, 7, 1, 2, 3, 7]));
    assertEquals(await gpu.readBlock(block, 5, 3), new Uint8Array([7, 1, 2]));
  } finally {
    gpu.destroyBlock(block);
  }
});

gpuTest("kernels are recorded without submitting until flush() or a read", async (gpu) => {
  const be = backendFor("webgpu");
  using a = tensor([1, 2, 3, 4], { device: gpu });
  await a.data();
  const before = gpu.submitCount;
  let x = a;
  const made: NDArray[] = [];
  for (let i = 0; i < 10; i++) {
    const y = NDArray.empty([4], "float32", gpu);
    be.binary("add", x, a, y);
    made.push(y);
    x = y;
  }
  assertEquals(gpu.submitCount, before, "ten kernels, nothing submitted yet");
  assert(gpu.pending);
  gpu.flush();
  assertEquals(gpu.submitCount, before + 1);
  gpu.flush();
  assertEquals(gpu.submitCount, before + 1, "an empty flush submits nothing");
  assertEquals(await x.data(), new Float32Array([11, 22, 33, 44]));
  assertEquals(gpu.submitCount, before + 2, "the read submits its own copy");
  for (const t of made) t.releaseIfUnowned();
});

gpuTest("an upload after recorded work lands after that work", async (gpu) => {
  // queue.writeBuffer would run before the still-open encoder, so the add
  // would see the new values; writes while work is pending go through the encoder.
  const be = backendFor("webgpu");
  using a = tensor([1, 2, 3], { device: gpu });
  await a.data();
  const out = NDArray.empty([3], "float32", gpu);
  be.binary("add", a, a, out);
  assert(gpu.pending);
  gpu.writeBlock(a.storage.block, 0, new Uint8Array(new Float32Array([10, 20, 30]).buffer));
  assertEquals(await out.data(), new Float32Array([2, 4, 6]));
  assertEquals(await a.data(), new Float32Array([10, 20, 30]));
  out.releaseIfUnowned();
});

gpuTest("a buffer destroyed while recorded work uses it survives until submit", async (gpu) => {
  const be = backendFor("webgpu");
  const naive = new NaiveAllocator(gpu);
  const previous = activateAllocators({ allocatorFor: () => naive });
  try {
    using a = tensor([1, 2, 3], { device: gpu });
    const tmp = NDArray.empty([3], "float32", gpu);
    be.unary("negative", a, tmp);
    const out = NDArray.empty([3], "float32", gpu);
    be.binary("multiply", tmp, tmp, out);
    tmp.releaseIfUnowned(); // destroyBlock while both kernels are only recorded
    assertEquals(await out.data(), new Float32Array([1, 4, 9]));
    out.releaseIfUnowned();
  } finally {
    activateAllocators(previous);
  }
});

gpuTest(
  "a pooled block reused while earlier work still reads it keeps queue order",
  async (gpu) => {
    const be = backendFor("webgpu");
    const pool = new PooledAllocator(gpu);
    const previous = activateAllocators({ allocatorFor: () => pool });
    try {
      using a = tensor([1, 2, 3, 4], { device: gpu });
      const first = NDArray.empty([4], "float32", gpu);
      be.unary("negative", a, first);
      const out = NDArray.empty([4], "float32", gpu);
      be.binary("add", first, a, out); // reads `first` (recorded, not run)
      const firstBlock = first.block;
      first.releaseIfUnowned();
      const second = NDArray.empty([4], "float32", gpu);
      assertStrictEquals(second.block, firstBlock, "the pool hands the block out again");
      be.binary("multiply", a, a, second); // overwrites it after the reader
      assertEquals(await out.data(), new Float32Array([0, 0, 0, 0]));
      assertEquals(await second.data(), new Float32Array([1, 4, 9, 16]));
      out.releaseIfUnowned();
      second.releaseIfUnowned();
    } finally {
      activateAllocators(previous);
      pool.clear();
    }
  },
);

gpuTest(
  "a GPU validation error rejects the next read, then the device works again",
  async (gpu) => {
    using a = tensor([1, 2], { device: gpu });
    runProgram(kernelContext(gpu), {
      key: "test:broken-shader",
      source: () => "this is not WGSL",
      inputs: 0,
      workgroups: 1,
    }, [a.block as GPUBuffer]);
    const e = await assertRejects(() => a.data(), WebGPUError);
    assertEquals(e.kind, "validation");
    assertEquals(await a.data(), new Float32Array([1, 2]));
  },
);

gpuTest("an impossible allocation rejects the next read with a WebGPUError", async (gpu) => {
  const block = gpu.createBlock(gpu.gpu.limits.maxBufferSize + 4);
  using a = tensor([1], { device: gpu });
  const e = await assertRejects(() => a.data(), WebGPUError);
  assertInstanceOf(e, WebGPUError);
  gpu.destroyBlock(block);
  assertEquals(await a.data(), new Float32Array([1]));
});

gpuTest("read results stay intact after the staging buffer is reused", async (gpu) => {
  // readBlock keeps Deno's private copy of a mapped range via transfer(); if a
  // runtime mapped in place instead, the first result would change here.
  using a = tensor(new Float32Array(1024).fill(1), { device: gpu });
  const first = await a.data();
  gpu.writeBlock(a.storage.block, 0, new Uint8Array(new Float32Array(1024).fill(2).buffer));
  const second = await a.data();
  assertEquals(first[0], 1);
  assertEquals(first[1023], 1);
  assertEquals(second[0], 2);
});

gpuTest("one VM call of many GPU ops submits once, and its read waits once", async (gpu) => {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    let prev = ib.r(0);
    for (let i = 1; i <= 20; i++) {
      ib.emit_call(i % 2 === 0 ? "vm.op.add" : "vm.op.multiply", [prev, ib.r(0)], { dst: ib.r(i) });
      prev = ib.r(i);
    }
    ib.emit_ret(prev);
  });
  const vm = new VirtualMachine(ib.get(), gpu);
  using x = tensor([1, 2], { device: gpu });
  await x.data();
  const submits = gpu.submitCount, dispatches = gpu.dispatchCount;
  using out = await vm.invoke("main", x) as NDArray;
  assertEquals(gpu.dispatchCount - dispatches, 20);
  assertEquals(gpu.submitCount - submits, 1, "the VM flushes once when the call ends");
  assert(!gpu.pending);
  let want = [1, 2];
  for (let i = 1; i <= 20; i++) {
    want = want.map((v, k) => (i % 2 === 0 ? v + [1, 2][k] : v * [1, 2][k]));
  }
  assertEquals(Array.from(await out.data() as Float32Array), want);
  assertEquals(gpu.submitCount - submits, 2, "the read submits its copy");
  await gpu.synchronize();
});

gpuTest("a lost device leaves the device list; findDevice finds its replacement", async () => {
  // Its own id, so the suite's shared device 0 stays alive.
  const doomed = await webgpu(7);
  assertStrictEquals(findDevice(DLDeviceType.WebGPU, 7), doomed);
  doomed.gpu.destroy();
  await doomed.gpu.lost;
  await new Promise((resolve) => setTimeout(resolve, 0)); // let the device's own lost handler run
  assertEquals(findDevice(DLDeviceType.WebGPU, 7), undefined);
  const fresh = await webgpu(7);
  assert(fresh !== doomed, "webgpu(7) acquired a fresh device");
  assertStrictEquals(findDevice(DLDeviceType.WebGPU, 7), fresh);
  fresh.gpu.destroy();
});

gpuTest(
  "dataSync() on a GPU tensor says to await data(), and the tensor stays usable",
  async (gpu) => {
    using t = tensor([1, 2], { device: gpu });
    let message = "";
    try {
      t.dataSync();
    } catch (e) {
      assertInstanceOf(e, TypeError);
      message = (e as TypeError).message;
    }
    assert(message.includes("use `await t.data()`"), message);
    assert(message.includes("webgpu(0)"), message);
    assertEquals(await t.data(), new Float32Array([1, 2]));
  },
);

gpuTest("issue 18 finding 4: N concurrent readbacks cost O(N), not O(N²)", async (gpu) => {
  // Before: each read awaited Promise.all over every error scope in flight, so 2,000
  // concurrent reads took 10 s and 2.3 GB, and 3,000 ran V8 out of memory.
  const time = async (n: number) => {
    const ts = Array.from({ length: n }, (_, i) => tensor([i, i + 1], { device: gpu }));
    const t0 = performance.now();
    const values = await Promise.all(ts.map((t) => t.data()));
    const ms = performance.now() - t0;
    values.forEach((v, i) => assertEquals([...v], [i, i + 1]));
    for (const t of ts) t.dispose();
    return ms;
  };
  await time(100); // warm up
  const small = await time(500), large = await time(4000);
  // Eight times the reads: linear is ~8x; quadratic was ~64x.
  assert(large < 24 * Math.max(small, 5), `500 reads: ${small} ms, 4000: ${large} ms`);
});

gpuTest(
  "issue 18 fuzz: concurrent readbacks mixed with uploads, kernels and disposals",
  async (gpu) => {
    // Seeded rounds: each starts N reads at once (N up to 2000) of tensors made on the GPU, some
    // freshly computed, some disposed while their read is in flight; every read must settle with
    // its values or a clean error, and the device must stay usable.
    let state = 20261125;
    const rand = (n: number) => {
      state = (state * 1103515245 + 12345) >>> 0;
      return state % n;
    };
    const add = getGlobalFunc("vm.op.add")!;
    for (let round = 0; round < 8; round++) {
      const n = 1 + rand(2000);
      const ts = Array.from({ length: n }, (_, i) => tensor([i, -i], { device: gpu }));
      const reads = ts.map(async (t, i) => {
        if (rand(4) === 0) {
          const out = add(t, t) as NDArray;
          try {
            assertEquals([...await out.data()], [2 * i, -2 * i]);
          } finally {
            out.dispose();
          }
          return;
        }
        const pending = t.data();
        if (rand(8) === 0) t.dispose(); // after the read was queued
        assertEquals([...await pending], [i, -i]);
      });
      const settled = await Promise.allSettled(reads);
      const failed = settled.filter((s) => s.status === "rejected");
      assertEquals(failed.length, 0, String((failed[0] as PromiseRejectedResult)?.reason));
      for (const t of ts) t.dispose();
    }
    using last = tensor([7], { device: gpu });
    assertEquals([...await last.data()], [7]);
  },
);
