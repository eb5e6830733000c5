/**
 * The builder's run-time argument checks: plain JavaScript and the REPL have
 * no type checks, so every `ExecBuilder` method must reject a wrong argument
 * with a clear error *before* it changes anything. Each case below makes one
 * bad call in the middle of a program and checks that the executable is
 * byte for byte the one built without it.
 */

import { assert, assertEquals, assertStringIncludes, assertThrows } from "@std/assert";
import { CheckError, ExecBuilder, type Executable, shape, tensor } from "../mod.ts";

// deno-lint-ignore no-explicit-any
type Loose = any;

/** A program of two functions; `bad` runs at `where` and must throw. */
function build(bad?: { where: "inside" | "between"; call: (ib: ExecBuilder) => unknown }) {
  const ib = new ExecBuilder();
  const attempt = (where: "inside" | "between") => {
    if (bad === undefined || bad.where !== where) return;
    let threw: unknown;
    try {
      bad.call(ib);
    } catch (e) {
      threw = e;
    }
    assert(threw !== undefined, "the bad call did not throw");
    return threw;
  };
  let thrown: unknown;
  ib.function("main", { num_inputs: 2, param_names: ["a", "b"] }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("vm.builtin.make_tuple", [ib.r(2), shape(2), "s"], { dst: ib.r(3) });
    thrown = attempt("inside") ?? thrown;
    ib.emit_call("helper", [ib.r(2), ib.f("helper")], { dst: ib.r(4) });
    ib.emit_ret(ib.r(4));
  });
  thrown = attempt("between") ?? thrown;
  ib.function("helper", 2, () => ib.emit_ret(ib.r(0)));
  return { ex: ib.get(), thrown };
}

const clean: Executable = build().ex;

/** [description, where, bad call, expected error class, text the message includes]. */
const CASES: [string, "inside" | "between", (ib: ExecBuilder) => unknown, typeof Error, string][] =
  [
    // The trap from issue 12: a non-array args used to wipe every instruction emitted so far.
    [
      "emit_call: args an operand",
      "inside",
      (ib) => ib.emit_call("vm.builtin.copy", ib.r(0) as Loose),
      TypeError,
      "args must be an array",
    ],
    [
      "emit_call: args a string",
      "inside",
      (ib) => ib.emit_call("vm.builtin.copy", "r0" as Loose),
      TypeError,
      "args must be an array",
    ],
    [
      "emit_call: args an object",
      "inside",
      (ib) => ib.emit_call("vm.builtin.copy", { 0: ib.r(0) } as Loose),
      TypeError,
      "args must be an array",
    ],
    [
      "emit_call: name not a string",
      "inside",
      (ib) => ib.emit_call(42 as Loose, [ib.r(0)]),
      TypeError,
      "name must be a non-empty string",
    ],
    [
      "emit_call: dst passed bare",
      "inside",
      (ib) => ib.emit_call("vm.builtin.copy", [ib.r(0)], ib.r(5) as Loose),
      TypeError,
      "{ dst: ib.r(5) }",
    ],
    [
      "emit_call: misspelt option",
      "inside",
      (ib) => ib.emit_call("vm.builtin.copy", [ib.r(0)], { dest: ib.r(5) } as Loose),
      TypeError,
      `unknown option "dest"`,
    ],
    [
      "emit_call: dst not a register",
      "inside",
      (ib) => ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.imm(1) }),
      TypeError,
      "expected a register",
    ],
    [
      "emit_call: dst %vm",
      "inside",
      (ib) => ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.vm_state() }),
      TypeError,
      "%vm",
    ],
    // Arguments before the bad one must not leave a function entry or a constant behind.
    [
      "emit_call: a bad argument after a new function and constant",
      "inside",
      (ib) =>
        ib.emit_call(
          "new.packed",
          [ib.f("never_defined"), tensor([9, 9]), "fresh", undefined] as Loose,
        ),
      TypeError,
      "argument 3",
    ],
    [
      "emit_call: a bare number",
      "inside",
      (ib) => ib.emit_call("vm.builtin.copy", [7] as Loose),
      TypeError,
      "ib.imm(7)",
    ],
    [
      "emit_call: a forged operand",
      "inside",
      (ib) => ib.emit_call("vm.builtin.copy", [{ kind: "register", value: 0 }] as Loose),
      TypeError,
      "neither an operand",
    ],
    [
      "emit_call: a shape of strings",
      "inside",
      (ib) => ib.emit_call("vm.builtin.copy", [[1, "2"]] as Loose),
      TypeError,
      "holds integers",
    ],
    [
      "emit_call: a disposed tensor",
      "inside",
      (ib) => {
        const t = tensor([1]);
        t.dispose();
        return ib.emit_call("vm.builtin.copy", [t]);
      },
      TypeError,
      "disposed",
    ],
    [
      "emit_call: outside a function",
      "between",
      (ib) => ib.emit_call("vm.builtin.copy", [ib.r(0)]),
      Error,
      "no function is open",
    ],
    [
      "emit_ret: an immediate",
      "inside",
      (ib) => ib.emit_ret(ib.imm(1)),
      TypeError,
      "expected a register",
    ],
    ["emit_ret: a number", "inside", (ib) => ib.emit_ret(3 as Loose), TypeError, "got number 3"],
    [
      "emit_goto: a string",
      "inside",
      (ib) => ib.emit_goto("2" as Loose),
      TypeError,
      "expected an integer",
    ],
    ["emit_goto: a fraction", "inside", (ib) => ib.emit_goto(1.5), RangeError, "1.5"],
    [
      "emit_if: a constant as condition",
      "inside",
      (ib) => ib.emit_if(ib.c(0), 2),
      TypeError,
      "expected a register",
    ],
    [
      "emit_if: an offset missing",
      "inside",
      (ib) => (ib.emit_if as Loose)(ib.r(0)),
      TypeError,
      "got undefined",
    ],
    ["r: a string", "inside", (ib) => ib.r("1" as Loose), TypeError, "expected an integer"],
    ["c: negative", "inside", (ib) => ib.c(-1), RangeError, "non-negative"],
    ["imm: a string", "inside", (ib) => ib.imm("1" as Loose), TypeError, "expected an integer"],
    ["f: empty name", "inside", (ib) => ib.f(""), TypeError, "non-empty string"],
    [
      "convert_constant: an object",
      "inside",
      (ib) => ib.convert_constant({} as Loose),
      TypeError,
      "cannot make a constant",
    ],
    [
      "convert_constant: null",
      "between",
      (ib) => ib.convert_constant(null as Loose),
      TypeError,
      "cannot make a constant of null",
    ],
    ["function: nested", "inside", (ib) => ib.function("g", 0), Error, "scopes do not nest"],
    [
      "function: the body as options",
      "between",
      (ib) => ib.function("g", (() => {}) as Loose),
      TypeError,
      "the body goes third",
    ],
    [
      "function: num_inputs a string",
      "between",
      (ib) => ib.function("g", { num_inputs: "2" } as Loose),
      TypeError,
      "num_inputs",
    ],
    [
      "function: num_inputs negative",
      "between",
      (ib) => ib.function("g", -1),
      RangeError,
      "num_inputs",
    ],
    [
      "function: misspelt option",
      "between",
      (ib) => ib.function("g", { num_input: 2 } as Loose),
      TypeError,
      `unknown option "num_input"`,
    ],
    [
      "function: param_names a string",
      "between",
      (ib) => ib.function("g", { num_inputs: 2, param_names: "ab" } as Loose),
      TypeError,
      "param_names must be an array of strings",
    ],
    [
      "function: body not a function",
      "between",
      (ib) => ib.function("g", 0, "body" as Loose),
      TypeError,
      "body must be a function",
    ],
    [
      "function: name missing",
      "between",
      (ib) => (ib.function as Loose)(),
      TypeError,
      "name must be a non-empty string",
    ],
    [
      "declare_function: unknown kind",
      "between",
      (ib) => ib.declare_function("g", "VM" as Loose),
      TypeError,
      `"packed" or "vm"`,
    ],
    [
      "declare_function: name not a string",
      "between",
      (ib) => ib.declare_function(null as Loose),
      TypeError,
      "name must be",
    ],
    [
      "get: liveness not a boolean",
      "between",
      (ib) => ib.get({ liveness: "no" } as Loose),
      TypeError,
      "liveness",
    ],
    [
      "get: misspelt option",
      "between",
      (ib) => ib.get({ livenes: false } as Loose),
      TypeError,
      `unknown option "livenes"`,
    ],
    // A function body that throws takes back everything it added, so it can be written again.
    [
      "function: a body that throws",
      "between",
      (ib) =>
        ib.function("main2", 1, () => {
          ib.declare_function("helper", "vm");
          ib.emit_call("brand.new", [ib.r(0), tensor([4, 5, 6]), ib.f("helper2")], {
            dst: ib.r(1),
          });
          ib.emit_ret(ib.r(1));
          throw new Error("typo in the body");
        }),
      Error,
      "typo in the body",
    ],
  ];

for (const [name, where, call, ErrorClass, text] of CASES) {
  Deno.test(`builder traps: ${name} throws and leaves the builder as it was`, () => {
    const { ex, thrown } = build({ where, call });
    assert(thrown instanceof ErrorClass, `expected ${ErrorClass.name}, got ${thrown}`);
    assertStringIncludes((thrown as Error).message, text);
    assertEquals(ex.save(), clean.save());
    assertEquals(ex.as_text(), clean.as_text());
    assertEquals(ex.warnings, clean.warnings);
  });
}

Deno.test("builder traps: a body that throws can be written again under the same name", () => {
  const ib = new ExecBuilder();
  assertThrows(() =>
    ib.function("f", 1, () => {
      ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(1) });
      throw new TypeError("ib.emit_rte is not a function");
    }), TypeError);
  ib.function("f", 1, () => ib.emit_ret(ib.r(0)));
  const ex = ib.get();
  assertEquals([ex.function_names, ex.instructionCount], [["f"], 1]);
});

Deno.test("REPL scopes: a scope `using` left open is reported at the next function() and at get()", () => {
  const ib = new ExecBuilder();
  // At the REPL's top level, `using _ = ib.function(...)` is never disposed.
  const _ = ib.function("f", 1);
  ib.emit_ret(ib.r(0));
  const next = assertThrows(() => ib.function("g", 0), Error);
  assertStringIncludes(next.message, `function "f" is still open`);
  assertStringIncludes(next.message, "_[Symbol.dispose]()");
  assertStringIncludes(next.message, "callback form");
  const atGet = assertThrows(() => ib.get(), CheckError);
  assertStringIncludes(atGet.message, "@f: scope was never closed");
  assertStringIncludes(atGet.message, "_[Symbol.dispose]()");
  // Closing it as the message says makes the builder usable again.
  _[Symbol.dispose]();
  ib.function("g", 0, () => {
    ib.emit_call("vm.builtin.null_value", [], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  assertEquals(ib.get().function_names, ["f", "g"]);
});
