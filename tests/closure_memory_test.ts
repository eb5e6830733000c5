/**
 * Closures count against `maxMemoryBytes` (issue 27, finding 7): a program
 * that builds a chain of closures, each holding the last, in a loop is
 * stopped by the memory limit, as a chain of tuples is, in every form the VM
 * runs code in, and what the chain held is given back.
 */

import { assertEquals, assertLess, assertRejects, assertStringIncludes } from "@std/assert";
import {
  type Closure,
  ExecBuilder,
  Executable,
  registerFunc,
  VirtualMachine,
  VMError,
} from "../mod.ts";

registerFunc("test.closure_memory.add", (a: number, b: number) => a + b, { override: true });
registerFunc("test.closure_memory.lt", (a: number, b: number) => a < b, { override: true });

/** A chain of this many closures capturing one value each (248 bytes) fits 1 MiB once, not twice. */
const FITS_ONCE = 2500;

const FORMS = {
  specialized: { execution: "specialized" },
  generic: { execution: "generic" },
  compiled: { execution: "compiled" },
} as const;

/**
 * `capture(x)`: r1 = closure of `id` capturing r1, forever (each closure
 * captures the last); `wrap(x)`: r1 = closure of the closure r1, forever;
 * `chain(n)`: the same, n times, returning the last; `one(x)`: a closure
 * of `id` capturing `x`; `id(a, c)`.
 */
function chains(): Executable {
  const ib = new ExecBuilder();
  ib.function("id", { num_inputs: 2 }, () => ib.emit_ret(ib.r(0)));
  ib.function("capture", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.make_closure", [ib.f("id"), ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.make_closure", [ib.f("id"), ib.r(1)], { dst: ib.r(1) });
    ib.emit_goto(-1);
    ib.emit_ret(ib.r(1));
  });
  ib.function("wrap", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.make_closure", [ib.f("id"), ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.make_closure", [ib.r(1)], { dst: ib.r(1) });
    ib.emit_goto(-1);
    ib.emit_ret(ib.r(1));
  });
  ib.function("chain", { num_inputs: 1 }, () => {
    ib.emit_call("test.closure_memory.add", [ib.imm(0), ib.imm(0)], { dst: ib.r(2) });
    ib.emit_call("vm.builtin.make_closure", [ib.f("id"), ib.r(0)], { dst: ib.r(1) });
    ib.label("top");
    ib.emit_call("test.closure_memory.lt", [ib.r(2), ib.r(0)], { dst: ib.r(3) });
    ib.emit_if(ib.r(3), "done");
    ib.emit_call("vm.builtin.make_closure", [ib.f("id"), ib.r(1)], { dst: ib.r(1) });
    ib.emit_call("test.closure_memory.add", [ib.r(2), ib.imm(1)], { dst: ib.r(2) });
    ib.emit_goto("top");
    ib.label("done");
    ib.emit_ret(ib.r(1));
  });
  ib.function("one", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.make_closure", [ib.f("id"), ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  return Executable.load(ib.get().save());
}

const EX = chains();

for (const [form, options] of Object.entries(FORMS)) {
  for (const chain of ["capture", "wrap"]) {
    Deno.test(`finding 7 (${form}): a chain of closures (${chain}) stops at maxMemoryBytes`, async () => {
      // The timeout bounds the test: before the fix only it stopped the chain.
      using vm = new VirtualMachine(EX, undefined, {
        ...options,
        maxMemoryBytes: 1 << 20,
        timeoutMs: 3000,
      });
      const before = vm.memory_stats().liveBytes;
      const t0 = performance.now();
      const e = await assertRejects(() => vm.invoke(chain, 1), VMError, "make_closure");
      const ms = performance.now() - t0;
      assertStringIncludes(e.message, "maxMemoryBytes");
      assertLess(ms, 1000, `the limit held after ${ms.toFixed(0)} ms`);
      // Everything was given back: the VM makes closures again, as many as before.
      assertEquals(vm.memory_stats().liveBytes, before);
      using c = await vm.invoke<Closure>("one", 5);
      assertEquals(await vm.invoke_closure(c, 7), 7);
      using long = await vm.invoke<Closure>("chain", FITS_ONCE);
      assertEquals(long.name, "id");
      await assertRejects(() => vm.invoke(chain, 1), VMError, "maxMemoryBytes");
      assertEquals(vm.memory_stats().liveBytes, before);
    });
  }
}

Deno.test("finding 7: a closure's charge lasts while it lives and goes back when it is freed", async () => {
  using vm = new VirtualMachine(EX, undefined, { maxMemoryBytes: 1 << 20 });
  const held = await vm.invoke<Closure>("chain", FITS_ONCE);
  // The chain handed to the user still counts: a second one does not fit beside it.
  await assertRejects(() => vm.invoke("chain", FITS_ONCE), VMError, "maxMemoryBytes");
  held.dispose();
  using again = await vm.invoke<Closure>("chain", FITS_ONCE);
  assertEquals(await vm.invoke_closure(again, 1), 1);
});
