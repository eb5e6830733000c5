// int64, float16 and bfloat16 on the CPU; tests/webgpu/dtypes_suite.ts runs the same checks on WebGPU.
import { assertEquals } from "@std/assert";
import { cpu, getGlobalFunc, tensor } from "../mod.ts";
import {
  checkCasts,
  checkCopies,
  checkHalfArithmetic,
  checkHalfValues,
  checkInt64Arithmetic,
  checkInt64Values,
} from "./_dtype_checks.ts";

Deno.test("int64 tensors hold every value exactly; data() is a BigInt64Array", () =>
  checkInt64Values(cpu()));
Deno.test("float16 and bfloat16 tensors round to nearest even; values read back exactly", () =>
  checkHalfValues(cpu()));
Deno.test("cast to and from int64, float16 and bfloat16: the reference values", () =>
  checkCasts(cpu()));
Deno.test("int64, float16 and bfloat16 tensors copy and transpose unchanged", () =>
  checkCopies(cpu()));
Deno.test("int64 arithmetic wraps, divides as int32 does, broadcasts and reduces", () =>
  checkInt64Arithmetic(cpu()));
Deno.test("float16 and bfloat16 operands: an error that says to cast to float32", () =>
  checkHalfArithmetic(cpu()));

Deno.test("read_if_cond reads int64 and bfloat16 conditions by value", () => {
  const read = getGlobalFunc("vm.builtin.read_if_cond")!;
  using zero = tensor([0n]);
  using one = tensor([1n]);
  using negZero = tensor([-0], { dtype: "bfloat16" });
  using half = tensor([0.5], { dtype: "float16" });
  assertEquals([read(zero), read(one), read(negZero), read(half)], [false, true, false, true]);
});
