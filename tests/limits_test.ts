/**
 * The limits a VM puts on one invocation (issue 9, findings 1, 4 and 5):
 * register slots on the stack, call depth, fuel, time and cancellation, in
 * every form the VM runs code in. Each test names the finding it holds to.
 */

import {
  assert,
  assertEquals,
  assertInstanceOf,
  assertLess,
  assertRejects,
  assertStringIncludes,
} from "@std/assert";
import {
  cpu,
  ExecBuilder,
  type Executable,
  type NDArray,
  registerFunc,
  tensor,
  VirtualMachine,
  type VirtualMachineOptions,
  VMError,
} from "../mod.ts";
import { loadReport } from "../vm/virtual_machine.ts";

/** The three ways a VM runs code; every limit must hold in each. */
const FORMS = {
  specialized: { execution: "specialized" },
  generic: { execution: "generic" },
  compiled: { execution: "compiled" },
} as const satisfies Record<string, VirtualMachineOptions>;
type Form = keyof typeof FORMS;

function loadIn(ex: Executable, form: Form, options: VirtualMachineOptions = {}): VirtualMachine {
  const vm = new VirtualMachine(ex, cpu(), { ...FORMS[form], ...options });
  for (const f of loadReport(vm)) {
    assertEquals(f.runsAs, form, `@${f.name} runs as ${f.runsAs}, not ${form}`);
  }
  return vm;
}

registerFunc("test.limits.sub", (a: number, b: number) => a - b, { override: true });
registerFunc("test.limits.lt", (a: number, b: number) => a < b, { override: true });
registerFunc("test.limits.async_id", async (x: unknown) => {
  await new Promise((r) => setTimeout(r, 1));
  return x;
}, { override: true });
/** Resolves when `release` is called: holds every caller parked meanwhile. */
let release: () => void = () => {};
let gate = Promise.resolve();
registerFunc("test.limits.gated", (x: unknown) => gate.then(() => x), { override: true });
registerFunc("test.limits.never", () => new Promise(() => {}), { override: true });

/**
 * `down(n)`: recursion `n` deep, each frame holding `extra` more registers
 * (copies of n), so a frame costs about `extra + 4` register slots.
 */
function recursionProgram(extra: number): Executable {
  const ib = new ExecBuilder();
  ib.function("down", { num_inputs: 1 }, () => {
    ib.emit_call("test.limits.lt", [ib.r(0), ib.imm(1)], { dst: ib.r(1) });
    ib.emit_if(ib.r(1), 2);
    ib.emit_ret(ib.r(0));
    for (let k = 0; k < extra; k++) {
      ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(3 + k) });
    }
    ib.emit_call("test.limits.sub", [ib.r(0), ib.imm(1)], { dst: ib.r(2) });
    ib.emit_call("down", [ib.r(2)], { dst: ib.r(3 + extra) });
    // Keep the extra registers alive across the call, so liveness cannot drop them.
    for (let k = 0; k < extra; k++) ib.emit_call("vm.builtin.copy", [ib.r(3 + k)]);
    ib.emit_ret(ib.r(3 + extra));
  });
  return ib.get();
}

/** `spin()`: `Goto -1` forever, after allocating a tensor that stays live. */
function spinProgram(): Executable {
  const ib = new ExecBuilder();
  ib.function("spin", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.copy", [ib.r(1)], { dst: ib.r(2) });
    ib.emit_goto(-1);
    ib.emit_ret(ib.r(2));
  });
  ib.function("ok", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  return ib.get();
}

/** `wait(x)`: allocates a tensor, then calls the packed function `name` with it. */
function waitProgram(name: string): Executable {
  const ib = new ExecBuilder();
  ib.function("wait", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_call(name, [ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("vm.op.add", [ib.r(1), ib.r(1)], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  ib.function("outer", { num_inputs: 1 }, () => {
    ib.emit_call("wait", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("ok", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  return ib.get();
}

for (const form of Object.keys(FORMS) as Form[]) {
  Deno.test(`finding 1: register slots on one invocation's stack are bounded (maxStackSlots) [${form}]`, async () => {
    const vm = loadIn(recursionProgram(20), form, { maxStackSlots: 2000 });
    assertEquals(await vm.invoke("down", 50), 0, "50 frames of ~25 slots fit in 2000");
    const e = await assertRejects(() => vm.invoke("down", 500), VMError, "register slots");
    assertStringIncludes(e.message, "maxStackSlots");
    assertEquals(await vm.invoke("down", 50), 0, "the VM keeps working");
  });

  Deno.test(`finding 4: call depth belongs to one invocation; parked calls do not count for others [${form}]`, async () => {
    const ib = new ExecBuilder();
    ib.function("inner", { num_inputs: 1 }, () => {
      ib.emit_call("test.limits.gated", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    ib.function("outer", { num_inputs: 1 }, () => {
      ib.emit_call("inner", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    const vm = loadIn(ib.get(), form, { maxCallDepth: 4 });
    gate = new Promise((r) => release = r);
    // 600 invocations, each two deep, parked at once: none overflows a depth of 4.
    const calls = Array.from({ length: 600 }, (_, i) => vm.invoke("outer", i));
    release();
    assertEquals(await Promise.all(calls), Array.from({ length: 600 }, (_, i) => i));
  });

  Deno.test(`finding 4: calls that never settle do not break later calls [${form}]`, async () => {
    const vm = loadIn(waitProgram("test.limits.never"), form);
    using x = tensor([1]);
    for (let i = 0; i < 1100; i++) vm.invoke("outer", x); // never settle
    assertEquals(await vm.invoke("ok", 7), 7);
    const e = await assertRejects(() => vm.with({ timeoutMs: 5 }).invoke("outer", x), VMError);
    assertStringIncludes(e.message, "Timed out");
  });

  Deno.test(`finding 5: fuel stops an endless loop with a VMError; frames released, VM usable [${form}]`, async () => {
    const vm = loadIn(spinProgram(), form);
    using x = tensor([1, 2]);
    const base = vm.memory_stats().liveBytes;
    const e = await assertRejects(() => vm.with({ fuel: 10_000 }).invoke("spin", x), VMError);
    assertStringIncludes(e.message, "Out of fuel");
    assertEquals(e.functionName, "spin");
    assertEquals(e.pc, 2, "names the backward jump");
    assertEquals(vm.memory_stats().liveBytes, base);
    assertEquals(await vm.invoke("ok", 3), 3);
  });

  Deno.test(`finding 5: fuel counts calls too: deep recursion runs out [${form}]`, async () => {
    const vm = loadIn(recursionProgram(0), form);
    assertEquals(await vm.with({ fuel: 200 }).invoke("down", 100), 0);
    await assertRejects(() => vm.with({ fuel: 200 }).invoke("down", 300), VMError, "Out of fuel");
    // The VM's default applies to every call; a call's own options override it.
    const limited = loadIn(recursionProgram(0), form, { fuel: 50 });
    await assertRejects(() => limited.invoke("down", 100), VMError, "Out of fuel");
    assertEquals(await limited.with({ fuel: Infinity }).invoke("down", 100), 0);
  });

  Deno.test(`finding 5: a timeout stops a synchronous endless loop [${form}]`, async () => {
    const vm = loadIn(spinProgram(), form);
    using x = tensor([1, 2]);
    const base = vm.memory_stats().liveBytes;
    const t0 = performance.now();
    const e = await assertRejects(() => vm.with({ timeoutMs: 50 }).invoke("spin", x), VMError);
    assertStringIncludes(e.message, "Timed out after 50 ms");
    assertLess(performance.now() - t0, 5000, "stopped, not left running");
    assertEquals(vm.memory_stats().liveBytes, base);
    assertEquals(await vm.invoke("ok", 4), 4);
  });

  Deno.test(`finding 5: an abort signal stops a running or a parked call [${form}]`, async () => {
    const running = loadIn(spinProgram(), form);
    const controller = new AbortController();
    registerFunc("test.limits.abort_now", (x: unknown) => {
      controller.abort();
      return x;
    }, { override: true });
    using x = tensor([1, 2]);
    // Aborted before the call: it does not start.
    const before = new AbortController();
    before.abort();
    await assertRejects(
      () => running.with({ signal: before.signal }).invoke("spin", x),
      VMError,
      "Aborted",
    );
    // Aborted from inside the loop (a packed function aborts it): the next budget check stops it.
    const ib = new ExecBuilder();
    ib.function("spin", { num_inputs: 1 }, () => {
      ib.emit_call("test.limits.abort_now", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_goto(-1);
      ib.emit_ret(ib.r(1));
    });
    const vm = loadIn(ib.get(), form);
    await assertRejects(
      () => vm.with({ signal: controller.signal }).invoke("spin", x),
      VMError,
      "Aborted",
    );
    // Parked on a Promise that never settles: the abort releases the frames at once.
    const parked = loadIn(waitProgram("test.limits.never"), form);
    const base = parked.memory_stats().liveBytes;
    const c2 = new AbortController();
    const call = parked.with({ signal: c2.signal }).invoke("outer", x);
    setTimeout(() => c2.abort(new Error("user cancelled")), 5);
    const e = await assertRejects(() => call, VMError, "Aborted");
    assertEquals(e.functionName, "wait", "names the frame that was waiting");
    assertEquals(e.packedFunc, "test.limits.never");
    assertEquals(parked.memory_stats().liveBytes, base);
    assertEquals(await parked.invoke("ok", 5), 5);
  });

  Deno.test(`finding 5: a Promise that never settles times out, releasing every frame [${form}]`, async () => {
    const vm = loadIn(waitProgram("test.limits.never"), form);
    using x = tensor([1, 2, 3]);
    const base = vm.memory_stats().liveBytes;
    const t0 = performance.now();
    const e = await assertRejects(() => vm.with({ timeoutMs: 20 }).invoke("outer", x), VMError);
    assertStringIncludes(e.message, "Timed out after 20 ms");
    assertLess(performance.now() - t0, 5000, "released, not left waiting");
    assertEquals(vm.memory_stats().liveBytes, base);
    // A Promise that settles in time is unaffected.
    const ok = loadIn(waitProgram("test.limits.async_id"), form, { timeoutMs: 5000 });
    using out = await ok.invoke("outer", x) as NDArray;
    assertEquals([...out.dataSync()], [4, 8, 12]);
  });
}

Deno.test("finding 1: the default stack-slot budget stops deep recursion of big frames before memory runs away", async () => {
  // 20,000 registers per frame: the default budget of 2^24 slots holds about 840 such frames,
  // whatever the depth limit (raised here so that only the slots can stop the recursion).
  const vm = new VirtualMachine(recursionProgram(20_000), cpu(), { maxCallDepth: 100_000 });
  const e = await assertRejects(() => vm.invoke("down", 5000), VMError, "register slots");
  assertStringIncludes(e.message, String(2 ** 24));
  assertEquals(await vm.invoke("down", 10), 0);
});

Deno.test("finding 5: limits are checked where they are given", () => {
  const vm = new VirtualMachine(spinProgram());
  for (const bad of [{ fuel: -1 }, { fuel: NaN }, { timeoutMs: -5 }, { signal: {} }]) {
    let threw = false;
    try {
      vm.with(bad as never);
    } catch (e) {
      threw = e instanceof TypeError || e instanceof RangeError;
    }
    assert(threw, JSON.stringify(bad));
  }
  let threw = false;
  try {
    new VirtualMachine(spinProgram(), cpu(), { maxStackSlots: 0.5 });
  } catch (e) {
    threw = e instanceof RangeError;
  }
  assert(threw);
});

Deno.test("finding 5: vm.with(...) offers get and invoke_closure under the same limits", async () => {
  const ib = new ExecBuilder();
  ib.function("spin", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_goto(-1);
    ib.emit_ret(ib.r(1));
  });
  ib.function("closure", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.make_closure", [ib.f("spin")], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  const vm = new VirtualMachine(ib.get());
  const limited = vm.with({ fuel: 1000 });
  await assertRejects(() => limited.get("spin")(1), VMError, "Out of fuel");
  using closure = await vm.invoke("closure") as Disposable;
  await assertRejects(() => limited.invoke_closure(closure, 1), VMError, "Out of fuel");
});

Deno.test("finding 5: a call aborted by the packed function it waits on does not wait forever", async () => {
  // The signal fires before the frame parks: the abort event has come and gone.
  const controller = new AbortController();
  registerFunc("test.limits.abort_and_hang", () => {
    controller.abort();
    return new Promise(() => {});
  }, { override: true });
  const ex = waitProgram("test.limits.abort_and_hang");
  for (const form of Object.keys(FORMS) as Form[]) {
    const vm = loadIn(ex, form);
    using x = tensor([1]);
    const base = vm.memory_stats().liveBytes;
    const outcome = await Promise.race([
      vm.with({ signal: controller.signal }).invoke("outer", x).catch((e) => e),
      new Promise((resolve) => setTimeout(() => resolve("still waiting"), 1000)),
    ]);
    assertInstanceOf(outcome, VMError, String(outcome));
    assertStringIncludes((outcome as VMError).message, "Aborted");
    assertEquals(vm.memory_stats().liveBytes, base);
  }
});

Deno.test("finding 5: an abort's reason is the VMError's cause; fuel and time have none", async () => {
  const vm = new VirtualMachine(spinProgram());
  using x = tensor([1]);
  const controller = new AbortController();
  const reason = new Error("the user left");
  controller.abort(reason);
  const aborted = await assertRejects(
    () => vm.with({ signal: controller.signal }).invoke("spin", x),
    VMError,
    "Aborted",
  );
  assertEquals(aborted.cause, reason);
  const fuel = await assertRejects(
    () => vm.with({ fuel: 10 }).invoke("spin", tensor([1])),
    VMError,
  );
  assertEquals(fuel.cause, undefined);
});
