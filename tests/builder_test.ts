import {
  assert,
  assertEquals,
  assertNotStrictEquals,
  assertStrictEquals,
  assertThrows,
} from "@std/assert";
import { dtype, ExecBuilder, shape, tensor, VirtualMachine } from "../mod.ts";

Deno.test("function scope: `using` and callback forms build the same code", () => {
  const a = new ExecBuilder();
  {
    using _ = a.function("f", { num_inputs: 1 });
    a.emit_ret(a.r(0));
  }
  const b = new ExecBuilder();
  b.function("f", 1, () => b.emit_ret(b.r(0)));
  assertEquals(a.get().save(), b.get().save());
});

Deno.test("function scope: nesting and emitting outside a scope throw", () => {
  const ib = new ExecBuilder();
  assertThrows(() => ib.emit_ret(ib.r(0)), Error, "no function is open");
  ib.function("outer", 0, () => {
    assertThrows(() => ib.function("inner", 0), Error, "scopes do not nest");
    ib.emit_call("vm.builtin.null_value", [], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  assertThrows(() => ib.emit_goto(1), Error, "no function is open");
  assertEquals(ib.get().function_names, ["outer"]);
});

Deno.test("function scope: a throwing body still closes the scope", () => {
  const ib = new ExecBuilder();
  assertThrows(
    () =>
      ib.function("f", 0, () => {
        throw new Error("boom");
      }),
    Error,
    "boom",
  );
  ib.function("g", 0, () => {
    ib.emit_call("vm.builtin.null_value", [], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
});

Deno.test("operands: equal operands are deep-equal, bad ones throw", () => {
  const ib = new ExecBuilder();
  assertEquals(ib.r(3), ib.r(3));
  assertEquals(ib.imm(-7), ib.imm(-7));
  assertEquals(ib.f("x"), ib.f("x"));
  assertEquals(ib.vm_state(), ib.vm_state());
  assert(JSON.stringify(ib.r(1)) !== JSON.stringify(ib.imm(1)));
  assertThrows(() => ib.r(-1), RangeError);
  assertThrows(() => ib.r(1.5), RangeError);
  assertThrows(() => ib.imm(2 ** 52), RangeError, "convert_constant");
  assertThrows(() => ib.imm(0.5), RangeError);
});

Deno.test("convert_constant: equal values share one entry; numbers are exact", () => {
  const ib = new ExecBuilder();
  const values = [-0, 0, NaN, Infinity, -Infinity, 1.5, "s", shape(1, 2), dtype("int32")];
  const ops = values.map((v) => ib.convert_constant(v));
  assertEquals(new Set(ops.map((o) => o.value)).size, values.length, "-0 and 0 differ");
  values.forEach((v, i) => assertEquals(ib.convert_constant(v), ops[i]));
  assertEquals(ib.convert_constant([1, 2]), ops[7], "number[] is a shape");
  const t1 = tensor([1, 2, 3]);
  const t2 = tensor([1, 2, 3]);
  const t3 = tensor([1, 2, 4]);
  assertEquals(ib.convert_constant(t1), ib.convert_constant(t2));
  assertNotStrictEquals(ib.convert_constant(t1).value, ib.convert_constant(t3).value);
  assertNotStrictEquals(
    ib.convert_constant(t1).value,
    ib.convert_constant(tensor([1, 2, 3], { dtype: "int32" })).value,
  );
});

Deno.test("emit_call: plain values become constants; a bare number is rejected", () => {
  const ib = new ExecBuilder();
  ib.function("f", 0, () => {
    assertThrows(
      () => ib.emit_call("vm.builtin.copy", [3 as unknown as never], { dst: ib.r(0) }),
      TypeError,
      "ib.imm(3)",
    );
    ib.emit_call("vm.builtin.make_tuple", ["str", [2, 3], shape(2, 3), dtype("float32")], {
      dst: ib.r(0),
    });
    ib.emit_ret(ib.r(0));
  });
  const ex = ib.get();
  assertEquals(ex.constants.length, 3, "[2, 3] and shape(2, 3) are one constant");
});

Deno.test("emit_call: a name defined as a VM function resolves to it, forward references included", async () => {
  const ib = new ExecBuilder();
  ib.function("main", 1, () => {
    ib.emit_call("later", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("later", 1, () => {
    ib.emit_call("test.builder.twice", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const ex = ib.get();
  assertEquals(ex.function_names, ["main", "later"]);
  assertEquals(ex.functions.map((f) => f.kind), ["vm", "vm", "packed"]);
  const { registerFunc } = await import("../mod.ts");
  registerFunc("test.builder.twice", (x: number) => 2 * x, { override: true });
  assertEquals(await new VirtualMachine(ex).invoke("main", 21), 42);
});

Deno.test("get: calling twice gives equivalent executables, builder unchanged", () => {
  const ib = new ExecBuilder();
  ib.function("f", 2, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(7) });
    ib.emit_ret(ib.r(7));
  });
  const a = ib.get(), b = ib.get();
  assertEquals(a.save(), b.save());
  assertEquals(a.as_text(), b.as_text());
});

Deno.test("get: liveness flag is kept and serialized", () => {
  const build = (liveness?: boolean) => {
    const ib = new ExecBuilder();
    ib.function("f", 1, () => ib.emit_ret(ib.r(0)));
    return ib.get(liveness === undefined ? {} : { liveness });
  };
  assertStrictEquals(build().liveness, true);
  assertStrictEquals(build(false).liveness, false);
  assertEquals(build(true).as_text(), build(false).as_text());
});

Deno.test("param_names must match num_inputs", () => {
  const ib = new ExecBuilder();
  assertThrows(() => ib.function("f", { num_inputs: 2, param_names: ["a"] }), RangeError);
});

Deno.test("building 1,000,000 instructions is well under a second", () => {
  const t0 = performance.now();
  const ib = new ExecBuilder();
  ib.function("big", 2, () => {
    for (let i = 0; i < 999_999; i++) {
      ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    }
    ib.emit_ret(ib.r(2));
  });
  const ex = ib.get();
  assertEquals(ex.instructionCount, 1_000_000);
  // Not a timing assertion: the figure is in bench/; this only guards against quadratic blowups.
  assert(performance.now() - t0 < 20_000);
});
