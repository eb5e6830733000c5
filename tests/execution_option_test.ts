/**
 * `VirtualMachineOptions.execution`: one option for the three forms a VM runs
 * code in, its default (compiled, chosen on bench/dispatch_bench.ts), and the
 * deprecated `mode` × `dispatch` options, which keep their old meaning.
 */

import { assertEquals, assertThrows } from "@std/assert";
import { cpu, ExecBuilder, type VirtualMachineOptions } from "../mod.ts";
import { VirtualMachine } from "../vm/virtual_machine.ts";
import { DEFAULT_EXECUTION, loadReport } from "../vm/virtual_machine.ts";

function program() {
  const ib = new ExecBuilder();
  ib.function("twice", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  return ib.get();
}

function runsAs(options?: VirtualMachineOptions): string {
  return loadReport(new VirtualMachine(program(), cpu(), options))[0].runsAs;
}

Deno.test("execution: each form runs as named, and the default is compiled", async () => {
  assertEquals(DEFAULT_EXECUTION, "compiled");
  assertEquals(runsAs(), "compiled");
  assertEquals(runsAs({}), "compiled");
  for (const execution of ["compiled", "specialized", "generic"] as const) {
    assertEquals(runsAs({ execution }), execution);
    const vm = new VirtualMachine(program(), cpu(), { execution });
    assertEquals(await vm.invoke("twice", 21), 21);
  }
});

Deno.test("execution: the deprecated mode and dispatch keep their old meaning", () => {
  assertEquals(runsAs({ mode: "interpret" }), "specialized");
  assertEquals(runsAs({ dispatch: "specialized" }), "specialized");
  assertEquals(runsAs({ dispatch: "generic" }), "generic");
  assertEquals(runsAs({ mode: "compiled" }), "compiled");
  assertEquals(runsAs({ mode: "compiled", dispatch: "generic" }), "compiled");
});

Deno.test("execution: an unknown form, or execution with mode or dispatch, is a TypeError", () => {
  const ex = program();
  assertThrows(
    () => new VirtualMachine(ex, cpu(), { execution: "jit" as "compiled" }),
    TypeError,
    'Unknown execution "jit": use "compiled", "specialized" or "generic"',
  );
  assertThrows(
    () => new VirtualMachine(ex, cpu(), { execution: "toString" as "compiled" }),
    TypeError,
    "Unknown execution",
  );
  for (const old of [{ mode: "compiled" }, { dispatch: "generic" }] as const) {
    assertThrows(
      () => new VirtualMachine(ex, cpu(), { execution: "compiled", ...old }),
      TypeError,
      "give execution alone",
    );
  }
});
