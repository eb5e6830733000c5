/**
 * `vm.profile`: counts, times and bytes per call, function and instruction,
 * the table and the Chrome trace, and a VM left as it was. GPU time is
 * checked in tests/webgpu/profile_suite.ts.
 */

import {
  assert,
  assertAlmostEquals,
  assertEquals,
  assertGreaterOrEqual,
  assertRejects,
  assertStringIncludes,
} from "@std/assert";
import {
  ExecBuilder,
  type ProfiledCall,
  registerFunc,
  tensor,
  VirtualMachine,
  type VirtualMachineOptions,
  VMError,
} from "../mod.ts";
import { sizeClass } from "../devices/pooled_allocator.ts";

const FORMS: Record<string, VirtualMachineOptions> = {
  specialized: { execution: "specialized" },
  generic: { execution: "generic" },
  compiled: { execution: "compiled" },
};

registerFunc("test.profile.lt", (a: number, b: number) => a < b, { override: true });
registerFunc("test.profile.add", (a: number, b: number) => a + b, { override: true });
registerFunc("test.profile.sleep", async (x: unknown) => {
  await new Promise((r) => setTimeout(r, 20));
  return x;
}, { override: true });
registerFunc("test.profile.fail", () => {
  throw new Error("failing on purpose");
}, { override: true });

/**
 * `main(x, n)`: `n` times `x = exp(x)` through the VM function `step`, then
 * `x + x`; `step` also counts in a scalar loop.
 */
function program() {
  const ib = new ExecBuilder();
  ib.function("step", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.exp", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("main", { num_inputs: 2 }, () => {
    ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(2) }); // 0: x
    ib.emit_call("test.profile.add", [ib.imm(0), ib.imm(0)], { dst: ib.r(3) }); // 1: i = 0
    ib.emit_call("test.profile.lt", [ib.r(3), ib.r(1)], { dst: ib.r(4) }); // 2: i < n ?
    ib.emit_if(ib.r(4), 4); // 3: no → 7
    ib.emit_call("step", [ib.r(2)], { dst: ib.r(2) }); // 4
    ib.emit_call("test.profile.add", [ib.r(3), ib.imm(1)], { dst: ib.r(3) }); // 5: i++
    ib.emit_goto(-4); // 6: → 2
    ib.emit_call("vm.op.add", [ib.r(2), ib.r(2)], { dst: ib.r(5) }); // 7
    ib.emit_ret(ib.r(5));
  });
  ib.function("slow", { num_inputs: 1 }, () => {
    ib.emit_call("test.profile.sleep", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("fails", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.exp", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("test.profile.fail", [ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  return ib.get();
}

const calls = (rows: { name: string; calls: number }[]) =>
  Object.fromEntries(rows.map((r) => [r.name, r.calls]));

for (const [form, options] of Object.entries(FORMS)) {
  Deno.test(`profile: call counts per function and instruction match the program [${form}]`, async () => {
    const vm = new VirtualMachine(program(), undefined, options);
    using x = tensor([0, 0.5, 1]);
    const report = await vm.profile("main", x, 5);
    assertEquals(report.functionName, "main");
    assertEquals(calls(report.byFunction()), {
      "vm.builtin.copy": 1,
      "test.profile.add": 6, // i = 0, then five increments
      "test.profile.lt": 6, // five times true, once false
      step: 5,
      "vm.op.exp": 5, // inside step
      "vm.op.add": 1,
    });
    assertEquals(calls(report.byInstruction()), {
      "@main[0]": 1,
      "@main[1]": 1,
      "@main[2]": 6,
      "@main[4]": 5,
      "@main[5]": 5,
      "@main[7]": 1,
      "@step[0]": 5,
    });
    assertEquals(report.calls.length, 24);
    const row = report.byInstruction().find((r) => r.name === "@main[4]")!;
    assertEquals([row.kind, row.instruction], [
      "vm",
      "call  step             in: %2           dst: %2",
    ]);
  });
}

Deno.test("profile: calls nest, and times add up", async () => {
  const vm = new VirtualMachine(program());
  using x = tensor([0, 0.5, 1]);
  const report = await vm.profile("main", x, 3);
  const byId = (id: number) => report.calls[id];
  for (const c of report.calls) {
    assertEquals(c.id, report.calls.indexOf(c));
    assertGreaterOrEqual(c.durationMs, c.selfMs);
    assertGreaterOrEqual(c.selfMs, 0);
    assert(c.startMs >= 0 && c.startMs + c.durationMs <= report.callMs + 1e-6);
    assertEquals(c.failed, false);
    assertEquals(c.gpuMs, null, "no GPU on a CPU VM");
    if (c.callee === "vm.op.exp") {
      const parent = byId(c.parent);
      assertEquals([parent.callee, parent.kind, c.depth, c.functionName], [
        "step",
        "vm",
        1,
        "step",
      ]);
      assert(
        c.startMs >= parent.startMs &&
          c.startMs + c.durationMs <= parent.startMs + parent.durationMs + 1e-6,
      );
    } else {
      assertEquals([c.parent, c.depth, c.functionName], [-1, 0, "main"]);
    }
  }
  // A VM function's self time is its total less its calls'.
  const step = report.calls.find((c) => c.callee === "step")!;
  const inner = report.calls.filter((c) => c.parent === step.id);
  assertAlmostEquals(
    step.selfMs,
    step.durationMs - inner.reduce((a, c) => a + c.durationMs, 0),
    1e-9,
  );
  // Rows count self time once: together they are at most the call's time.
  const selfTotal = report.byFunction().reduce((a, r) => a + r.selfMs, 0);
  assert(selfTotal <= report.callMs + 1e-6, `${selfTotal} > ${report.callMs}`);
  assertAlmostEquals(
    report.byFunction().reduce((a, r) => a + r.percent, 0),
    100 * selfTotal / report.callMs,
    1e-6,
  );
});

Deno.test("profile: bytes allocated per call match the VM's memory_stats deltas", async () => {
  for (const allocator of ["pooled", "naive"] as const) {
    const vm = new VirtualMachine(program(), undefined, { allocator });
    using x = tensor(new Float32Array(100)); // 400 bytes per tensor
    for (let round = 0; round < 2; round++) { // the second round is served by the pool
      const before = vm.memory_stats();
      const report = await vm.profile("main", x, 3);
      const after = vm.memory_stats();
      const top = report.calls.filter((c) => c.parent < 0);
      const sum = (f: (c: ProfiledCall) => number) => top.reduce((a, c) => a + f(c), 0);
      assertEquals(sum((c) => c.bytes), after.servedBytes - before.servedBytes, allocator);
      assertEquals(sum((c) => c.newBytes), after.allocatedBytes - before.allocatedBytes, allocator);
      const block = allocator === "pooled" ? sizeClass(400) : 400;
      // copy allocates nothing; each exp one tensor (counted for step and for exp); add one.
      const rows = Object.fromEntries(report.byFunction().map((r) => [r.name, r.bytes]));
      assertEquals(rows, {
        "vm.builtin.copy": 0,
        "test.profile.add": 0,
        "test.profile.lt": 0,
        step: 0, // its exp's bytes are the exp's row
        "vm.op.exp": 3 * block,
        "vm.op.add": block,
      });
      const step = report.calls.find((c) => c.callee === "step")!;
      assertEquals(step.bytes, block, "a VM function's call counts what its calls allocated");
      if (allocator === "pooled" && round === 1) {
        assertEquals(sum((c) => c.newBytes), 0, "the pool served every block");
      }
      assertEquals(after.liveBytes, 0, "the result was released");
    }
  }
});

Deno.test("profile: an awaited packed function's time includes the wait", async () => {
  const vm = new VirtualMachine(program());
  const report = await vm.profile("slow", 7);
  const [call] = report.calls;
  assertEquals(call.callee, "test.profile.sleep");
  assertGreaterOrEqual(call.durationMs, 15);
  assertGreaterOrEqual(report.callMs, call.durationMs);
});

Deno.test("profile: the table and the summary", async () => {
  const vm = new VirtualMachine(program());
  using x = tensor([0, 0.5, 1]);
  const report = await vm.profile("main", x, 2);
  const table = report.table();
  assertEquals(String(report), table);
  assertEquals(Deno.inspect(report), table);
  const lines = table.split("\n");
  assert(
    /^Profile of @main: [\d.]+ ms, 12 calls; 48 B allocated, \S+ \S+ of it new from the device$/
      .test(lines[0]),
    lines[0],
  );
  assertStringIncludes(
    table,
    "By function (self: without the calls it made; a VM function's total includes them)",
  );
  assert(
    lines.some((l) =>
      /^function\s+kind\s+calls\s+total ms\s+self ms\s+mean ms\s+self %\s+allocated\s+new$/.test(l)
    ),
  );
  assert(
    lines.some((l) =>
      /^vm\.op\.exp\s+packed\s+2\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+%\s+32 B\s+\S+ B$/.test(l)
    ),
    table,
  );
  assert(lines.some((l) => /^@main\[4\]\s+call step in: %2 dst: %2\s+2\s/.test(l)), table);
  assert(!table.includes("GPU"), "no GPU column without a GPU");
  // Which CPU kernels computed (kernels/cpu/wasm/runtime.ts), on its own line.
  assert(lines.some((l) => /^CPU: (WebAssembly|TypeScript) .*kernels/.test(l)), table);
  assertEquals(report.cpuKernels, lines.find((l) => l.startsWith("CPU: "))!.slice(5));
});

Deno.test("profile: the Chrome trace parses and holds every call, nested in its parent", async () => {
  const vm = new VirtualMachine(program());
  using x = tensor([0, 0.5, 1]);
  const report = await vm.profile("main", x, 2);
  const trace = JSON.parse(JSON.stringify(report.chromeTrace()));
  assertEquals(trace.displayTimeUnit, "ms");
  const events = trace.traceEvents as {
    name: string;
    ph: string;
    ts: number;
    dur?: number;
    pid: number;
    tid: number;
    cat?: string;
    args?: Record<string, unknown>;
  }[];
  const complete = events.filter((e) => e.ph === "X");
  assertEquals(complete.length, report.calls.length + 1, "the call itself and each call in it");
  const root = complete[0];
  assertEquals([root.name, root.ts], ["@main", 0]);
  assertAlmostEquals(root.dur!, report.callMs * 1000, 0.01);
  report.calls.forEach((c, i) => {
    const e = complete[i + 1];
    assertEquals(e.name, c.callee);
    assertEquals(e.cat, c.kind === "vm" ? "vm function" : "packed function");
    assertEquals([e.pid, e.tid], [1, 1]);
    assertEquals(e.args, {
      function: `@${c.functionName}`,
      pc: c.pc,
      instruction: c.instruction,
      allocatedBytes: c.bytes,
      newBytes: c.newBytes,
    });
    const parent = c.parent < 0 ? root : complete[c.parent + 1];
    assert(e.ts >= parent.ts && e.ts + e.dur! <= parent.ts + parent.dur! + 0.01, `${e.name} nests`);
  });
  assert(events.some((e) => e.ph === "M" && e.name === "thread_name"));
});

Deno.test("profile: a failing call throws as invoke does, and marks nothing in the VM", async () => {
  const vm = new VirtualMachine(program());
  using x = tensor([1, 2]);
  const e = await assertRejects(() => vm.profile("fails", x), VMError, "failing on purpose");
  assertEquals([e.functionName, e.pc, e.packedFunc], ["fails", 1, "test.profile.fail"]);
  assertEquals(vm.memory_stats().liveBytes, 0, "the frame's tensors were released");
  await assertRejects(() => vm.profile("nope"), VMError, 'No VM function named "nope"');
  await assertRejects(() => vm.profile("main", x), VMError, "takes 2 arguments, got 1");
  // The VM runs and profiles as before.
  assertEquals(calls((await vm.profile("main", x, 1)).byFunction())["vm.op.exp"], 1);
  using y = await vm.invokeTensor("main", x, 1);
  assertEquals(y.shape, [2]);
});

Deno.test("profile: the user's instrument is still called, may skip, and stays set", async () => {
  for (const [form, options] of Object.entries(FORMS)) {
    const vm = new VirtualMachine(program(), undefined, options);
    const seen: string[] = [];
    vm.set_instrument((_f, name, before) => {
      if (before) seen.push(name);
    });
    using x = tensor([0, 1]);
    const report = await vm.profile("main", x, 1);
    assertEquals(seen.length, report.calls.length, form);
    // "skip" skips a call, and a skipped call is not profiled.
    vm.set_instrument((_f, name, before) =>
      before && name === "test.profile.lt" ? "skip" : undefined
    );
    const skipping = await vm.profile("slow", 1);
    assertEquals(skipping.calls.length, 1);
    const withSkip = await vm.profile("main", x, 0).catch((e) => e);
    assert(withSkip instanceof VMError, "lt skipped: its register was never written, so If fails");
    // The instrument stays set after the profiles, failed ones included.
    seen.length = 0;
    vm.set_instrument((_f, name, before) => {
      if (before) seen.push(name);
    });
    await vm.invoke("slow", 1);
    assertEquals(seen, ["test.profile.sleep"], form);
  }
});

Deno.test("profile: other invocations running meanwhile are not profiled", async () => {
  const vm = new VirtualMachine(program());
  using x = tensor([0, 1]);
  const other = vm.invoke("slow", 1); // parks on the sleep while the profile runs
  const report = await vm.profile("main", x, 2);
  assertEquals(await other, 1);
  assert(report.calls.every((c) => c.callee !== "test.profile.sleep"));
  assertEquals(report.calls.length, 12);
});

Deno.test("profile: a saved function runs with its saved arguments", async () => {
  const vm = new VirtualMachine(program());
  using x = tensor([0, 1]);
  vm.save_function("main", "main_saved", x, 4);
  const report = await vm.profile("main_saved");
  assertEquals(report.functionName, "main");
  assertEquals(calls(report.byFunction())["vm.op.exp"], 4);
  assertEquals(report.inputs, { tensors: 0, bytes: 0, device: "cpu(0)" });
});
