// Tests ported from TVM's tests/python/relax/test_runtime_builtin.py (and the
// vectors derived in the builtins specification, §6.5) for the builtin.cc
// functions: shape heap codes, prim values, the check_*_info family, tuples,
// call_tir_dyn, invoke_debug_func, ensure_zero_offset.
import { assert, assertEquals, assertRejects, assertStrictEquals, assertThrows } from "@std/assert";
import {
  Closure,
  ExecBuilder,
  getGlobalFunc,
  type NDArray,
  registerFunc,
  shape,
  type ShapeTuple,
  tensor,
  VirtualMachine,
  VMError,
} from "../mod.ts";
import { MakeShapeCode, MatchShapeCode } from "../builtins/shape_lowering/shape_heap.ts";

const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args);
const { AssertEqualToImm, StoreToHeap, NoOp, AssertEqualToLoad } = MatchShapeCode;
const { UseImm, LoadShape } = MakeShapeCode;

/** A shape heap holding `values`: an int64 tensor, as TVM's tests make it. */
function heapOf(values: number[]): NDArray {
  return tensor(values, { dtype: "int64" });
}

Deno.test("TVM test_make_shape: immediates and heap loads", () => {
  using heap = heapOf([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  const s = call("vm.builtin.make_shape", heap, 3, UseImm, 10, LoadShape, 0, LoadShape, 2);
  assertEquals([...(s as ShapeTuple)], [10, 0, 2]);
  // No heap is needed when no code loads from it.
  assertEquals([...call("vm.builtin.make_shape", null, 2, UseImm, 4, UseImm, 5) as ShapeTuple], [
    4,
    5,
  ]);
});

Deno.test("TVM test_match_shape: store, assert, and the two mismatches", () => {
  using heap = heapOf(new Array(10).fill(0));
  const s = shape(1, 2, 3);
  using x = tensor(new Float64Array(6), { shape: [1, 2, 3] });
  call("vm.builtin.match_shape", s, heap, 3, AssertEqualToImm, 1, StoreToHeap, 2, NoOp, 0, "");
  assertEquals(heap.dataSync()[2], 2n);
  call("vm.builtin.match_shape", x, heap, 3, AssertEqualToImm, 1, AssertEqualToLoad, 2, 0, 3, "");
  assertThrows(
    () => call("vm.builtin.match_shape", s, heap, 2, AssertEqualToImm, 1, StoreToHeap, 2, ""),
    RangeError,
    "expected 2 dimensions",
  );
  assertThrows(
    () =>
      call("vm.builtin.match_shape", s, heap, 3, AssertEqualToImm, 2, StoreToHeap, 2, NoOp, 0, ""),
    RangeError,
    "dimension 0 is 1, expected 2",
  );
});

Deno.test("alloc_shape_heap accepts %vm first, as TVM's compiler emits it", async () => {
  const ib = new ExecBuilder();
  ib.function("main", 0, () => {
    ib.emit_call("vm.builtin.alloc_shape_heap", [ib.vm_state(), ib.imm(3)], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  using heap = await new VirtualMachine(ib.get()).invoke("main") as NDArray;
  assertEquals(heap.shape, [3]);
  assertEquals([heap.dtype, ...heap.dataSync()], ["int64", 0n, 0n, 0n]);
});

Deno.test("match_prim_value and make_prim_value: every code, and their errors", () => {
  using heap = heapOf([0, 1, 2, 7]);
  assertEquals(call("vm.builtin.make_prim_value", heap, LoadShape, 3), 7);
  assertEquals(call("vm.builtin.make_prim_value", null, UseImm, 9), 9);
  assertThrows(
    () => call("vm.builtin.make_prim_value", heap, 5, 0),
    RangeError,
    "unknown shape code number 5",
  );
  assertThrows(() => call("vm.builtin.make_prim_value", null, LoadShape, 0), TypeError, "null");
  assertThrows(() => call("vm.builtin.make_prim_value", heap, LoadShape, 4), RangeError, "heap");

  assertEquals(call("vm.builtin.match_prim_value", 4, heap, StoreToHeap, 1, ""), null);
  assertEquals(heap.dataSync()[1], 4n);
  call("vm.builtin.match_prim_value", 4, heap, AssertEqualToLoad, 1, "");
  call("vm.builtin.match_prim_value", 9, null, AssertEqualToImm, 9, "");
  call("vm.builtin.match_prim_value", 123, null, NoOp, 0);
  assertThrows(
    () => call("vm.builtin.match_prim_value", 5, heap, AssertEqualToLoad, 1, "ctx"),
    RangeError,
    "ctx: match_prim_value: the value is 5, expected 4 (heap[1], populated earlier)",
  );
  assertThrows(
    () => call("vm.builtin.match_prim_value", 5, heap, AssertEqualToImm, 6, "ctx "),
    RangeError,
    "ctx: match_prim_value: the value is 5, expected the constant 6",
  );
  assertThrows(
    () => call("vm.builtin.match_prim_value", 1.5, heap, StoreToHeap, 0, ""),
    TypeError,
    "must be an integer",
  );
  assertThrows(
    () => call("vm.builtin.match_prim_value", 1, heap, 7, 0, ""),
    RangeError,
    "unknown match code",
  );
  assertThrows(
    () => call("vm.builtin.match_prim_value", 1, null, StoreToHeap, 0, ""),
    TypeError,
    "needs a shape heap",
  );
});

Deno.test("TVM test_check_shape_info", () => {
  const s = shape(1, 2, 3);
  assertEquals(call("vm.builtin.check_shape_info", s, 3, ""), null);
  assertEquals(call("vm.builtin.check_shape_info", s, -1, ""), null);
  assertThrows(
    () => call("vm.builtin.check_shape_info", s, 2, ""),
    RangeError,
    "check_shape_info: expected a shape with ndim 2, got (1, 2, 3)",
  );
  // An array is not a shape here (TVM: no conversion for this check).
  assertThrows(() => call("vm.builtin.check_shape_info", [], 2, ""), TypeError, "a tuple of 0");
  assertThrows(() => call("vm.builtin.check_shape_info", null, 2, "c"), TypeError, "c: ");
});

Deno.test("TVM test_check_tensor_info: the 3- and 4-argument forms", () => {
  using x = tensor(new Int32Array(6), { shape: [2, 3] });
  for (
    const args of [[2, "int32", ""], [-1, "int32", ""], [2, null, ""], [-1, null, ""], [2, ""], [
      -1,
      "",
    ]]
  ) {
    assertEquals(call("vm.builtin.check_tensor_info", x, ...args), null, JSON.stringify(args));
  }
  assertThrows(
    () => call("vm.builtin.check_tensor_info", x, 3, "int32", ""),
    RangeError,
    "expected a tensor with ndim 3, got ndim 2",
  );
  assertThrows(
    () => call("vm.builtin.check_tensor_info", x, 2, "float32", "myerror"),
    TypeError,
    "myerror: check_tensor_info: expected a tensor with dtype float32, got int32",
  );
  // 3 arguments: "myerror" is the context of the ndim error, not a dtype.
  assertThrows(
    () => call("vm.builtin.check_tensor_info", x, 3, "myerror"),
    RangeError,
    "myerror: check_tensor_info: expected a tensor with ndim 3",
  );
  assertThrows(() => call("vm.builtin.check_tensor_info", [], 2, null, ""), TypeError);
  assertThrows(
    () => call("vm.builtin.check_tensor_info", x, "2", null, ""),
    TypeError,
    "ndim must be an integer",
  );
});

Deno.test("TVM test_check_tuple_info", () => {
  using x = tensor(new Int32Array(6), { shape: [2, 3] });
  const t = [x, x, x];
  assertEquals(call("vm.builtin.check_tuple_info", t, 3, ""), null);
  assertThrows(
    () => call("vm.builtin.check_tuple_info", t, 2, ""),
    RangeError,
    "expected a tuple with 2 elements, got one with 3 elements",
  );
  assertThrows(() => call("vm.builtin.check_tuple_info", x, 2, ""), TypeError, "expected a tuple");
});

Deno.test("TVM test_check_func_info: packed functions and closures pass", () => {
  assertEquals(call("vm.builtin.check_func_info", (v: unknown) => v, ""), null);
  assertEquals(call("vm.builtin.check_func_info", new Closure("f", () => 1), ""), null);
  using x = tensor([1]);
  assertThrows(
    () => call("vm.builtin.check_func_info", x, "myerror"),
    TypeError,
    "myerror: check_func_info: expected a function, got NDArray",
  );
});

Deno.test("check_prim_value_info: kinds per dtype, objects rejected", () => {
  for (const [v, dt] of [[3, "int64"], [3, "float32"], [2.5, "float64"], [true, "bool"]]) {
    assertEquals(call("vm.builtin.check_prim_value_info", v, dt, ""), null, `${v} ${dt}`);
  }
  assertEquals(call("vm.builtin.check_prim_value_info", 300, "int8", ""), null, "no range check");
  assertThrows(
    () => call("vm.builtin.check_prim_value_info", 3.5, "int64", ""),
    TypeError,
    "expected a value of dtype int64, got number 3.5",
  );
  assertThrows(
    () => call("vm.builtin.check_prim_value_info", shape(1), "int64", "c"),
    TypeError,
    "c: check_prim_value_info: expected a value of dtype int64, got ShapeTuple",
  );
  assertThrows(() => call("vm.builtin.check_prim_value_info", null, "int64", ""), TypeError);
  assertThrows(() => call("vm.builtin.check_prim_value_info", "3", "int32", ""), TypeError);
});

Deno.test("TVM test_tuple_getitem returns the same object", () => {
  using x = tensor(new Int32Array(6), { shape: [2, 3] });
  using y = tensor(new Int32Array(6), { shape: [2, 3] });
  const t = call("vm.builtin.make_tuple", x, y);
  assertStrictEquals(call("vm.builtin.tuple_getitem", t, 0), x);
  assertStrictEquals(call("vm.builtin.tuple_getitem", t, 1), y);
});

Deno.test("tuple_reset_item sets a field to null in place and releases it", async () => {
  const plain = ["a", "b"];
  assertEquals(call("vm.builtin.tuple_reset_item", plain, 0), null);
  assertEquals(plain, [null, "b"]);
  assertThrows(() => call("vm.builtin.tuple_reset_item", plain, 2), RangeError, "out of range");
  assertThrows(() => call("vm.builtin.tuple_reset_item", 3, 0), TypeError, "expected a tuple");
  assertThrows(() => call("vm.builtin.tuple_reset_item", Object.freeze([1]), 0), TypeError);
  // In a VM: a weight consumed from the bundled tuple is freed at once.
  const ib = new ExecBuilder();
  ib.function("main", 0, () => {
    ib.emit_call("vm.builtin.alloc_shape_heap", [ib.imm(1000)], { dst: ib.r(0) });
    ib.emit_call("vm.builtin.make_tuple", [ib.r(0), ib.imm(1)], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.null_value", [], { dst: ib.r(0) });
    ib.emit_call("vm.builtin.tuple_reset_item", [ib.r(1), ib.imm(0)]);
    ib.emit_ret(ib.r(1));
  });
  const vm = new VirtualMachine(ib.get(), undefined, { allocator: "naive" });
  assertEquals(await vm.invoke("main"), [null, 1]);
  assertEquals(vm.memory_stats().liveBytes, 0);
});

Deno.test("call_tir_dyn unpacks the trailing shape into scalar arguments", async () => {
  const seen: unknown[][] = [];
  const f = (...args: unknown[]) => {
    seen.push(args);
    return "done";
  };
  assertEquals(call("vm.builtin.call_tir_dyn", f, "A", "B", shape(4, 5)), "done");
  assertEquals(call("vm.builtin.call_tir_dyn", new Closure("g", f), [7]), "done");
  assertEquals(seen, [["A", "B", 4, 5], [7]]);
  assertThrows(() => call("vm.builtin.call_tir_dyn", f), TypeError, "no shape");
  assertThrows(() => call("vm.builtin.call_tir_dyn", f, "A", "B"), TypeError, "must be a shape");
  assertThrows(() => call("vm.builtin.call_tir_dyn", 3, shape()), TypeError, "expected a function");
  // Through a VM, with a packed function standing for the TIR kernel.
  registerFunc("test.tir.scale", (x: NDArray, out: NDArray, n: number) => {
    const src = x.cpuView() as Float32Array, dst = out.cpuView() as Float32Array;
    for (let i = 0; i < n; i++) dst[i] = 2 * src[i];
  }, { override: true });
  const ib = new ExecBuilder();
  ib.declare_function("test.tir.scale");
  ib.function("main", 2, () => {
    ib.emit_call("vm.builtin.shape_of", [ib.r(0)], { dst: ib.r(2) });
    ib.emit_call("vm.builtin.call_tir_dyn", [ib.f("test.tir.scale"), ib.r(0), ib.r(1), ib.r(2)]);
    ib.emit_ret(ib.r(1));
  });
  using x = tensor([1, 2, 3]);
  using out = tensor([0, 0, 0]);
  await new VirtualMachine(ib.get()).invoke("main", x, out);
  assertEquals([...out.dataSync()], [2, 4, 6]);
});

Deno.test("invoke_debug_func calls the registered hook with line info and returns null", async () => {
  const calls: unknown[][] = [];
  registerFunc("test.debug.hook", (...args: unknown[]) => {
    calls.push(args);
    return "ignored";
  }, { override: true });
  assertEquals(call("vm.builtin.invoke_debug_func", null, "test.debug.hook", "a.py:3", 1, 2), null);
  assertEquals(calls, [["a.py:3", 1, 2]]);
  registerFunc("test.debug.async", () => Promise.resolve(5), { override: true });
  assertEquals(await call("vm.builtin.invoke_debug_func", null, "test.debug.async", ""), null);
  assertThrows(
    () => call("vm.builtin.invoke_debug_func", 1, "test.debug.hook", ""),
    TypeError,
    "io_effect must be null",
  );
  assertThrows(
    () => call("vm.builtin.invoke_debug_func", null, "test.debug.nowhere", ""),
    ReferenceError,
    `no packed function "test.debug.nowhere"`,
  );
  // debug_print through invoke_debug_func, as nn.print_ compiles.
  const ib = new ExecBuilder();
  ib.function("main", 1, () => {
    ib.emit_call("vm.builtin.invoke_debug_func", [
      ib.void_arg(),
      "vm.builtin.debug_print",
      "model.py:12",
      ib.r(0),
    ], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const logged: unknown[] = [];
  const original = console.log;
  console.log = (...a: unknown[]) => logged.push(a.join(" "));
  try {
    using x = tensor([1, 2, 3, 4], { shape: [2, 2], dtype: "int32" });
    assertEquals(await new VirtualMachine(ib.get()).invoke("main", x), null);
  } finally {
    console.log = original;
  }
  assertEquals(logged, ["model.py:12: shape = (2, 2), dtype = int32, data =\n[1, 2, 3, 4]"]);
  const bad = new ExecBuilder();
  bad.function("main", 0, () => {
    bad.emit_call("vm.builtin.invoke_debug_func", [bad.void_arg(), "no.such.hook", ""], {
      dst: bad.r(0),
    });
    bad.emit_ret(bad.r(0));
  });
  await assertRejects(() => new VirtualMachine(bad.get()).invoke("main"), VMError, "no.such.hook");
});

Deno.test("ensure_zero_offset: the tensor itself at offset 0, else a copy at offset 0", async () => {
  const ib = new ExecBuilder();
  ib.function("main", 0, () => {
    ib.emit_call("vm.builtin.alloc_storage", [ib.vm_state(), [4], ib.imm(0), "float32"], {
      dst: ib.r(0),
    });
    ib.emit_call("vm.builtin.alloc_tensor", [ib.r(0), ib.imm(8), [2], "float32"], {
      dst: ib.r(1),
    });
    ib.emit_call("vm.builtin.alloc_tensor", [ib.r(0), ib.imm(0), [2], "float32"], {
      dst: ib.r(2),
    });
    ib.emit_call("vm.builtin.ensure_zero_offset", [ib.r(1)], { dst: ib.r(3) });
    ib.emit_call("vm.builtin.ensure_zero_offset", [ib.r(2)], { dst: ib.r(4) });
    ib.emit_call("vm.builtin.make_tuple", [ib.r(1), ib.r(2), ib.r(3), ib.r(4)], { dst: ib.r(5) });
    ib.emit_ret(ib.r(5));
  });
  const [view, zero, copied, same] = await new VirtualMachine(ib.get()).invoke("main") as NDArray[];
  assertEquals([view.byteOffset, copied.byteOffset], [8, 0]);
  assert(copied.storage !== view.storage, "a copy in its own storage");
  assertStrictEquals(same, zero);
  (view.cpuView() as Float32Array).set([5, 6]);
  assertEquals([...copied.dataSync()], [0, 0], "copied before the write");
  assertThrows(() => call("vm.builtin.ensure_zero_offset", 3), TypeError, "expected a tensor");
  for (const t of [view, zero, copied]) t.dispose();
});

Deno.test("shape heaps: int64 as TVM's, float64 still accepted, other dtypes and huge values rejected", () => {
  using legacy = tensor([0, 0], { dtype: "float64" });
  call("vm.builtin.match_shape", shape(7, 8), legacy, 2, StoreToHeap, 0, StoreToHeap, 1, "");
  assertEquals([...legacy.dataSync()], [7, 8]);
  assertEquals([...call("vm.builtin.make_shape", legacy, 1, LoadShape, 1) as ShapeTuple], [8]);
  using int32 = tensor([0], { dtype: "int32" });
  assertThrows(
    () => call("vm.builtin.make_shape", int32, 1, LoadShape, 0),
    TypeError,
    "expected a shape heap (an int64 CPU tensor",
  );
  using huge = tensor([2n ** 60n]);
  assertThrows(
    () => call("vm.builtin.make_prim_value", huge, LoadShape, 0),
    RangeError,
    "heap[0] = 1152921504606846976 is beyond 2^53",
  );
});

Deno.test("tensor_to_shape: int64 input (TVM's shape_to_tensor output), any integer dtype", () => {
  using i64 = tensor([2n, 3n]);
  assertEquals([...call("vm.builtin.tensor_to_shape", i64) as ShapeTuple], [2, 3]);
  using i16 = tensor([7], { dtype: "int16" });
  assertEquals([...call("vm.builtin.tensor_to_shape", i16) as ShapeTuple], [7]);
  // A shape has no negative dimensions (issue 9, finding 9).
  using negative = tensor([-1], { dtype: "int16" });
  assertThrows(() => call("vm.builtin.tensor_to_shape", negative), RangeError, "dimension 0 = -1");
  using huge = tensor([2n ** 62n]);
  assertThrows(
    () => call("vm.builtin.tensor_to_shape", huge),
    RangeError,
    "element 0 (4611686018427387904) is not an integer below 2^53",
  );
  using frac = tensor([1.5]);
  assertThrows(() => call("vm.builtin.tensor_to_shape", frac), RangeError, "element 0 (1.5)");
  using two = tensor([[1n]]);
  assertThrows(() => call("vm.builtin.tensor_to_shape", two), TypeError, "1-D");
});

Deno.test("prim values take bigints (int64 scalars) as integers", () => {
  using heap = heapOf([0, 0]);
  call("vm.builtin.match_prim_value", 5n, heap, StoreToHeap, 1n, "");
  assertEquals(call("vm.builtin.make_prim_value", heap, LoadShape, 1), 5);
  assertEquals(call("vm.builtin.check_prim_value_info", 2n ** 62n, "int64", ""), null);
  assertThrows(
    () => call("vm.builtin.match_prim_value", 2n ** 62n, heap, StoreToHeap, 0, ""),
    TypeError,
    "must be an integer",
  );
});
