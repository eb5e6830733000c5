/**
 * The pooled allocator (devices/pooled_allocator.ts) and the TypedArray
 * views tensors cache (`NDArray.cpuView`, `Storage.hostView`): reuse never
 * hands a live tensor's memory to another, a reused block's cached view is
 * only reused when it fits, and the counters stay exact.
 */

import {
  assert,
  assertEquals,
  assertInstanceOf,
  assertNotStrictEquals,
  assertStrictEquals,
  assertThrows,
} from "@std/assert";
import { activateAllocators } from "../devices/allocation_context.ts";
import { cpu } from "../devices/cpu_device.ts";
import { MemoryScope } from "../devices/memory_scope.ts";
import { NDArray } from "../devices/ndarray.ts";
import { PooledAllocator, sizeClass } from "../devices/pooled_allocator.ts";
import { ExecBuilder, tensor, VirtualMachine } from "../mod.ts";
import { OPS, plainChain, smallOpsProgram } from "../bench/small_ops_program.ts";

/** Runs `body` with a fresh pooled allocator active, as a VM's loop does. */
function withPool(body: (pool: PooledAllocator) => void): void {
  const scope = new MemoryScope([cpu()], "pooled");
  const previous = activateAllocators(scope);
  try {
    body(scope.allocatorFor(cpu()) as PooledAllocator);
  } finally {
    activateAllocators(previous);
  }
}

Deno.test("sizeClass: 16 bytes at least, powers of two up to 1 MiB, then whole MiB", () => {
  const MIB = 2 ** 20;
  const cases: [number, number][] = [
    [0, 16],
    [1, 16],
    [16, 16],
    [17, 32],
    [32, 32],
    [33, 64],
    [1000, 1024],
    [MIB - 1, MIB],
    [MIB, MIB],
    [MIB + 1, 2 * MIB],
    [5 * MIB, 5 * MIB],
    [5 * MIB + 3, 6 * MIB],
  ];
  for (const [n, want] of cases) assertEquals(sizeClass(n), want, `sizeClass(${n})`);
});

Deno.test("pooled allocator: live storages never share a block; a released block is reused", () => {
  const pool = new PooledAllocator(cpu());
  const a = pool.alloc(16).retain(), b = pool.alloc(12).retain();
  assertNotStrictEquals(a.block, b.block, "two live storages of one class");
  const blockA = a.block;
  a.release();
  const c = pool.alloc(10).retain();
  assertStrictEquals(c.block, blockA, "the released block comes back");
  assertNotStrictEquals(c.block, b.block);
  assertEquals(pool.stats(), {
    liveBytes: 32,
    peakBytes: 32,
    allocatedBytes: 32,
    servedBytes: 48,
    poolHits: 1,
    poolMisses: 2,
    liveBlocks: 2,
  });
  b.release();
  c.release();
  const big = pool.alloc(3 * 2 ** 20 + 1).retain();
  big.release();
  assertStrictEquals(pool.alloc(3 * 2 ** 20 + 5).block, big.block, "large classes pool too");
  assertEquals(pool.stats().poolHits, 2);
});

Deno.test("pooled allocator: clear() destroys the pooled blocks only", () => {
  const pool = new PooledAllocator(cpu());
  const live = pool.alloc(64).retain();
  for (const n of [16, 200, 2 ** 21]) pool.alloc(n).release();
  assertEquals(pool.stats().liveBlocks, 4);
  pool.clear();
  assertEquals(pool.stats().liveBlocks, 1);
  assertEquals(pool.stats().liveBytes, 64);
  live.release();
  assertEquals(pool.alloc(16).retain().refCount, 1, "allocates again after clear");
});

Deno.test("pooled allocator: a bad size throws the same errors as before", () => {
  const pool = new PooledAllocator(cpu());
  for (const n of [-1, 1.5, NaN, 2 ** 40]) {
    assertThrows(() => pool.alloc(n), RangeError, `Cannot allocate ${n} bytes`);
  }
});

Deno.test("cpuView: a reused block brings its view; the old tensor's use throws", () => {
  withPool(() => {
    const first = NDArray.empty([4], "float32").retain();
    const view = first.cpuView() as Float32Array;
    assertStrictEquals(first.cpuView(), view, "cached on the tensor");
    view.set([1, 2, 3, 4]);
    first.release();
    assertThrows(() => first.cpuView(), ReferenceError, "used after its memory was released");
    const second = NDArray.empty([4], "float32").retain();
    assertStrictEquals(second.storage.block, view.buffer, "same pooled block");
    assertStrictEquals(second.cpuView(), view, "and the same view object");
    const third = NDArray.empty([4], "float32").retain();
    assertNotStrictEquals(
      third.cpuView().buffer,
      view.buffer,
      "a live tensor's block is not shared",
    );
    second.release();
    third.release();
  });
});

Deno.test("cpuView: a reused block's view is replaced when the dtype, length or offset differ", () => {
  withPool(() => {
    const f = NDArray.empty([4], "float32").retain();
    const fv = f.cpuView();
    f.release();
    const i = NDArray.empty([4], "int32").retain(); // same 16-byte class
    const iv = i.cpuView();
    assertInstanceOf(iv, Int32Array);
    assertStrictEquals(iv.buffer, fv.buffer);
    assertEquals(iv.length, 4);
    i.release();
    const short = NDArray.empty([3], "int32").retain();
    assertEquals(short.cpuView().length, 3);
    assertEquals(short.size, 3);
    // A view at an offset into the same storage gets its own TypedArray.
    const tail = new NDArray(short.storage, 4, [2], "int32").retain();
    (short.cpuView() as Float32Array).set([7, 8, 9]);
    assertEquals([...tail.cpuView()], [8, 9]);
    assertEquals(tail.cpuView().byteOffset, 4);
    assertEquals(short.cpuView().byteOffset, 0);
    tail.release();
    short.release();
  });
});

Deno.test("cpuView: a tensor whose storage was killed cannot be read through its cached view", () => {
  withPool(() => {
    const t = NDArray.empty([2], "float32").retain();
    t.cpuView();
    t.storage.kill();
    assert(t.disposed);
    assertThrows(() => t.cpuView(), ReferenceError, "used after its memory was released");
    t.release();
  });
});

Deno.test("the 200-op chain: right values, every block back in the pool, all reuse from the 2nd call", async () => {
  const vm = new VirtualMachine(smallOpsProgram());
  const x0 = [1, -2, 3, -4], a = [0.25, 0.5, 0.75, 1], b = [0.5, 0.5, 0.5, 0.5];
  using tx = tensor(x0), ta = tensor(a), tb = tensor(b);
  const want = plainChain(Float32Array.from(x0), Float32Array.from(a), Float32Array.from(b));
  let afterFirst = vm.memory_stats();
  for (let call = 0; call < 3; call++) {
    using out = await vm.invoke("chain", tx, ta, tb) as NDArray;
    assertEquals(out.dataSync(), want);
    if (call === 0) afterFirst = vm.memory_stats();
  }
  const s = vm.memory_stats();
  assertEquals(s.liveBytes, 0);
  assertEquals(s.poolMisses, afterFirst.poolMisses, "no new block after the first call");
  assertEquals(s.poolHits - afterFirst.poolHits, 2 * OPS);
  assert(s.peakBytes <= 3 * 16, `liveness keeps at most a few blocks live: ${s.peakBytes}`);
});

Deno.test("a VM result is a tensor of its own even when its block is reused right after", async () => {
  const ib = new ExecBuilder();
  ib.function("twice", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const vm = new VirtualMachine(ib.get());
  using x = tensor([1, 2]);
  const first = await vm.invoke("twice", x) as NDArray;
  using second = await vm.invoke("twice", first) as NDArray;
  assertNotStrictEquals(second.storage.block, first.storage.block);
  assertEquals([...first.dataSync(), ...second.dataSync()], [2, 4, 4, 8]);
  first.dispose();
  using third = await vm.invoke("twice", x) as NDArray; // takes first's block
  assertEquals([...second.dataSync(), ...third.dataSync()], [4, 8, 2, 4]);
  assertThrows(() => first.dataSync(), ReferenceError);
});
