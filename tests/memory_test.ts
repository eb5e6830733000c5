import { assert, assertEquals, assertRejects, assertStrictEquals } from "@std/assert";
import {
  type Closure,
  cpu,
  ExecBuilder,
  type NDArray,
  registerFunc,
  tensor,
  VirtualMachine,
  type VirtualMachineOptions,
  VMError,
} from "../mod.ts";
import { checkBaseline, livenessPeaks } from "./_memory_checks.ts";

registerFunc("test.mem.fail_if", (flag: number) => {
  if (flag) throw new Error("asked to fail");
  return flag;
}, { override: true });

/** The three ways a VM runs code; memory figures must be the same in each. */
const FORMS: Record<string, VirtualMachineOptions> = {
  specialized: { execution: "specialized" },
  generic: { execution: "generic" },
  compiled: { execution: "compiled" },
};

Deno.test("liveness: the chain computes the same result with a fraction of the peak memory, the same in every form (CPU)", async () => {
  const peaks = new Map<string, [number, number]>();
  for (const [form, options] of Object.entries(FORMS)) {
    peaks.set(form, await livenessPeaks(cpu(), options));
  }
  assertEquals(peaks.get("compiled"), peaks.get("specialized"));
  assertEquals(peaks.get("generic"), peaks.get("specialized"));
});

for (const [form, options] of Object.entries(FORMS)) {
  Deno.test(`memory: live bytes return to baseline after every invocation, failed ones too (CPU) [${form}]`, () =>
    checkBaseline(cpu(), options));
}

Deno.test("lifetime: values reachable through tuples, closures, branches and loops survive releases", async () => {
  registerFunc("test.mem.lt", (a: number, b: number) => a < b, { override: true });
  registerFunc("test.mem.inc", (a: number) => a + 1, { override: true });
  const ib = new ExecBuilder();
  ib.function("id", 2, () => ib.emit_ret(ib.r(1)));
  // r1 = a + a; tuple (r1); closure over r1; r1 dies; loop adds x to acc 3 times; branch picks.
  ib.function("main", 2, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(2) }); // 0
    ib.emit_call("vm.builtin.make_tuple", [ib.r(2)], { dst: ib.r(3) }); // 1
    ib.emit_call("vm.builtin.make_closure", [ib.f("id"), ib.r(2)], { dst: ib.r(4) }); // 2
    ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(5) }); // 3  i = 0
    ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(6) }); // 4  acc = a
    ib.emit_call("test.mem.lt", [ib.r(5), ib.imm(3)], { dst: ib.r(7) }); // 5
    ib.emit_if(ib.r(7), 4); // 6
    ib.emit_call("vm.op.add", [ib.r(6), ib.r(0)], { dst: ib.r(6) }); // 7  acc += a (a live around the loop)
    ib.emit_call("test.mem.inc", [ib.r(5)], { dst: ib.r(5) }); // 8
    ib.emit_goto(-4); // 9
    ib.emit_if(ib.r(1), 3); // 10
    ib.emit_call("vm.builtin.tuple_getitem", [ib.r(3), ib.imm(0)], { dst: ib.r(8) }); // 11
    ib.emit_goto(2); // 12
    ib.emit_call("vm.builtin.invoke_closure", [ib.r(4), ib.r(6)], { dst: ib.r(8) }); // 13 → captured r2
    ib.emit_call("vm.builtin.make_tuple", [ib.r(8), ib.r(6), ib.r(4)], { dst: ib.r(9) }); // 14
    ib.emit_ret(ib.r(9));
  });
  const ex = ib.get();
  assert(ex.as_text({ releases: true }).includes("release"), "liveness releases something");
  const runs: VirtualMachineOptions[] = [
    { allocator: "pooled" },
    { allocator: "naive", dispatch: "generic" },
    { allocator: "pooled", mode: "compiled" },
  ];
  for (const options of runs) {
    const vm = new VirtualMachine(ex, cpu(), options);
    using a = tensor([1, 2]);
    for (const flag of [1, 0]) {
      const [picked, acc, closure] = await vm.invoke("main", a, flag) as [
        NDArray,
        NDArray,
        unknown,
      ];
      assertEquals(
        [...picked.dataSync()],
        [2, 4],
        `flag ${flag}: value from ${flag ? "the tuple" : "the closure"}`,
      );
      assertEquals([...acc.dataSync()], [4, 8], "a stayed live around the loop");
      assertEquals([...(await vm.invoke_closure(closure, 0) as NDArray).dataSync()], [2, 4]);
      picked.dispose();
      acc.dispose();
    }
    assertEquals([...a.dataSync()], [1, 2], "the caller's argument is intact");
  }
});

Deno.test("lifetime: a tensor returned to the user is freed by dispose(), not before", async () => {
  const ib = new ExecBuilder();
  ib.function("twice", 1, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const vm = new VirtualMachine(ib.get());
  using x = tensor([3]);
  const out = await vm.invoke("twice", x) as NDArray;
  assertEquals(vm.memory_stats().liveBytes, 16);
  assertEquals([...out.dataSync()], [6]);
  out.dispose();
  assertEquals(vm.memory_stats().liveBytes, 0);
  assertStrictEquals(out.disposed, true);
  out.dispose(); // harmless twice
});

Deno.test("lifetime: a closure returned to the user releases what it captured on dispose()", async () => {
  const ib = new ExecBuilder();
  ib.function("scale", 2, () => {
    ib.emit_call("vm.op.multiply", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  ib.function("make_scaler", 1, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) }); // captured: made by the VM
    ib.emit_call("vm.builtin.make_closure", [ib.f("scale"), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  const vm = new VirtualMachine(ib.get());
  using x = tensor([1, 2]);
  const scaler = await vm.invoke("make_scaler", x) as Closure;
  assertEquals(vm.memory_stats().liveBytes, 16); // the captured 2·x
  {
    using y = await vm.invoke_closure(scaler, tensor([10, 10])) as NDArray;
    assertEquals([...y.dataSync()], [20, 40]);
  }
  assertEquals(vm.memory_stats().liveBytes, 16);
  scaler.dispose();
  assertEquals(vm.memory_stats().liveBytes, 0);
  assertStrictEquals(scaler.disposed, true);
  scaler.dispose(); // harmless twice
  const e: VMError = await assertRejects(
    () => vm.invoke_closure(scaler, x),
    VMError,
    "was disposed",
  );
  assertEquals(e.functionName, "scale");
  // With `using`, the end of the scope disposes it.
  {
    using _scoped = await vm.invoke("make_scaler", x) as Closure;
    assertEquals(vm.memory_stats().liveBytes, 16);
  }
  assertEquals(vm.memory_stats().liveBytes, 0);
  // The VM stays usable.
  using again = await vm.invoke("make_scaler", x) as Closure;
  using z = await vm.invoke_closure(again, tensor([1, 1])) as NDArray;
  assertEquals([...z.dataSync()], [2, 4]);
});

Deno.test("memory: storages, tensor views and bad sizes", async () => {
  const ib = new ExecBuilder();
  ib.function("views", 1, () => {
    ib.emit_call(
      "vm.builtin.alloc_storage",
      [ib.vm_state(), [64], ib.imm(0), "float32", "global"],
      {
        dst: ib.r(1),
      },
    );
    ib.emit_call("vm.builtin.alloc_tensor", [ib.r(1), ib.imm(0), [2, 2], "float32"], {
      dst: ib.r(2),
    });
    ib.emit_call("vm.builtin.alloc_tensor", [ib.r(1), ib.r(0), [4], "float32"], { dst: ib.r(3) });
    ib.emit_call("vm.builtin.make_tuple", [ib.r(2), ib.r(3)], { dst: ib.r(4) });
    ib.emit_ret(ib.r(4));
  });
  ib.function("huge", 0, () => {
    ib.emit_call("vm.builtin.alloc_storage", [
      ib.vm_state(),
      [2 ** 40],
      ib.imm(0),
      "float32",
      "global",
    ], {
      dst: ib.r(0),
    });
    ib.emit_ret(ib.r(0));
  });
  ib.function("use_after_kill", 1, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.kill", [ib.r(1)]);
    ib.emit_call("vm.op.add", [ib.r(1), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  const vm = new VirtualMachine(ib.get());
  const [a, b] = await vm.invoke("views", 16) as NDArray[];
  assertEquals(vm.memory_stats().liveBytes, 256, "one 256-byte storage, two views");
  assertEquals([a.shape, b.shape], [[2, 2], [4]]);
  a.dispose();
  assertEquals(vm.memory_stats().liveBytes, 256, "b still views the storage");
  b.dispose();
  assertEquals(vm.memory_stats().liveBytes, 0);
  await assertRejects(
    () => vm.invoke("views", 248),
    VMError,
    "does not fit in a storage of 256 bytes",
  );
  await assertRejects(() => vm.invoke("views", 3), VMError, "not a non-negative multiple of 4");
  await assertRejects(() => vm.invoke("huge"), VMError, "Cannot allocate");
  using x = tensor([1]);
  await assertRejects(
    () => vm.invoke("use_after_kill", x),
    VMError,
    "used after its memory was released",
  );
  assertEquals(vm.memory_stats().liveBytes, 0, "nothing leaked by the failures");
  const [c, d] = await vm.invoke("views", 0) as NDArray[];
  c.dispose();
  d.dispose();
});

Deno.test("maxMemoryBytes bounds a VM's memory on all its devices together, either allocator", async () => {
  const program = new ExecBuilder();
  program.function("two", 2, () => {
    program.emit_call("vm.builtin.alloc_storage", [
      program.vm_state(),
      program.r(0),
      program.imm(0),
      program.convert_constant("uint8"),
    ], { dst: program.r(2) });
    program.emit_call("vm.builtin.alloc_storage", [
      program.vm_state(),
      program.r(1),
      program.imm(1),
      program.convert_constant("uint8"),
    ], { dst: program.r(3) });
    program.emit_call("vm.builtin.make_tuple", [program.r(2), program.r(3)], { dst: program.r(4) });
    program.emit_ret(program.r(4));
  });
  const ex = program.get();
  for (const allocator of ["pooled", "naive"] as const) {
    // 64 KiB for the storages, and room for the tuple that holds them (tuples count too).
    const maxMemoryBytes = 64 * 1024 + 1024;
    const vm = new VirtualMachine(ex, [cpu(0), cpu(1)], { allocator, maxMemoryBytes });
    const pair = await vm.invoke("two", [30 * 1024], [30 * 1024]) as { dispose(): void }[];
    pair.forEach((s) => s.dispose());
    const e = await assertRejects(
      () => vm.invoke("two", [40 * 1024], [40 * 1024]),
      VMError,
      "memory limit of 66560 bytes",
    );
    assert(e.message.includes("on cpu(1)"), e.message);
    assertEquals(vm.memory_stats(cpu(0)).liveBytes, 0, allocator);
    assertEquals(vm.memory_stats(cpu(1)).liveBytes, 0, allocator);
  }
});
