/**
 * Replacing and removing functions in an `ExecBuilder` (`remove_function`, `{ replace: true }`):
 * how the REPL fixes a function that `get()` rejected. Each fixed builder must save the same
 * bytes as a builder that wrote the fixed program from the start, and run it.
 */

import { assert, assertEquals, assertStringIncludes, assertThrows } from "@std/assert";
import { CheckError, ExecBuilder, type NDArray, tensor, VirtualMachine } from "../mod.ts";

/** `a + a`, returned. */
function double(ib: ExecBuilder): void {
  ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
  ib.emit_ret(ib.r(1));
}

/** Returns r(1) when r(0) is true, else r(2): a forward `If` and a `Goto`, to check that jumps survive moves. */
function choose(ib: ExecBuilder): void {
  ib.emit_if(ib.r(0), 3);
  ib.emit_call("vm.builtin.copy", [ib.r(1)], { dst: ib.r(3) });
  ib.emit_goto(2);
  ib.emit_call("vm.builtin.copy", [ib.r(2)], { dst: ib.r(3) });
  ib.emit_ret(ib.r(3));
}

async function run(ib: ExecBuilder, name: string, ...args: unknown[]): Promise<number[]> {
  const vm = new VirtualMachine(ib.get());
  using out = await vm.invoke(name, ...args) as NDArray;
  return [...out.dataSync()].map(Number);
}

Deno.test("remove_function: a function get() rejected (read before write) is removed and written again", async () => {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  assertThrows(() => ib.get(), CheckError, "before any write");
  ib.remove_function("main");
  assertEquals(String(ib), "ExecBuilder(no functions; 0 instructions, 0 constants)");
  ib.function("main", { num_inputs: 1 }, () => double(ib));
  // main left the table, so vm.op.add (added by the first main) now comes before it.
  const fresh = new ExecBuilder();
  fresh.declare_function("vm.op.add");
  fresh.function("main", { num_inputs: 1 }, () => double(fresh));
  assertEquals(ib.get().save(), fresh.get().save());
  assertEquals(await run(ib, "main", tensor([1, 2.5])), [2, 5]);
});

Deno.test("replace: a function without ret is replaced in place; the others keep their code and jumps", async () => {
  const ib = new ExecBuilder();
  ib.function("first", { num_inputs: 1 }, () => double(ib));
  ib.function("broken", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
  });
  ib.function("choose", { num_inputs: 3 }, () => choose(ib));
  assertThrows(() => ib.get(), CheckError, "broken");
  ib.function("broken", { num_inputs: 1, replace: true }, () => double(ib));

  // The replacement keeps the table slot but its code comes last: as if declared, then defined last.
  const fresh = new ExecBuilder();
  fresh.function("first", { num_inputs: 1 }, () => double(fresh));
  fresh.declare_function("broken", "vm");
  fresh.function("choose", { num_inputs: 3 }, () => choose(fresh));
  fresh.function("broken", { num_inputs: 1 }, () => double(fresh));
  assertEquals(ib.get().save(), fresh.get().save());
  assertEquals(await run(ib, "broken", tensor([3])), [6]);
  assertEquals(await run(ib, "choose", true, tensor([1]), tensor([2])), [1]);
  assertEquals(await run(ib, "choose", false, tensor([1]), tensor([2])), [2]);
});

Deno.test("duplicates: ib shows them, get() says how to fix, replace removes every one", async () => {
  const ib = new ExecBuilder();
  ib.function("f", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  ib.function("f", { num_inputs: 2 }, () => ib.emit_ret(ib.r(1)));
  ib.function("f", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  assertEquals(
    String(ib),
    "ExecBuilder(f(1 input); defined twice: f(2 inputs), f(1 input) " +
      "(remove_function(name) or function(name, { replace: true })); 3 instructions, 0 constants)",
  );
  const e = assertThrows(() => ib.get(), CheckError);
  assertEquals(e.problems.length, 2);
  assertStringIncludes(e.message, 'ib.remove_function("f")');
  assertStringIncludes(e.message, "{ replace: true }");
  ib.function("f", { num_inputs: 1, replace: true }, () => double(ib));
  assertEquals(String(ib), "ExecBuilder(f(1 input); 2 instructions, 0 constants)");
  assertEquals(await run(ib, "f", tensor([4])), [8]);
});

Deno.test("replace: a body that throws keeps the old definition; replace on a new name defines it", async () => {
  const ib = new ExecBuilder();
  ib.function("f", { num_inputs: 1 }, () => double(ib));
  assertThrows(
    () =>
      ib.function("f", { num_inputs: 1, replace: true }, () => {
        ib.emit_ret(ib.r(0));
        throw new Error("typo");
      }),
    Error,
    "typo",
  );
  assertEquals(await run(ib, "f", tensor([1])), [2]);
  ib.function("g", { num_inputs: 1, replace: true }, () => ib.emit_ret(ib.r(0)));
  assertEquals(ib.get().function_names, ["f", "g"]);
});

Deno.test("replace: the using form replaces when the scope closes", async () => {
  const ib = new ExecBuilder();
  ib.function("f", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  {
    using _ = ib.function("f", { num_inputs: 1, replace: true });
    assertStringIncludes(String(ib), "open: f(1 input)");
    double(ib);
  }
  assertEquals(await run(ib, "f", tensor([5])), [10]);
});

Deno.test("remove_function: a function still called stays declared; get() asks for it until it is defined", async () => {
  const ib = new ExecBuilder();
  ib.function("helper", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("helper", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.remove_function("helper");
  assertThrows(
    () => ib.get(),
    CheckError,
    "helper: was declared as a VM function but never defined",
  );
  ib.function("helper", { num_inputs: 1 }, () => double(ib));
  assertEquals(ib.get().function_names, ["helper", "main"]);
  assertEquals(await run(ib, "main", tensor([7])), [14]);
});

Deno.test("remove_function: an unreferenced function leaves the table, and later references are renumbered", async () => {
  const ib = new ExecBuilder();
  ib.function("gone", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  ib.function("helper", { num_inputs: 1 }, () => double(ib));
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("helper", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.make_closure", [ib.f("helper")], { dst: ib.r(2) });
    ib.emit_call("vm.builtin.invoke_closure", [ib.r(2), ib.r(1)], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  ib.remove_function("gone");
  const fresh = new ExecBuilder();
  fresh.function("helper", { num_inputs: 1 }, () => double(fresh));
  fresh.function("main", { num_inputs: 1 }, () => {
    fresh.emit_call("helper", [fresh.r(0)], { dst: fresh.r(1) });
    fresh.emit_call("vm.builtin.make_closure", [fresh.f("helper")], { dst: fresh.r(2) });
    fresh.emit_call("vm.builtin.invoke_closure", [fresh.r(2), fresh.r(1)], { dst: fresh.r(3) });
    fresh.emit_ret(fresh.r(3));
  });
  assertEquals(ib.get().save(), fresh.get().save());
  assertEquals(await run(ib, "main", tensor([1, -2])), [4, -8]);
});

Deno.test("remove_function: wrong uses throw and change nothing", () => {
  const ib = new ExecBuilder();
  ib.function("f", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  ib.declare_function("my.packed");
  const before = String(ib);
  assertThrows(
    () => ib.remove_function("g"),
    Error,
    'remove_function("g"): this builder defines no VM function of that name (it defines f)',
  );
  assertThrows(() => ib.remove_function("my.packed"), Error, "no VM function");
  // deno-lint-ignore no-explicit-any
  assertThrows(() => ib.remove_function(3 as any), TypeError);
  assertThrows(
    // deno-lint-ignore no-explicit-any
    () => ib.function("h", { num_inputs: 0, replace: "yes" as any }),
    TypeError,
    "replace must be true or false",
  );
  {
    using _ = ib.function("open", 0);
    assertThrows(() => ib.remove_function("f"), Error, 'function "open" is still open');
    ib.emit_call("vm.builtin.null_value", [], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  }
  assert(String(ib).startsWith(before.replace(/;.*/, "")));
  assertEquals(ib.get().function_names, ["f", "open"]);
});
