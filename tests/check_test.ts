import { assert, assertEquals, assertInstanceOf, assertThrows } from "@std/assert";
import { check, CheckError, ExecBuilder, formalize } from "../mod.ts";

function problemsOf(
  build: (ib: ExecBuilder) => void,
): { functionName: string; pc: number; message: string }[] {
  const ib = new ExecBuilder();
  build(ib);
  const e: CheckError = assertThrows(() => ib.get(), CheckError);
  return [...e.problems];
}

Deno.test("check: a register read before any write is an error naming function, pc and register", () => {
  const problems = problemsOf((ib) =>
    ib.function("f", 1, () => {
      ib.emit_call("vm.builtin.copy", [ib.r(5)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    })
  );
  assertEquals(problems, [{
    functionName: "f",
    pc: 0,
    message: "reads %5 before any write (the inputs are %0..%0)",
  }]);
});

Deno.test("check: every problem is collected, in program order, with the user's register numbers", () => {
  const ib = new ExecBuilder();
  ib.function("a", 0, () => {
    ib.emit_call("vm.builtin.copy", [ib.r(9)], { dst: ib.r(10) });
    ib.emit_goto(7);
  });
  ib.function("b", 0, () => {
    ib.emit_call("vm.builtin.copy", [ib.f("nowhere")], { dst: ib.r(0) });
  });
  const e: CheckError = assertThrows(() => ib.get(), CheckError);
  const summary = e.problems.map((p) => `${p.functionName}[${p.pc}] ${p.message}`);
  assertEquals(summary, [
    `b[0] f("nowhere") refers to an unknown VM function; define it with ib.function("nowhere", ...) or declare it with ib.declare_function("nowhere")`,
    "a[0] reads %9 before any write (the inputs are none)",
    "a[1] jumps by 7 to 8, outside the function (instructions 0..1)",
    "b[0] can fall off the end of the function without ret",
  ]);
  assert(e.message.includes("@a[1]: jumps by 7"), e.message);
});

Deno.test("check: falling off the end, an empty function, self-jumps", () => {
  const msgs = problemsOf((ib) => {
    ib.function("empty", 0, () => {});
    ib.function("no_ret", 1, () => ib.emit_call("vm.builtin.print", [ib.r(0)]));
    ib.function("spin", 1, () => {
      ib.emit_goto(0);
      ib.emit_ret(ib.r(0));
    });
    ib.function("if_off", 1, () => ib.emit_if(ib.r(0), 1));
  }).map((p) => `${p.functionName}: ${p.message}`);
  assertEquals(msgs, [
    "empty: has no instructions, so it falls off its end without ret",
    "no_ret: can fall off the end of the function without ret",
    "spin: jumps by 0 to itself, which loops forever",
    "if_off: jumps by 1 to 1, outside the function (instructions 0..0)",
    "if_off: can fall off the end of the function without ret",
  ]);
});

Deno.test("check: unclosed scope and duplicate function names", () => {
  const ib = new ExecBuilder();
  ib.function("f", 0, () => {
    ib.emit_call("vm.builtin.null_value", [], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  ib.function("f", 0, () => {
    ib.emit_call("vm.builtin.null_value", [], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  ib.function("open", 1);
  ib.emit_ret(ib.r(0));
  const e: CheckError = assertThrows(() => ib.get(), CheckError);
  assertEquals(e.problems.map((p) => `${p.functionName}: ${p.message.split(";")[0]}`), [
    "f: is defined twice (duplicate function name)",
    "open: scope was never closed",
  ]);
});

Deno.test("check: calling a VM function with the wrong argument count", () => {
  const msgs = problemsOf((ib) => {
    ib.function("two", 2, () => ib.emit_ret(ib.r(1)));
    ib.function("main", 1, () => {
      ib.emit_call("two", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
  }).map((p) => p.message);
  assertEquals(msgs, ["calls @two with 1 argument, but it takes 2"]);
});

Deno.test("check: a declared VM function that is never defined", () => {
  const msgs = problemsOf((ib) => {
    ib.declare_function("later", "vm");
    ib.function("main", 0, () => {
      ib.emit_call("later", [], { dst: ib.r(0) });
      ib.emit_ret(ib.r(0));
    });
  }).map((p) => `${p.functionName}: ${p.message}`);
  assertEquals(msgs, ["later: was declared as a VM function but never defined"]);
});

Deno.test("check: unused inputs are warnings, not errors", () => {
  const ib = new ExecBuilder();
  ib.function("f", { num_inputs: 3, param_names: ["x", "y", "z"] }, () => ib.emit_ret(ib.r(1)));
  const ex = ib.get();
  assertEquals(ex.warnings, ["@f: input %0 (x) is never used", "@f: input %2 (z) is never used"]);
  assertEquals(check(ex), { errors: [], warnings: [...ex.warnings] });
});

Deno.test("check: a function reference to a declared packed function is fine", () => {
  const ib = new ExecBuilder();
  ib.declare_function("vm.builtin.print");
  ib.function("f", 0, () => {
    ib.emit_call("vm.builtin.make_closure", [ib.f("vm.builtin.print")], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  assertInstanceOf(ib.get().functions, Array);
});

Deno.test("formalize: registers are renumbered in order of first use; idempotent", () => {
  const ib = new ExecBuilder();
  ib.function("f", 2, () => {
    ib.emit_call("vm.op.add", [ib.r(1), ib.r(0)], { dst: ib.r(10000) });
    ib.emit_call("vm.op.add", [ib.r(10000), ib.r(0)], { dst: ib.r(500) });
    ib.emit_ret(ib.r(500));
  });
  const ex = ib.get();
  assertEquals(ex.functions[0].registerFileSize, 4);
  assertEquals(ex.as_text().split("\n").slice(1, 4), [
    "  call  vm.op.add        in: %1, %0       dst: %2",
    "  call  vm.op.add        in: %2, %0       dst: %3",
    "  ret   %3",
  ]);
  assertEquals(formalize(ex).save(), ex.save());
});

Deno.test("check: f() of an unknown function names every function and instruction that refers to it", () => {
  const ib = new ExecBuilder();
  ib.function("main", 1, () => {
    ib.emit_call("vm.builtin.make_closure", [ib.f("missing")], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.make_tuple", [ib.r(0), ib.f("missing")], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  ib.function("other", 0, () => {
    ib.emit_call("vm.builtin.copy", [ib.f("missing")], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  const e: CheckError = assertThrows(() => ib.get(), CheckError);
  assertEquals(e.problems.map((p) => [p.functionName, p.pc]), [["main", 0], ["main", 1], [
    "other",
    0,
  ]]);
  assert(e.message.includes(`@main[1]: f("missing") refers to an unknown VM function`), e.message);
  // Declaring it as a packed function (resolved when a VM loads) makes the program check.
  ib.declare_function("missing");
  assertEquals(ib.get().function_names, ["main", "other"]);
});
