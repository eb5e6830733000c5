/**
 * A runtime error quotes the failing instruction as it runs (formalized registers, which
 * `as_text()` shows) and, when formalize renumbered them, as the builder wrote it too: check
 * errors quote the builder's numbers, so both must appear for the two to be matched up.
 */

import { assert, assertEquals, assertRejects, assertStringIncludes } from "@std/assert";
import { ExecBuilder, Executable, formalize, tensor, VirtualMachine, VMError } from "../mod.ts";

function program(dst: number): ExecBuilder {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 2 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(dst) });
    ib.emit_call("vm.op.add", [ib.r(dst), ib.r(1)], { dst: ib.r(dst + 2) });
    ib.emit_ret(ib.r(dst + 2));
  });
  return ib;
}

async function failure(ex: Executable): Promise<VMError> {
  const vm = new VirtualMachine(ex);
  using a = tensor([1, 2, 3]);
  using b = tensor([1, 2]);
  return await assertRejects(() => vm.invoke("main", a, b), VMError);
}

Deno.test("runtime errors: the builder's registers are quoted next to the formalized ones", async () => {
  const e = await failure(program(7).get());
  assertEquals(e.instruction, "call  vm.op.add        in: %0, %1       dst: %2");
  assertEquals(e.builtInstruction, "call  vm.op.add        in: %0, %1       dst: %7");
  assertStringIncludes(
    e.message,
    "`call  vm.op.add        in: %0, %1       dst: %2` (as built: `call  vm.op.add        in: %0, %1       dst: %7`)",
  );
});

Deno.test("runtime errors: nothing more when the registers did not move, or are unknown", async () => {
  const same = await failure(program(2).get());
  assertEquals(same.builtInstruction, "");
  assert(!same.message.includes("as built"), same.message);
  // A saved and loaded executable has only the formalized numbers.
  const loaded = await failure(Executable.load(program(7).get().save()));
  assertEquals(loaded.builtInstruction, "");
});

Deno.test("runtime errors: formalize() of a formalized executable keeps the builder's numbers", async () => {
  const e = await failure(formalize(program(7).get()));
  assertEquals(e.builtInstruction, "call  vm.op.add        in: %0, %1       dst: %7");
});
