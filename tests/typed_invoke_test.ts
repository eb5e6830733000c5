/**
 * Typed calls: `invoke<T>` states the expected result, `invokeTensor`
 * checks that it is a tensor, and `NDArray.dtype` is the `TensorDType`
 * union. The type-level assertions are checked by `deno check` (and by
 * `deno test`, which type-checks first).
 */

import { assertEquals, assertInstanceOf, assertRejects } from "@std/assert";
import {
  ExecBuilder,
  NDArray,
  registerFunc,
  shape,
  tensor,
  type TensorDType,
  VirtualMachine,
  VMError,
} from "../mod.ts";

registerFunc("test.typed.three", () => 3, { override: true });

function program() {
  const ib = new ExecBuilder();
  ib.function("double", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("pair", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("vm.op.multiply", [ib.r(0), ib.r(0)], { dst: ib.r(2) });
    ib.emit_call("vm.builtin.make_tuple", [ib.r(1), ib.r(2)], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  ib.function("three", { num_inputs: 0 }, () => {
    ib.emit_call("test.typed.three", [], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  ib.function("shape", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.copy", [shape(2, 3)], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  return ib.get();
}

Deno.test("invokeTensor resolves to an NDArray without a cast, also under vm.with()", async () => {
  const vm = new VirtualMachine(program());
  using x = tensor([1, 2, 3]);
  using y = await vm.invokeTensor("double", x);
  const typed: NDArray = y; // no `as NDArray`
  assertInstanceOf(typed, NDArray);
  assertEquals([...await y.data()], [2, 4, 6]);
  using z = await vm.with({ fuel: 100 }).invokeTensor("double", y);
  assertEquals([...await z.data()], [4, 8, 12]);
});

Deno.test("invokeTensor rejects other results with a VMError saying what came back, and frees it", async () => {
  const vm = new VirtualMachine(program());
  using x = tensor([1, 2, 3]);
  const before = vm.memory_stats().liveBytes;
  const e = await assertRejects(() => vm.invokeTensor("pair", x), VMError);
  assertEquals(
    e.message,
    "The result is an array (tuple) of 2 values, not a tensor (NDArray): call invoke() for results of other kinds (in @pair)",
  );
  assertEquals(e.functionName, "pair");
  assertEquals(vm.memory_stats().liveBytes, before, "the tuple's tensors were released");
  await assertRejects(() => vm.invokeTensor("three"), VMError, "The result is the number 3, not");
  await assertRejects(
    () => vm.invokeTensor("shape"),
    VMError,
    "The result is the shape (2, 3), not",
  );
  await assertRejects(() => vm.invokeTensor("nope"), VMError, 'No VM function named "nope"');
  using y = await vm.invokeTensor("double", x);
  assertEquals([...y.dataSync()], [2, 4, 6], "the VM runs on");
});

Deno.test("invoke<T> and get<T> type the result as the caller states", async () => {
  const vm = new VirtualMachine(program());
  const three: number = await vm.invoke<number>("three");
  assertEquals(three + 1, 4);
  const [a, b] = await vm.get<[NDArray, NDArray]>("pair")(tensor([2]));
  assertEquals([a.dataSync()[0], b.dataSync()[0]], [4, 4]);
  a.dispose();
  b.dispose();
  const untyped = await vm.invoke("three");
  // @ts-expect-error without a type argument the result is unknown
  const sum: number = untyped + 1;
  assertEquals(sum, 4);
});

Deno.test("NDArray.dtype is the TensorDType union", () => {
  using t = tensor([1, 2], { dtype: "int32" });
  const d: TensorDType = t.dtype;
  assertEquals(d, "int32");
  // @ts-expect-error "float128" is not a TensorDType
  const bad: typeof t.dtype = "float128";
  assertEquals(typeof bad, "string");
});
