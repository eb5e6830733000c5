/**
 * The mistakes a newcomer makes first get errors that say what to do: a plain JS array passed where
 * a tensor goes (it is a tuple to the VM) points at `tensor()`, and a dtype string that is not one
 * (a typo, or user input at run time, where the `DTypeName` type cannot catch it) lists the valid
 * names. The VM stays usable after the first. And what the README has you write lands where git
 * does not see it.
 */

import { assertEquals, assertRejects, assertStringIncludes, assertThrows } from "@std/assert";
import { DataType, ExecBuilder, tensor, VirtualMachine, VMError } from "../mod.ts";

Deno.test("invoke with a plain JS array where a tensor goes says to use tensor()", async () => {
  const ib = new ExecBuilder();
  ib.function("func0", { num_inputs: 2 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  const vm = new VirtualMachine(ib.get());
  const e = await assertRejects(() => vm.invoke("func0", [1, 2], [10, 20]), VMError);
  assertStringIncludes(e.message, "argument 0 (a) must be a tensor (NDArray), got a tuple of 2");
  assertStringIncludes(
    e.message,
    "a JS array is a tuple to the VM: pass tensor([...]) for a tensor",
  );
  using out = await vm.invokeTensor("func0", tensor([1, 2]), tensor([10, 20]));
  assertEquals([...out.dataSync()], [11, 22]);
});

Deno.test("a dtype string that is not one lists the valid names", () => {
  const names = "float32, float64, float16, bfloat16, int8, int16, int32, int64, uint8, uint16, " +
    "uint32, bool, uint64";
  for (const typo of ["flaot32", "float17", "int12"]) {
    const e = assertThrows(() => DataType.parse(typo), TypeError);
    assertStringIncludes(e.message, `dtype "${typo}"`);
    assertStringIncludes(e.message, names);
  }
  assertThrows(
    () => tensor([1], { dtype: DataType.parse("uint64") }),
    TypeError,
    'Tensors of dtype "uint64" are not supported: tensors are float32, float64, float16',
  );
  // deno-lint-ignore no-explicit-any -- a string from user input, which the type cannot check
  assertThrows(() => tensor([1], { dtype: "flaot32" as any }), TypeError, "float32, float64");
});

Deno.test("out/, where the README's TVM export writes its packages, is git-ignored", async () => {
  // `git check-ignore` exits 0 for an ignored path, 1 for one git would track.
  const { code, stdout } = await new Deno.Command("git", {
    args: ["check-ignore", "--no-index", "out/mlp/package.json", "out/my_mlp/params/shard_0.bin"],
    cwd: new URL("../", import.meta.url),
    stdout: "piped",
  }).output();
  assertEquals([code, new TextDecoder().decode(stdout).trim().split("\n").length], [0, 2]);
});
