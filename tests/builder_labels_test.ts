/**
 * Labels in the builder (`ib.label`, and `emit_goto` / `emit_if` with a label name): the
 * executable holds the very offsets one would count by hand, so a program written with labels
 * saves the same bytes as the one written with numbers.
 */

import { assertEquals, assertThrows } from "@std/assert";
import { CheckError, ExecBuilder, VirtualMachine } from "../mod.ts";

/** sum(0..n-1) with a loop: `jumps` gives the If's and the Goto's targets. */
function triangle(ib: ExecBuilder, jumps: { exit: number | string; back: number | string }) {
  ib.function("triangle", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(2) });
    if (typeof jumps.back === "string") ib.label(jumps.back);
    ib.emit_call("vm.prim.lt", [ib.r(1), ib.r(0)], { dst: ib.r(3) });
    ib.emit_if(ib.r(3), jumps.exit);
    ib.emit_call("vm.prim.add", [ib.r(2), ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("vm.prim.add", [ib.r(1), ib.imm(1)], { dst: ib.r(1) });
    ib.emit_goto(jumps.back);
    if (typeof jumps.exit === "string") ib.label(jumps.exit);
    ib.emit_ret(ib.r(2));
  });
}

Deno.test("labels: forward and backward jumps give the offsets counted by hand", async () => {
  const counted = new ExecBuilder();
  triangle(counted, { exit: 4, back: -4 });
  const labelled = new ExecBuilder();
  triangle(labelled, { exit: "done", back: "loop" });
  assertEquals(labelled.get().save(), counted.get().save());
  const vm = new VirtualMachine(labelled.get());
  for (const n of [0, 1, 5, 100]) assertEquals(await vm.invoke("triangle", n), (n * (n - 1)) / 2);
});

Deno.test("labels: belong to their function; the same name can be used in another", () => {
  const ib = new ExecBuilder();
  for (const name of ["a", "b"]) {
    ib.function(name, { num_inputs: 1 }, () => {
      ib.emit_if(ib.r(0), "end");
      ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(0) });
      ib.label("end");
      ib.emit_ret(ib.r(0));
    });
  }
  assertEquals(ib.get().as_text().match(/If {4}%0, 2/g)?.length, 2);
});

Deno.test("labels: mistakes are reported", () => {
  const ib = new ExecBuilder();
  assertThrows(() => ib.label("x"), Error, "no function is open");
  ib.function("f", { num_inputs: 1 }, () => {
    ib.label("top");
    assertThrows(() => ib.label("top"), Error, 'already has a label "top"');
    // deno-lint-ignore no-explicit-any
    assertThrows(() => ib.emit_goto("" as any), TypeError);
    ib.emit_if(ib.r(0), "nowhere");
    ib.emit_ret(ib.r(0));
  });
  const e: CheckError = assertThrows(() => ib.get(), CheckError);
  assertEquals(e.problems.map((p) => `${p.functionName}: ${p.message}`), [
    'f: jumps to label "nowhere", which it never places (ib.label("nowhere"))',
  ]);
  // Replacing the function clears its problem.
  ib.function("f", { num_inputs: 1, replace: true }, () => {
    ib.emit_if(ib.r(0), "end");
    ib.label("end");
    ib.emit_ret(ib.r(0));
  });
  assertEquals(ib.get().function_names, ["f"]);
});
