import {
  assert,
  assertEquals,
  assertFalse,
  assertInstanceOf,
  assertRejects,
  assertStrictEquals,
  assertStringIncludes,
  assertThrows,
} from "@std/assert";
import {
  Closure,
  cpu,
  ExecBuilder,
  type Executable,
  type NDArray,
  registerFunc,
  ShapeTuple,
  tensor,
  VirtualMachine,
  type VirtualMachineOptions,
  VMError,
} from "../mod.ts";
import { loadReport } from "../vm/virtual_machine.ts";
import { everythingProgram } from "./_programs.ts";
import { CHUNK_INSTRUCTIONS } from "../vm/specialized_dispatch.ts";

registerFunc("test.vm.fail", (x: unknown) => {
  throw new Error(`failing on purpose with ${x}`);
}, { override: true });
registerFunc("test.vm.async_double", async (x: number) => {
  await new Promise((r) => setTimeout(r, 1));
  return 2 * x;
}, { override: true });
registerFunc("test.vm.inc", (x: number) => x + 1, { override: true });
registerFunc("test.vm.lt_num", (a: number, b: number) => a < b, { override: true });
registerFunc("test.vm.sub", (a: number, b: number) => a - b, { override: true });
registerFunc("test.vm.add", (a: number, b: number) => a + b, { override: true });

function fibProgram() {
  const ib = new ExecBuilder();
  ib.function("fib", 1, () => {
    ib.emit_call("test.vm.lt_num", [ib.r(0), ib.imm(2)], { dst: ib.r(1) });
    ib.emit_if(ib.r(1), 2);
    ib.emit_ret(ib.r(0));
    ib.emit_call("test.vm.sub", [ib.r(0), ib.imm(1)], { dst: ib.r(2) });
    ib.emit_call("fib", [ib.r(2)], { dst: ib.r(3) });
    ib.emit_call("test.vm.sub", [ib.r(0), ib.imm(2)], { dst: ib.r(4) });
    ib.emit_call("fib", [ib.r(4)], { dst: ib.r(5) });
    ib.emit_call("test.vm.add", [ib.r(3), ib.r(5)], { dst: ib.r(6) });
    ib.emit_ret(ib.r(6));
  });
  return ib.get();
}

/** The three ways a VM runs code; every test runs under each, and they must behave identically. */
export const FORMS = {
  specialized: { execution: "specialized" },
  generic: { execution: "generic" },
  compiled: { execution: "compiled" },
} as const satisfies Record<string, VirtualMachineOptions>;

/**
 * A VM for `ex` in `form`, checked to run in that form: a function that fell
 * back to the interpreter would make the compiled-mode tests test nothing.
 */
export function loadIn(ex: Executable, form: keyof typeof FORMS): VirtualMachine {
  const vm = new VirtualMachine(ex, cpu(), FORMS[form]);
  for (const f of loadReport(vm)) {
    assertEquals(f.runsAs, form, `@${f.name} runs as ${f.runsAs}, not ${form}`);
  }
  return vm;
}

/** Every test runs under each form. */
function defineVMTests(form: keyof typeof FORMS) {
  Deno.test(`invoke and get run VM functions on tensors (func0/func1) [${form}]`, async () => {
    const ib = new ExecBuilder();
    ib.function("func0", 2, () => {
      ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    ib.function("func1", 2, () => {
      ib.emit_call("vm.op.multiply", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    const vm = loadIn(ib.get(), form);
    using a = tensor([1, 2, 3, 4]);
    using b = tensor([5, 6, 7, 8]);
    using sum = await vm.invoke("func0", a, b) as NDArray;
    using prod = await vm.get("func1")(a, b) as NDArray;
    assertEquals([...sum.dataSync()], [6, 8, 10, 12]);
    assertEquals([...prod.dataSync()], [5, 12, 21, 32]);
    assertEquals([...a.dataSync()], [1, 2, 3, 4], "arguments stay valid after the call");
  });

  Deno.test(`recursion: VM functions call VM functions [${form}]`, async () => {
    const vm = loadIn(fibProgram(), form);
    assertEquals(await vm.invoke("fib", 20), 6765);
  });

  Deno.test(`runaway recursion is a VMError, and the VM keeps working [${form}]`, async () => {
    const ib = new ExecBuilder();
    ib.function("forever", 1, () => {
      ib.emit_call("forever", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    ib.function("ok", 1, () => ib.emit_ret(ib.r(0)));
    const vm = loadIn(ib.get(), form);
    const e: VMError = await assertRejects(
      () => vm.invoke("forever", 1),
      VMError,
      "Call stack overflow",
    );
    assertEquals(e.functionName, "forever");
    assertEquals(await vm.invoke("ok", 7), 7);
    assertEquals(await vm.invoke("ok", 8), 8);
  });

  Deno.test(`loops with If and Goto [${form}]`, async () => {
    const vm = loadIn(everythingProgram(), form);
    const out = await vm.invoke("main", 10) as unknown[];
    assertEquals(out[0], 45);
    assertEquals(out.length, 15);
    assertInstanceOf(out[6], ShapeTuple);
    assertInstanceOf(out[12], Closure);
    assertStrictEquals(out[14], null, "%void passes null");
    assertEquals(await vm.invoke_closure(out[12], 5), 10);
  });

  Deno.test(`a failing call is a VMError with function, pc, instruction, packed function and cause [${form}]`, async () => {
    const ib = new ExecBuilder();
    ib.function("main", 1, () => {
      ib.emit_call("test.vm.inc", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_call("test.vm.fail", [ib.r(1)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    ib.function("outer", 1, () => {
      ib.emit_call("main", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    const vm = loadIn(ib.get(), form);
    for (const entry of ["main", "outer"]) {
      const e: VMError = await assertRejects(() => vm.invoke(entry, 1), VMError);
      assertEquals(e.functionName, "main", "the innermost VM function is named");
      assertEquals(e.pc, 1);
      assertEquals(e.instruction, "call  test.vm.fail     in: %1           dst: %2");
      assertEquals(e.packedFunc, "test.vm.fail");
      assertInstanceOf(e.cause, Error);
      assert(e.message.includes("failing on purpose with 2"), e.message);
    }
  });

  Deno.test(`wrong argument counts and unknown functions are VMErrors [${form}]`, async () => {
    const vm = loadIn(fibProgram(), form);
    await assertRejects(() => vm.invoke("fib"), VMError, "takes 1 argument, got 0");
    await assertRejects(() => vm.invoke("fib", 1, 2), VMError, "got 2");
    await assertRejects(() => vm.invoke("nope"), VMError, 'No VM function named "nope"');
    assertThrows(() => vm.get("nope"), VMError);
    assertEquals(await vm.invoke("fib", 10), 55);
  });

  Deno.test(`an unknown packed function fails the calls that reach it, not the VM [${form}]`, async () => {
    const missing = `test.vm.registered_later_${form}`; // each form registers its own, later
    const ib = new ExecBuilder();
    ib.function("main", 1, () => {
      ib.emit_call("test.vm.inc", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_call("vm.op.reluu", [ib.r(1)], { dst: ib.r(2) }); // misspelt
      ib.emit_ret(ib.r(2));
    });
    ib.declare_function(missing); // a packed function, referred to with f()
    ib.function("through_closure", 1, () => {
      ib.emit_call("vm.builtin.make_closure", [ib.f(missing)], {
        dst: ib.r(1),
      });
      ib.emit_call("vm.builtin.invoke_closure", [ib.r(1), ib.r(0)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    ib.function("fine", 1, () => {
      ib.emit_call("test.vm.inc", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    const ex = ib.get();
    const vm = loadIn(ex, form); // constructs: one unknown name does not block the file
    assertEquals(await vm.invoke("fine", 1), 2);
    const e = await assertRejects(() => vm.invoke("main", 1), VMError);
    assertEquals([e.functionName, e.pc, e.packedFunc], ["main", 1, "vm.op.reluu"]);
    assertEquals(e.instruction, "call  vm.op.reluu      in: %1           dst: %2");
    assertEquals(
      e.message,
      'Unknown packed function "vm.op.reluu" (did you mean "vm.op.relu"?): register it with ' +
        `registerFunc; this executable also calls "${missing}", not registered ` +
        "either (in @main, instruction 1, `call  vm.op.reluu      in: %1           dst: %2`, " +
        "calling vm.op.reluu)",
    );
    assertInstanceOf(e.cause, ReferenceError);
    // A function reference to an unknown name fails where the closure is invoked.
    const c = await assertRejects(() => vm.invoke("through_closure", 1), VMError);
    assertStringIncludes(c.message, `Unknown packed function "${missing}"`);
    assertStringIncludes(c.message, 'also calls "vm.op.reluu"');
    assertEquals(await vm.invoke("fine", 2), 3, "the VM runs on after the failures");
    // Registered later, the function is found at its next call, in the same VM.
    registerFunc(missing, (x: number) => -x);
    assertEquals(await vm.invoke("through_closure", 5), -5);
    const again = await assertRejects(() => vm.invoke("main", 1), VMError);
    assertFalse(again.message.includes("also calls"), "only names still unregistered are listed");
  });

  Deno.test(`packed functions may return Promises; only they are awaited [${form}]`, async () => {
    const ib = new ExecBuilder();
    ib.function("main", 1, () => {
      ib.emit_call("test.vm.async_double", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_call("test.vm.inc", [ib.r(1)], { dst: ib.r(1) });
      ib.emit_call("test.vm.async_double", [ib.r(1)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    ib.function("outer", 1, () => {
      ib.emit_call("main", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_call("test.vm.inc", [ib.r(1)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    const vm = loadIn(ib.get(), form);
    assertEquals(await vm.invoke("main", 3), 14);
    assertEquals(await vm.invoke("outer", 3), 15);
    const [x, y] = await Promise.all([vm.invoke("outer", 1), vm.invoke("outer", 2)]);
    assertEquals([x, y], [7, 11]);
  });

  Deno.test(`functions longer than one dispatch chunk: jumps, Promises, returns and errors across chunks [${form}]`, async () => {
    // 308 instructions, so the specialized form spans three chunks of CHUNK_INSTRUCTIONS.
    assert(CHUNK_INSTRUCTIONS < 154);
    const ib = new ExecBuilder();
    ib.function("long", 1, () => {
      ib.emit_call("test.vm.add", [ib.imm(0), ib.imm(0)], { dst: ib.r(1) }); // acc
      ib.emit_call("test.vm.add", [ib.imm(0), ib.imm(0)], { dst: ib.r(2) }); // i
      ib.emit_call("test.vm.lt_num", [ib.r(2), ib.r(0)], { dst: ib.r(3) }); // pc 2: loop head
      ib.emit_if(ib.r(3), 304); // pc 3: done → pc 307, two chunks ahead
      for (let k = 0; k < 150; k++) ib.emit_call("test.vm.inc", [ib.r(1)], { dst: ib.r(1) });
      ib.emit_call("test.vm.async_double", [ib.r(1)], { dst: ib.r(1) }); // pc 154: parks mid-chunk
      for (let k = 0; k < 150; k++) ib.emit_call("test.vm.inc", [ib.r(1)], { dst: ib.r(1) });
      ib.emit_call("test.vm.inc", [ib.r(2)], { dst: ib.r(2) });
      ib.emit_goto(-304); // pc 306: back to pc 2, two chunks behind
      ib.emit_ret(ib.r(1)); // pc 307
    });
    ib.function("fails_late", 1, () => {
      for (let k = 0; k < 200; k++) ib.emit_call("test.vm.inc", [ib.r(0)], { dst: ib.r(0) });
      ib.emit_call("test.vm.fail", [ib.r(0)], { dst: ib.r(1) }); // pc 200
      ib.emit_ret(ib.r(1));
    });
    const vm = loadIn(ib.get(), form);
    let expected = 0;
    for (let i = 0; i < 3; i++) expected = (expected + 150) * 2 + 150;
    assertEquals(await vm.invoke("long", 3), expected);
    assertEquals(await vm.invoke("long", 0), 0);
    const e: VMError = await assertRejects(() => vm.invoke("fails_late", 1), VMError, "201");
    assertEquals([e.functionName, e.pc, e.packedFunc], ["fails_late", 200, "test.vm.fail"]);
    assertEquals(await vm.invoke("long", 1), 450, "the VM works after the error");
  });

  Deno.test(`a rejected Promise is a VMError at the right instruction [${form}]`, async () => {
    registerFunc("test.vm.async_fail", () => Promise.reject(new Error("later")), {
      override: true,
    });
    const ib = new ExecBuilder();
    ib.function("main", 0, () => {
      ib.emit_call("test.vm.async_fail", [], { dst: ib.r(0) });
      ib.emit_ret(ib.r(0));
    });
    const vm = loadIn(ib.get(), form);
    const e: VMError = await assertRejects(() => vm.invoke("main"), VMError, "later");
    assertEquals([e.pc, e.packedFunc], [0, "test.vm.async_fail"]);
  });

  Deno.test(`closures: make_closure binds captured values last; invoke_closure inside and outside [${form}]`, async () => {
    const ib = new ExecBuilder();
    ib.function("sub", 2, () => {
      ib.emit_call("test.vm.sub", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    ib.function("make", 1, () => {
      ib.emit_call("vm.builtin.make_closure", [ib.f("sub"), ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    ib.function("apply", 2, () => {
      ib.emit_call("vm.builtin.invoke_closure", [ib.vm_state(), ib.r(0), ib.r(1)], {
        dst: ib.r(2),
      });
      ib.emit_ret(ib.r(2));
    });
    const vm = loadIn(ib.get(), form);
    const minus10 = await vm.invoke("make", 10);
    assertInstanceOf(minus10, Closure);
    assertEquals(await vm.invoke_closure(minus10, 25), 15);
    assertEquals(await vm.invoke("apply", minus10, 3), -7);
    await assertRejects(() => vm.invoke_closure("not a closure", 1), VMError);
  });

  Deno.test(`save_function pre-binds arguments [${form}]`, async () => {
    const vm = loadIn(fibProgram(), form);
    vm.save_function("fib", "fib_15", 15);
    assertEquals(await vm.get("fib_15")(), 610);
    assertEquals(await vm.invoke("fib_15"), 610);
    assertThrows(() => vm.save_function("fib", "bad"), VMError, "takes 1 argument, got 0");
    // get() resolves its function once, yet a function saved later under its name takes over.
    const fib = vm.get("fib");
    assertEquals(await fib(10), 55);
    vm.save_function("fib", "fib", 12);
    assertEquals(await fib(), 144);
    assertEquals(await fib(10), 55, "with arguments, the VM function itself");
    await assertRejects(() => fib(1, 2), VMError, "takes 1 argument, got 2");
  });

  Deno.test(`set_instrument sees every call before and after; 'skip' skips [${form}]`, async () => {
    const ib = new ExecBuilder();
    ib.function("main", 1, () => {
      ib.emit_call("test.vm.inc", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_call("test.vm.inc", [ib.r(1)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    const vm = loadIn(ib.get(), form);
    const seen: string[] = [];
    vm.set_instrument((_f, name, before, ret, args) => {
      seen.push(
        `${before ? "before" : "after"} ${name}(${args.join(",")})${before ? "" : ` = ${ret}`}`,
      );
    });
    assertEquals(await vm.invoke("main", 1), 3);
    assertEquals(seen, [
      "before test.vm.inc(1)",
      "after test.vm.inc(1) = 2",
      "before test.vm.inc(2)",
      "after test.vm.inc(2) = 3",
    ]);
    let n = 0;
    vm.set_instrument((_f, _name, before) => (before && n++ === 1 ? "skip" : undefined));
    assertEquals(await vm.invoke("main", 1), 2, "the second increment was skipped");
    vm.set_instrument(null);
    assertEquals(await vm.invoke("main", 1), 3);
  });

  Deno.test(`stateful interface: set_input, invoke_stateful, get_outputs [${form}]`, async () => {
    const vm = loadIn(fibProgram(), form);
    assertThrows(() => vm.get_outputs("fib"), VMError, "invoke_stateful first");
    await assertRejects(() => vm.invoke_stateful("fib"), VMError, "set_input first");
    vm.set_input("fib", 12);
    await vm.invoke_stateful("fib");
    assertEquals(vm.get_outputs("fib"), 144);
    assertThrows(() => vm.set_input("fib"), VMError);
  });

  Deno.test(`time_evaluator reports mean, median, min, max and per-repeat results [${form}]`, async () => {
    const vm = loadIn(fibProgram(), form);
    const timer = vm.time_evaluator("fib", { number: 3, repeat: 4 });
    const r = await timer(10);
    assertEquals(r.results.length, 4);
    assert(r.min <= r.median && r.median <= r.max && r.min > 0);
    assert(Math.abs(r.mean - r.results.reduce((a, b) => a + b) / 4) < 1e-9);
  });

  Deno.test(`time_evaluator times a function saved with save_function [${form}]`, async () => {
    const vm = loadIn(fibProgram(), form);
    let calls = 0;
    vm.set_instrument((_f, name, before, _ret, args) => {
      if (before && name === "test.vm.lt_num" && args[0] === 10) calls++;
      return undefined;
    });
    vm.save_function("fib", "fib10", 10);
    const r = await vm.time_evaluator("fib10", { number: 2, repeat: 3 })();
    assertEquals(r.results.length, 3);
    assertEquals(calls, 6, "each of the 6 runs called fib(10)");
  });

  Deno.test(`If on an int64 or bfloat16 tensor reads its value: zero is false [${form}]`, async () => {
    const ib = new ExecBuilder();
    ib.function("choose", { num_inputs: 1 }, () => {
      ib.emit_if(ib.r(0), 2);
      ib.emit_ret(ib.r(0));
      ib.emit_call("vm.builtin.null_value", [], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    const vm = loadIn(ib.get(), form);
    for (const [value, dtype] of [[0n, "int64"], [-0, "bfloat16"], [0, "float16"]] as const) {
      using zero = tensor([value], { dtype });
      assertEquals(await vm.invoke("choose", zero), null, `${dtype} zero`);
    }
    using one = tensor([1n], { dtype: "int64" });
    assertStrictEquals(await vm.invoke("choose", one), one);
  });

  Deno.test(`VM options are checked [${form}]`, () => {
    const ex = fibProgram();
    assertThrows(
      () => new VirtualMachine(ex, cpu(), { allocator: "magic" as "naive" }),
      TypeError,
      "Unknown allocator",
    );
    assertThrows(() => new VirtualMachine(ex, [], {}), TypeError);
    assertThrows(
      () => new VirtualMachine(ex, cpu(), { mode: "jit" as "compiled" }),
      TypeError,
      'Unknown mode "jit": use "interpret" or "compiled"',
    );
    assertThrows(
      () => new VirtualMachine(ex, cpu(), { dispatch: "fast" as "generic" }),
      TypeError,
      'Unknown dispatch "fast"',
    );
    assertThrows(
      () => new VirtualMachine(ex, cpu(), { moveInputs: "yes" as unknown as boolean }),
      TypeError,
      "moveInputs must be true or false",
    );
    new VirtualMachine(ex, [cpu()], { allocator: "naive", mode: "interpret" });
    new VirtualMachine(ex, [cpu()], { mode: "compiled", dispatch: "generic" });
  });

  Deno.test(`If on a tensor that dies at the If jumps by its value, not by the release [${form}]`, async () => {
    // Found by the "run" fuzz family: specialized dispatch kept the condition in the
    // variable the releases after the If reused, so a falsy tensor released there
    // made the If fall through.
    const ib = new ExecBuilder();
    ib.function("pick", { num_inputs: 1 }, () => {
      ib.emit_if(ib.r(0), 3); // r0 is dead after the If: released right after it
      ib.emit_call("vm.builtin.copy", [ib.imm(1)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
      ib.emit_call("vm.builtin.copy", [ib.imm(2)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    const ex = ib.get();
    assertStringIncludes(ex.as_text({ releases: true }), "then release %0");
    const vm = loadIn(ex, form);
    using zero = tensor([0]);
    using one = tensor([1]);
    assertEquals(await vm.invoke("pick", zero), 2);
    assertEquals(await vm.invoke("pick", one), 1);
  });

  Deno.test(`If accepts numbers, booleans and one-element CPU tensors; anything else is a VMError [${form}]`, async () => {
    const ib = new ExecBuilder();
    ib.function("pick", 1, () => {
      ib.emit_if(ib.r(0), 3);
      ib.emit_call("vm.builtin.copy", ["yes"], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
      ib.emit_call("vm.builtin.copy", ["no"], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    const vm = loadIn(ib.get(), form);
    assertEquals(await vm.invoke("pick", 1), "yes");
    assertEquals(await vm.invoke("pick", 0), "no");
    assertEquals(await vm.invoke("pick", true), "yes");
    assertEquals(await vm.invoke("pick", false), "no");
    using t = tensor([1], { dtype: "int32" });
    assertEquals(await vm.invoke("pick", t), "yes");
    const e: VMError = await assertRejects(
      () => vm.invoke("pick", "x"),
      VMError,
      "If needs a number",
    );
    assertEquals(e.instruction, "If    %0, 3");
  });

  Deno.test(`If and vm.builtin.read_if_cond share one truth rule, bigints included [${form}]`, async () => {
    // TVM (vm.cc If, builtin.cc ReadIfCond): an Int or bool is true when nonzero, a tensor by
    // its element. An Int beyond 2^53 reaches the VM as a bigint.
    const ib = new ExecBuilder();
    ib.function("direct", 1, () => {
      ib.emit_if(ib.r(0), 3);
      ib.emit_call("vm.builtin.copy", ["yes"], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
      ib.emit_call("vm.builtin.copy", ["no"], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    ib.function("read", 1, () => {
      ib.emit_call("vm.builtin.read_if_cond", [ib.r(0)], { dst: ib.r(2) });
      ib.emit_if(ib.r(2), 3);
      ib.emit_call("vm.builtin.copy", ["yes"], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
      ib.emit_call("vm.builtin.copy", ["no"], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    const vm = loadIn(ib.get(), form);
    using zero64 = tensor([0n], { dtype: "int64" });
    using big64 = tensor([2n ** 60n], { dtype: "int64" });
    const cases: [unknown, string][] = [
      [0, "no"],
      [-3, "yes"],
      [false, "no"],
      [true, "yes"],
      [0n, "no"],
      [2n ** 60n, "yes"],
      [-(2n ** 60n), "yes"],
      [zero64, "no"],
      [big64, "yes"],
    ];
    for (const [cond, want] of cases) {
      assertEquals(await vm.invoke("direct", cond), want, `If ${String(cond)}`);
      assertEquals(await vm.invoke("read", cond), want, `read_if_cond ${String(cond)}`);
    }
  });
}

defineVMTests("specialized");
defineVMTests("generic");
defineVMTests("compiled");
