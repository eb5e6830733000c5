/**
 * KV cache checks shared by the CPU tests (`kv_cache_test.ts`) and the
 * WebGPU suite (`webgpu/builtins_suite.ts`): TVM's tests from
 * test_runtime_builtin.py, the specification's extra vectors, and the
 * memory accounting. Each takes the device the cache lives on.
 *
 * @module
 */

import { assert, assertEquals, assertRejects, assertThrows } from "@std/assert";
import {
  type AttentionKVCache,
  type Device,
  ExecBuilder,
  getGlobalFunc,
  type NDArray,
  shape,
  tensor,
  VirtualMachine,
} from "../mod.ts";

const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args);

/** An int32 tensor of `rows` rows of `[width]`, every element `value`, on `device`. */
function rowsOf(device: Device, rows: number, value: number, width = 2): NDArray {
  return tensor(new Int32Array(rows * width).fill(value), { shape: [rows, width], device });
}

/** The view's elements, read from any device; the view is released. */
async function viewValues(cache: AttentionKVCache, s?: readonly number[]): Promise<number[]> {
  const view =
    (s === undefined
      ? call("vm.builtin.attention_kv_cache_view", cache)
      : call("vm.builtin.attention_kv_cache_view", cache, shape(...s))) as NDArray;
  try {
    return [...await view.data()].map(Number);
  } finally {
    view.releaseIfUnowned();
  }
}

/** Column 0 of the cache's first `rows` rows (of width 2). */
async function column0(cache: AttentionKVCache, rows: number): Promise<number[]> {
  return (await viewValues(cache, [rows, 2])).filter((_, i) => i % 2 === 0);
}

/** TVM test_attention_kv_cache: create empty, append two rows, view them. */
export async function checkCreateAppendView(device: Device): Promise<void> {
  using init = rowsOf(device, 1, 5);
  const cache = call("vm.builtin.attention_kv_cache_create", init, shape(2, 2), 0);
  for (let i = 0; i < 2; i++) {
    using v = rowsOf(device, 1, i);
    assertEquals(await call("vm.builtin.attention_kv_cache_append", cache, v), cache);
  }
  assertEquals(await viewValues(cache as AttentionKVCache, [2, 2]), [0, 0, 1, 1]);
  assertEquals((cache as AttentionKVCache).capacity, 2, "create appended init, then reset");
  (cache as AttentionKVCache).releaseIfUnowned();
}

/** The specification's growth, pop and clear vectors, and the views' aliasing. */
export async function checkGrowthPopClear(device: Device): Promise<void> {
  using init = rowsOf(device, 1, 9);
  const c = call("vm.builtin.attention_kv_cache_create", init, [1, 2], -1) as AttentionKVCache;
  assertEquals([c.fillCount, c.capacity, c.windowPosition], [1, 1, 0]);
  const before = call("vm.builtin.attention_kv_cache_view", c) as NDArray;
  using three = tensor(new Int32Array([1, 1, 2, 2, 3, 3]), { shape: [3, 2], device });
  await call("vm.builtin.attention_kv_cache_append", c, three);
  assertEquals([c.fillCount, c.capacity], [4, 4], "1 -> 2 -> 4");
  assertEquals(await viewValues(c), [9, 9, 1, 1, 2, 2, 3, 3]);
  assertEquals([...await before.data()], [9, 9], "an old view keeps the old rows");
  before.releaseIfUnowned();
  assertThrows(
    () => call("vm.builtin.attention_kv_cache_array_popn", [c], 5),
    RangeError,
    "cannot pop 5 rows",
  );
  call("vm.builtin.attention_kv_cache_array_popn", [c], 1);
  assertEquals(c.fillCount, 3);
  const view = call("vm.builtin.attention_kv_cache_view", c) as NDArray;
  assertEquals(view.shape, [3, 2]);
  view.releaseIfUnowned();
  // Update overwrites exactly the filled rows.
  using fresh = tensor(new Int32Array([4, 4, 5, 5, 6, 6]), { shape: [3, 2], device });
  await call("vm.builtin.attention_kv_cache_update", c, fresh);
  assertEquals(await viewValues(c), [4, 4, 5, 5, 6, 6]);
  call("vm.builtin.attention_kv_cache_array_clear", [c]);
  assertEquals([c.fillCount, c.windowPosition, c.capacity], [0, 0, 4]);
  c.releaseIfUnowned();
}

/** TVM test_attention_kv_cache_window_override, with the specification's trace. */
export async function checkWindowOverride(device: Device): Promise<void> {
  using init = rowsOf(device, 16, -1);
  const c = call("vm.builtin.attention_kv_cache_create", init, [16, 2], 4) as AttentionKVCache;
  const trace: [number, number][] = [];
  let all: number[] = [];
  for (let i = 1; i <= 9; i++) {
    using v = rowsOf(device, i, i);
    await call("vm.builtin.attention_kv_cache_window_override", c, v, 16);
    trace.push([c.fillCount, c.windowPosition]);
    all = all.concat(new Array(i).fill(i));
  }
  assertEquals(trace, [[5, 5], [7, 7], [10, 10], [14, 14], [16, 3], [16, 9], [16, 16], [16, 8], [
    16,
    1,
  ]]);
  const res = await column0(c, 16);
  assertEquals(res, [9, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9]);
  const pos = (4 + 45) % 16; // TVM's model of the position: (pos + i) % 16 from 4
  assertEquals(all.slice(-16), [...res.slice(pos), ...res.slice(0, pos)]);
  c.releaseIfUnowned();
}

/** TVM test_attention_kv_cache_window_override_with_sinks. */
export async function checkWindowSinks(device: Device): Promise<void> {
  using init = rowsOf(device, 16, -1);
  const c = call("vm.builtin.attention_kv_cache_create", init, [16, 2], 0) as AttentionKVCache;
  const sinks = 2;
  let pos = 0, hasSink = false;
  for (let i = 0; i < 40; i++) {
    using v = rowsOf(device, 1, i);
    await call("vm.builtin.attention_kv_cache_window_override_with_sinks", c, v, 16, sinks);
    if (hasSink) pos = Math.max((pos + 1) % 16, sinks);
    else {
      pos += 1;
      hasSink = pos >= sinks;
    }
  }
  assertEquals([pos, c.windowPosition], [12, 12]);
  const res = await column0(c, 16);
  assertEquals(res, [0, 1, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 26, 27, 28, 29]);
  const all = Array.from({ length: 40 }, (_, i) => i);
  assertEquals(
    [...all.slice(0, 2), ...all.slice(-14)],
    [...res.slice(0, 2), ...res.slice(pos), ...res.slice(2, pos)],
  );
  c.releaseIfUnowned();
}

/** Every error case, on the device. */
export function checkErrors(device: Device): void {
  using init = rowsOf(device, 1, 0);
  const c = call("vm.builtin.attention_kv_cache_create", init, [4, 2], 0) as AttentionKVCache;
  using floats = tensor(new Float32Array(2), { shape: [1, 2], device });
  using wide = rowsOf(device, 1, 0, 3);
  using two = rowsOf(device, 2, 0);
  using big = rowsOf(device, 5, 0);
  assertThrows(
    () => call("vm.builtin.attention_kv_cache_append", c, floats),
    TypeError,
    "value has dtype float32, the cache int32",
  );
  assertThrows(
    () => call("vm.builtin.attention_kv_cache_append", c, wide),
    RangeError,
    "value of shape [1, 3] does not have rows of shape [2]",
  );
  assertThrows(
    () => call("vm.builtin.attention_kv_cache_update", c, two),
    RangeError,
    "value has 2 rows, but the cache has 0 filled",
  );
  assertThrows(
    () => call("vm.builtin.attention_kv_cache_window_override", c, big, 4),
    RangeError,
    "more than max_cache_size 4",
  );
  assertThrows(
    () => call("vm.builtin.attention_kv_cache_window_override_with_sinks", c, two, 4, 3),
    RangeError,
    "more than max_cache_size 4 minus 3 sinks",
  );
  assertThrows(
    () => call("vm.builtin.attention_kv_cache_view", c, shape(1, 2), 0),
    TypeError,
    "expects 1 or 2 arguments, got 3",
  );
  assertThrows(
    () => call("vm.builtin.attention_kv_cache_view", c, shape(1, 2)),
    RangeError,
    "does not match the 0 filled rows",
  );
  assertThrows(() => call("vm.builtin.attention_kv_cache_append", init, init), TypeError);
  assertThrows(() => call("vm.builtin.attention_kv_cache_array_clear", c), TypeError, "tuple");
  assertThrows(
    () => call("vm.builtin.attention_kv_cache_create", init, [4, 3], 0),
    RangeError,
    "does not have rows of shape [3]",
  );
  assertThrows(
    () => call("vm.builtin.attention_kv_cache_create", init, [4, 2], 5),
    RangeError,
    "init_fill_count 5 exceeds the capacity 4",
  );
  c.releaseIfUnowned();
  assertThrows(() => call("vm.builtin.attention_kv_cache_append", c, init), ReferenceError);
}

/**
 * In a VM: the cache's memory comes from the VM's allocator (it shows in
 * `memory_stats()`), goes back when the user disposes it, and growing it
 * never waits for the device (one submit per call on a GPU).
 */
export async function checkInVM(device: Device): Promise<void> {
  const ib = new ExecBuilder();
  ib.function("prefill", 1, () => {
    ib.emit_call("vm.builtin.attention_kv_cache_create", [ib.r(0), shape(1, 4), ib.imm(0)], {
      dst: ib.r(1),
    });
    for (let i = 0; i < 3; i++) {
      ib.emit_call("vm.builtin.attention_kv_cache_append", [ib.r(1), ib.r(0)], { dst: ib.r(1) });
    }
    ib.emit_ret(ib.r(1));
  });
  ib.function("decode", 2, () => {
    ib.emit_call("vm.builtin.attention_kv_cache_append", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("vm.builtin.attention_kv_cache_view", [ib.r(2)], { dst: ib.r(3) });
    ib.emit_call("vm.op.add", [ib.r(3), ib.r(3)], { dst: ib.r(4) });
    ib.emit_ret(ib.r(4));
  });
  const vm = new VirtualMachine(ib.get(), device);
  using row = tensor(new Float32Array([1, 2, 3, 4]), { shape: [1, 4], device });
  const gpu = device as { submitCount?: number };
  const submits = gpu.submitCount ?? 0;
  const cache = await vm.invoke("prefill", row) as AttentionKVCache;
  if (gpu.submitCount !== undefined) assertEquals(gpu.submitCount, submits + 1, "no waits");
  assertEquals([cache.fillCount, cache.capacity], [3, 4]);
  assert(vm.memory_stats().liveBytes >= 4 * 16, "the cache's rows are the VM's memory");
  using doubled = await vm.invoke("decode", cache, row) as NDArray;
  assertEquals(doubled.shape, [4, 4]);
  assertEquals([...await doubled.data()], [2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6, 8]);
  assertEquals(cache.fillCount, 4);
  doubled.dispose();
  cache.dispose();
  assertEquals(vm.memory_stats().liveBytes, 0, "disposing the cache frees its rows");
  await assertRejects(() => vm.invoke("decode", cache, row), Error, "was used after");
}
