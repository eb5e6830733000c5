import { assert, assertEquals, assertFalse, assertRejects } from "@std/assert";
import {
  cpu,
  ExecBuilder,
  Executable,
  type NDArray,
  registerFunc,
  tensor,
  VirtualMachine,
  type VirtualMachineOptions,
  VMError,
} from "../mod.ts";
import { loadReport } from "../vm/virtual_machine.ts";
import { evalRefused, resetEvalRefused } from "../vm/dynamic_code.ts";

const FORMS: Record<string, VirtualMachineOptions> = {
  specialized: { execution: "specialized" },
  generic: { execution: "generic" },
  compiled: { execution: "compiled" },
};

/** Runs `fn` with `globalThis.Function` replaced by `stand_in`, restoring it after. */
function withFunction<T>(standIn: FunctionConstructor, fn: () => T): T {
  const real = globalThis.Function;
  globalThis.Function = standIn;
  try {
    return fn();
  } finally {
    globalThis.Function = real;
  }
}

Deno.test("hostile function names, strings and constants never reach generated source", async () => {
  const marker = "pwned";
  const names = [
    `"); globalThis.${marker} = 1; //`,
    `*/ globalThis.${marker} = 2; /*`,
    `\`; globalThis.${marker} = 3; \``,
    `\${globalThis.${marker} = 4}`,
    `\n}; globalThis.${marker} = 5; {`,
  ];
  // Packed functions under hostile names: each tags its argument with its own index.
  names.forEach((name, i) => registerFunc(name, (x: unknown) => `${i}:${x}`, { override: true }));
  const strings = [
    `*/ globalThis.${marker} = 6; /*`,
    `\`\${globalThis.${marker} = 7}\``,
    `'); globalThis.${marker} = 8; ('`,
    `</script><script>globalThis.${marker} = 9</script>`,
  ];
  const vmName = `"); globalThis.${marker} = 10; //`;
  const ib = new ExecBuilder();
  ib.function(vmName, { num_inputs: 1, param_names: [`x); globalThis.${marker} = 11; (`] }, () => {
    let last = 0;
    names.forEach((name, i) => {
      ib.emit_call(name, [i === 0 ? ib.r(0) : ib.r(last)], { dst: ib.r(1 + i) });
      last = 1 + i;
    });
    const next = 1 + names.length;
    ib.emit_call("vm.builtin.make_tuple", [ib.r(last), ...strings, ib.convert_constant(-0)], {
      dst: ib.r(next),
    });
    ib.emit_ret(ib.r(next));
  });
  // Through bytes, as an executable from elsewhere would arrive.
  const ex = Executable.load(ib.get().save());

  const sources: string[] = [];
  const RealFunction = globalThis.Function;
  const recording = function (...args: string[]) {
    sources.push(args.join("\n"));
    return RealFunction(...args);
  } as unknown as FunctionConstructor;
  for (const [form, options] of Object.entries(FORMS)) {
    const vm = withFunction(recording, () => new VirtualMachine(ex, cpu(), options));
    const [report] = loadReport(vm);
    assertEquals(report.runsAs, form, "the form really generated (or, generic, needs no) source");
    const out = await vm.invoke(vmName, "in") as unknown[];
    assertEquals(out, ["4:3:2:1:0:in", ...strings, -0], form);
    assert(Object.is(out.at(-1), -0), "the -0 constant stays -0");
  }
  assertFalse(marker in globalThis, "no hostile text ran");
  assert(sources.length >= 2, "specialized and compiled code were generated");
  for (const source of sources) {
    assertFalse(source.includes(marker), "no name, string or constant became source");
    // Only integers from the program are written out: no string literal but the fixed ones.
    const literals = source.match(/"[^"\n]*"/g) ?? [];
    for (const literal of literals) {
      assert(
        ["use strict", "object", "pc ", " is outside the function", "fell off the end"]
          .some((fixed) => literal.includes(fixed)),
        `unexpected literal ${literal}`,
      );
    }
    assertFalse(/[`']/.test(source), "no template or single-quoted literal");
  }
});

Deno.test("where new Function is unavailable (CSP), every form falls back to the generic loop", async () => {
  const ib = new ExecBuilder();
  ib.function("sum_to", 1, () => {
    ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(2) });
    ib.emit_call("test.cm.lt", [ib.r(2), ib.r(0)], { dst: ib.r(3) });
    ib.emit_if(ib.r(3), 4);
    ib.emit_call("test.cm.add", [ib.r(1), ib.r(2)], { dst: ib.r(1) });
    ib.emit_call("test.cm.add", [ib.r(2), ib.imm(1)], { dst: ib.r(2) });
    ib.emit_goto(-4);
    ib.emit_ret(ib.r(1));
  });
  registerFunc("test.cm.lt", (a: number, b: number) => a < b, { override: true });
  registerFunc("test.cm.add", (a: number, b: number) => a + b, { override: true });
  ib.function("twice", 1, () => {
    ib.emit_call("test.cm.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const ex = ib.get();
  let attempts = 0;
  const noEval = function () {
    attempts++;
    throw new EvalError("Refused to evaluate a string as JavaScript (CSP)");
  } as unknown as FunctionConstructor;
  try {
    for (const options of Object.values(FORMS)) {
      const vm = withFunction(noEval, () => new VirtualMachine(ex, cpu(), options));
      assertEquals(loadReport(vm).map((f) => f.runsAs), ["generic", "generic"]);
      assertEquals(await vm.invoke("sum_to", 10), 45);
      assertEquals(await vm.invoke("twice", 21), 42);
    }
    // A browser reports every refused attempt (a CSP violation report): the first refusal is
    // remembered for the realm, so three VMs of two functions each tried once, not six times.
    assertEquals(attempts, 1);
    assert(evalRefused());
  } finally {
    resetEvalRefused();
  }
  // Once the refusal is forgotten (a test-only reset), generated code is tried again.
  const again = new VirtualMachine(ex, cpu(), { execution: "specialized" });
  assertEquals(loadReport(again).map((f) => f.runsAs), ["specialized", "specialized"]);
});

Deno.test("an error other than EvalError does not stop later functions from being generated", () => {
  const ib = new ExecBuilder();
  ib.function("a", 1, () => ib.emit_ret(ib.r(0)));
  ib.function("b", 1, () => ib.emit_ret(ib.r(0)));
  const RealFunction = globalThis.Function;
  let calls = 0;
  const firstFails = function (...args: string[]) {
    if (calls++ === 0) throw new SyntaxError("not a refusal");
    return RealFunction(...args);
  } as unknown as FunctionConstructor;
  const vm = withFunction(
    firstFails,
    () => new VirtualMachine(ib.get(), cpu(), { execution: "specialized" }),
  );
  assertEquals(loadReport(vm).map((f) => f.runsAs), ["generic", "specialized"]);
  assertFalse(evalRefused());
});

registerFunc("test.cm.later", async (x: unknown) => {
  await new Promise((r) => setTimeout(r, 1));
  return x;
}, { override: true });

/** A program that keeps tensors in registers across a parked call, in a callee and a caller. */
function parkingProgram() {
  const ib = new ExecBuilder();
  ib.function("inner", 1, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) }); // 2x, held across the park
    ib.emit_call("test.cm.later", [ib.r(1)], { dst: ib.r(2) }); // parks; resolves to 2x
    ib.emit_call("vm.op.add", [ib.r(2), ib.r(1)], { dst: ib.r(3) }); // 4x
    ib.emit_ret(ib.r(3));
  });
  ib.function("outer", 1, () => {
    ib.emit_call("vm.op.multiply", [ib.r(0), ib.r(0)], { dst: ib.r(1) }); // x², held
    ib.emit_call("inner", [ib.r(0)], { dst: ib.r(2) }); // returns a Promise: outer parks too
    ib.emit_call("vm.op.add", [ib.r(1), ib.r(2)], { dst: ib.r(3) }); // x² + 4x
    ib.emit_call("test.cm.later", [ib.r(3)]); // result discarded after a park
    ib.emit_ret(ib.r(3));
  });
  return ib.get();
}

Deno.test("a Promise parks a compiled frame, the interpreter finishes the call, and memory figures match", async () => {
  const stats: unknown[] = [];
  for (const [form, options] of Object.entries(FORMS)) {
    const vm = new VirtualMachine(parkingProgram(), cpu(), options);
    if (form === "compiled") {
      assertEquals(loadReport(vm).map((f) => f.runsAs), ["compiled", "compiled"]);
    }
    using x = tensor([1, 2, 3]);
    for (let i = 0; i < 3; i++) {
      using out = await vm.invoke("outer", x) as NDArray;
      assertEquals([...out.dataSync()], [5, 12, 21], form);
    }
    const [a, b] = await Promise.all([vm.invoke("inner", x), vm.invoke("outer", x)]);
    assertEquals([...(a as NDArray).dataSync()], [4, 8, 12]);
    assertEquals([...(b as NDArray).dataSync()], [5, 12, 21]);
    (a as NDArray).dispose();
    (b as NDArray).dispose();
    assertEquals(vm.memory_stats().liveBytes, 0, `${form}: everything released`);
    stats.push(vm.memory_stats());
  }
  assertEquals(stats[1], stats[0], "generic matches specialized");
  assertEquals(stats[2], stats[0], "compiled matches specialized");
});

Deno.test("compiled mode: errors after a park and before one release the frame's tensors", async () => {
  registerFunc("test.cm.fail_on", (flag: number, x: unknown) => {
    if (flag) throw new Error("failing on purpose");
    return x;
  }, { override: true });
  const ib = new ExecBuilder();
  ib.function("main", 3, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(3) });
    ib.emit_call("test.cm.fail_on", [ib.r(1), ib.r(3)], { dst: ib.r(4) }); // pc 1
    ib.emit_call("test.cm.later", [ib.r(4)], { dst: ib.r(5) });
    ib.emit_call("test.cm.fail_on", [ib.r(2), ib.r(5)], { dst: ib.r(6) }); // pc 3, after the park
    ib.emit_ret(ib.r(6));
  });
  const vm = new VirtualMachine(ib.get(), cpu(), { mode: "compiled" });
  assertEquals(loadReport(vm)[0].runsAs, "compiled");
  using x = tensor([1]);
  for (const [before, after, pc] of [[1, 0, 1], [0, 1, 3]]) {
    const e: VMError = await assertRejects(() => vm.invoke("main", x, before, after), VMError);
    assertEquals([e.functionName, e.pc, e.packedFunc], ["main", pc, "test.cm.fail_on"]);
    assertEquals(vm.memory_stats().liveBytes, 0);
  }
  using ok = await vm.invoke("main", x, 0, 0) as NDArray;
  assertEquals([...ok.dataSync()], [2]);
});

Deno.test("compiled mode: an instrument runs calls on the interpreter; removing it runs compiled code again", async () => {
  const ib = new ExecBuilder();
  ib.function("twice", 1, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const vm = new VirtualMachine(ib.get(), cpu(), { mode: "compiled" });
  using x = tensor([3]);
  const seen: string[] = [];
  vm.set_instrument((_f, name, before) => void seen.push(`${before ? "before" : "after"} ${name}`));
  (await vm.invoke("twice", x) as NDArray).dispose();
  assertEquals(seen, ["before vm.op.add", "after vm.op.add"]);
  vm.set_instrument(null);
  using y = await vm.invoke("twice", x) as NDArray;
  assertEquals([...y.dataSync()], [6]);
  assertEquals(seen.length, 2, "no instrument, no report");
});
