import { assert, assertEquals, assertInstanceOf, assertThrows } from "@std/assert";
import {
  dtype,
  getGlobalFunc,
  listGlobalFuncNames,
  type NDArray,
  registerFunc,
  shape,
  ShapeTuple,
  tensor,
} from "../mod.ts";

const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args);

Deno.test("registry: registering twice needs override; names are listed sorted", () => {
  registerFunc("test.builtins.once", () => 1, { override: true });
  assertThrows(() => registerFunc("test.builtins.once", () => 2), Error, "already registered");
  registerFunc("test.builtins.once", () => 3, { override: true });
  assertEquals(call("test.builtins.once"), 3);
  const names = listGlobalFuncNames();
  assertEquals(names, [...names].sort());
  for (
    const n of [
      "vm.builtin.copy",
      "vm.builtin.alloc_storage",
      "vm.op.matmul",
      "vm.builtin.match_shape",
    ]
  ) {
    assert(names.includes(n), n);
  }
  assertEquals(getGlobalFunc("no.such"), undefined);
  assertThrows(() => registerFunc("", () => 0), TypeError);
});

Deno.test("runtime: tuples, null, copy/move, read_if_cond", async () => {
  const t = call("vm.builtin.make_tuple", 1, "two", shape(3)) as unknown[];
  assertEquals(t.length, 3);
  assertEquals(call("vm.builtin.tuple_getitem", t, 1), "two");
  assertThrows(
    () => call("vm.builtin.tuple_getitem", t, 3),
    RangeError,
    "out of range for a tuple of 3",
  );
  assertThrows(() => call("vm.builtin.tuple_getitem", 5, 0), TypeError, "expected a tuple");
  assertEquals(call("vm.builtin.null_value"), null);
  const x = {};
  assertEquals(call("vm.builtin.copy", x), x);
  assertEquals(call("vm.builtin.move", x), x);
  assertEquals(call("vm.builtin.read_if_cond", 0), false);
  assertEquals(call("vm.builtin.read_if_cond", 2), true);
  using one = tensor([1], { dtype: "int32" });
  assertEquals(call("vm.builtin.read_if_cond", one), true);
  using two = tensor([1, 2]);
  assertThrows(() => call("vm.builtin.read_if_cond", two), TypeError, "one-element tensor");
  assertEquals(await Promise.resolve(call("vm.builtin.read_if_cond", true)), true);
});

Deno.test("shape heap: store, load, match and make shapes", () => {
  const heap = call("vm.builtin.alloc_shape_heap", 4) as NDArray;
  assertEquals([heap.dtype, ...heap.dataSync()], ["int64", 0n, 0n, 0n, 0n]); // int64, as TVM
  using x = tensor(new Float32Array(6), { shape: [2, 3] });
  const s = call("vm.builtin.shape_of", x) as ShapeTuple;
  assertEquals([...s], [2, 3]);
  call("vm.builtin.store_shape", s, heap, 1, 0);
  assertEquals([...(call("vm.builtin.load_shape", heap, 0, 1) as ShapeTuple)], [3, 2]);
  // match_shape: dim 0 must equal 2 (imm), store dim 1 at heap[2]; then make (heap[2], 7).
  call("vm.builtin.match_shape", x, heap, 2, 0, 2, 1, 2, "matching x");
  assertEquals(heap.dataSync()[2], 3n);
  const made = call("vm.builtin.make_shape", heap, 2, 1, 2, 0, 7) as ShapeTuple;
  assertEquals([...made], [3, 7]);
  assertThrows(
    () => call("vm.builtin.match_shape", x, heap, 2, 0, 5, 2, 0, "matching x"),
    RangeError,
    "matching x: match_shape: dimension 0 is 2, expected 5",
  );
  assertThrows(
    () => call("vm.builtin.match_shape", x, heap, 2, 3, 0, 3, 1),
    RangeError,
    "dimension 0 is 2, expected 3",
  );
  assertThrows(
    () => call("vm.builtin.match_shape", x, heap, 3, 2, 0, 2, 0, 2, 0),
    RangeError,
    "expected 3 dimensions",
  );
  assertThrows(() => call("vm.builtin.load_shape", heap, 9), RangeError, "heap index 9");
  assertThrows(() => call("vm.builtin.make_shape", heap, 1, 9, 0), RangeError, "unknown code 9");
  assertThrows(
    () => call("vm.builtin.store_shape", s, x, 0, 1),
    TypeError,
    "expected a shape heap",
  );
  heap.release();
});

Deno.test("shape builtins: check_tensor_info, reshape, tensor_to_shape", () => {
  using x = tensor([1, 2, 3, 4, 5, 6], { shape: [2, 3] });
  assertEquals(call("vm.builtin.check_tensor_info", x, 2, dtype("float32"), "x"), null);
  assertEquals(call("vm.builtin.check_tensor_info", x, -1, null), null);
  assertThrows(
    () => call("vm.builtin.check_tensor_info", x, 3, null, "arg x"),
    RangeError,
    "arg x: check_tensor_info: expected a tensor with ndim 3, got ndim 2 (shape [2, 3])",
  );
  // As in TVM, the 3-argument form's third argument is the error context, not a dtype.
  assertEquals(call("vm.builtin.check_tensor_info", x, 2, "int32"), null);
  assertThrows(
    () => call("vm.builtin.check_tensor_info", x, 2, "int32", ""),
    TypeError,
    "expected a tensor with dtype int32, got float32",
  );
  assertThrows(() => call("vm.builtin.check_tensor_info", "x", 2), TypeError, "expected a tensor");
  const r = call("vm.builtin.reshape", x, shape(3, 2)) as NDArray;
  assertEquals(r.shape, [3, 2]);
  assertEquals([...r.dataSync()], [1, 2, 3, 4, 5, 6]);
  assert(r.storage === x.storage, "a view, not a copy");
  assertThrows(
    () => call("vm.builtin.reshape", x, shape(4, 2)),
    RangeError,
    "cannot view shape [2, 3] as [4, 2]",
  );
  using dims = tensor([4, 5], { dtype: "int32" });
  const s = call("vm.builtin.tensor_to_shape", dims) as ShapeTuple;
  assertInstanceOf(s, ShapeTuple);
  assertEquals([...s], [4, 5]);
});
