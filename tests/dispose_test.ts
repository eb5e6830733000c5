/**
 * Deterministic release of executables and VMs: `dispose()` frees constant
 * tensors, saved arguments and pooled blocks now, instead of whenever the
 * garbage collector runs. A process that loads executables one after another
 * (a server, the fuzz families) grew to gigabytes without it.
 */
import { assert, assertEquals, assertRejects, assertThrows } from "@std/assert";
import {
  cpu,
  ExecBuilder,
  Executable,
  NDArray,
  type ShapeTuple,
  tensor,
  VirtualMachine,
  VMError,
} from "../mod.ts";

/**
 * A program whose constant is a 4 KiB tensor; `main` returns its shape, `twice(x)` adds x to
 * itself. Built once: the builder's pool holds that tensor, and a builder left to the garbage
 * collector would free it in the middle of a later test's count.
 */
const BUILDER = new ExecBuilder();
const BYTES = buildProgram(BUILDER);
function programBytes(): Uint8Array {
  return BYTES;
}

function buildProgram(ib: ExecBuilder): Uint8Array {
  using big = tensor(new Float32Array(1024));
  ib.function("main", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.shape_of", [big], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  ib.function("twice", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("constant", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.copy", [big], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  using ex = ib.get();
  return ex.save();
}

/** The constant tensor of a loaded executable: its state says whether its memory is freed. */
function constantOf(ex: Executable): NDArray {
  return ex.constants.find((c) => c instanceof NDArray) as NDArray;
}

// These check the constant's own state, not the host allocator's total: another test's tensor
// that the garbage collector frees meanwhile would move the total (a CI run saw -4096).
Deno.test("dispose: an executable and its VM free their constants at once, no garbage collector needed", async () => {
  const ex = Executable.load(programBytes());
  const c = constantOf(ex);
  assertEquals(c.nbytes, 4096);
  const vm = new VirtualMachine(ex);
  assertEquals((await vm.invoke("main") as ShapeTuple).dims, [1024]);
  ex.dispose(); // the VM still holds the constant
  assert(!c.disposed);
  assertEquals((await vm.invoke("main") as ShapeTuple).dims, [1024]);
  vm.dispose();
  assert(c.disposed);
});

Deno.test("dispose: in either order, and with using", async () => {
  const bytes = programBytes();
  let first: NDArray;
  {
    using ex = Executable.load(bytes);
    using vm = new VirtualMachine(ex);
    first = constantOf(ex);
    await vm.invoke("main");
  }
  assert(first.disposed);
  const ex = Executable.load(bytes);
  const c = constantOf(ex);
  const vm = new VirtualMachine(ex);
  vm.dispose();
  assert(!c.disposed);
  ex.dispose();
  ex.dispose(); // harmless
  vm.dispose();
  assert(c.disposed);
});

Deno.test("dispose: a loop that loads, runs and disposes holds nothing between iterations", async () => {
  const bytes = programBytes();
  const constants: NDArray[] = [];
  for (let i = 0; i < 50; i++) {
    using ex = Executable.load(bytes);
    constants.push(constantOf(ex));
    for (
      const form of [{ execution: "specialized" as const }, { execution: "generic" as const }, {
        execution: "compiled" as const,
      }]
    ) {
      using vm = new VirtualMachine(ex, cpu(), form);
      using x = tensor([1, 2, 3]);
      using y = await vm.invoke("twice", x) as NDArray;
      assertEquals([...y.dataSync()], [2, 4, 6]);
    }
    // Only this iteration's constant is alive.
    assertEquals(constants.filter((c) => !c.disposed).length, 1);
  }
  assert(constants.every((c) => c.disposed));
});

Deno.test("dispose: a disposed VM refuses calls with a VMError; results handed out stay valid", async () => {
  using ex = Executable.load(programBytes());
  const vm = new VirtualMachine(ex);
  using x = tensor([1, 2]);
  using y = await vm.invoke("twice", x) as NDArray;
  using c = await vm.invoke("constant") as NDArray;
  vm.save_function("twice", "saved", x);
  vm.set_input("twice", x);
  vm.dispose();
  assert(vm.disposed);
  assertEquals([...y.dataSync()], [2, 4]);
  assertEquals(c.shape, [1024]);
  await assertRejects(() => vm.invoke("twice", x), VMError, "@twice: the VM was disposed");
  await assertRejects(() => vm.get("twice")(x), VMError, "disposed");
  await assertRejects(() => vm.invoke("saved"), VMError, "disposed");
  await assertRejects(() => vm.with({ fuel: 10 }).invoke("twice", x), VMError, "disposed");
  await assertRejects(() => vm.invoke_stateful("twice"), VMError, "disposed");
  await assertRejects(() => vm.time_evaluator("twice")(x), VMError, "disposed");
  assertThrows(() => vm.set_input("twice", x), VMError, "set_input: the VM was disposed");
  assertThrows(() => vm.save_function("twice", "s", x), VMError, "disposed");
  // The saved and stored arguments were released: only the caller's reference is left.
  assertEquals(x.refCount, 1);
});

Deno.test("dispose: a call still running finishes, and the VM frees when it settles", async () => {
  let resolve!: (v: number) => void;
  const ib = new ExecBuilder();
  ib.function("wait", { num_inputs: 1 }, () => {
    ib.emit_call("test.dispose.later", [], { dst: ib.r(1) });
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  const { registerFunc } = await import("../mod.ts");
  registerFunc("test.dispose.later", () => new Promise<number>((r) => (resolve = r)), {
    override: true,
  });
  using ex = ib.get();
  const vm = new VirtualMachine(ex);
  using x = tensor([3]);
  const pending = vm.invoke("wait", x);
  vm.dispose();
  await assertRejects(() => vm.invoke("wait", x), VMError, "disposed");
  resolve(1);
  using y = await pending as NDArray;
  assertEquals([...y.dataSync()], [6]);
  y.dispose();
  x.dispose();
  assert(x.disposed && y.disposed);
  assertEquals(vm.memory_stats().liveBytes, 0);
});

Deno.test("dispose: a disposed executable cannot start a VM, be saved or printed as TypeScript", () => {
  const ex = Executable.load(programBytes());
  ex.dispose();
  assert(ex.disposed);
  assertThrows(() => new VirtualMachine(ex), VMError, "disposed executable");
  assertThrows(() => ex.save(), ReferenceError, "disposed");
  assertThrows(() => ex.as_typescript(), ReferenceError, "disposed");
  assert(ex.as_text().includes("@main")); // the code is still there to read
});

Deno.test("dispose: an executable from the builder holds the tensors it was given until it is disposed", async () => {
  const weights = tensor([1, 2, 3]);
  const ib = new ExecBuilder();
  ib.function("w", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.copy", [weights], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  const held = weights.refCount; // the maker's and the builder's constant pool's
  const ex = ib.get();
  assertEquals(weights.refCount, held + 1);
  weights.dispose(); // the maker lets go; the executable still uses it
  {
    using vm = new VirtualMachine(ex);
    using w = await vm.invoke("w") as NDArray;
    assertEquals([...w.dataSync()], [1, 2, 3]);
  }
  assertEquals(weights.refCount, held);
  ex.dispose();
  assertEquals(weights.refCount, held - 1);
  assert(!weights.disposed); // the builder can still make executables from it
});

Deno.test("dispose: a VM on a pooled allocator gives its pooled blocks back", async () => {
  using ex = Executable.load(programBytes());
  const vm = new VirtualMachine(ex);
  {
    using x = tensor(new Float32Array(256));
    using _ = await vm.invoke("twice", x) as NDArray;
  }
  // The result went back to the pool when it was disposed: the VM still counts the block.
  const pooled = vm.memory_stats().liveBlocks;
  assert(pooled > 0);
  vm.dispose();
  assertEquals(vm.memory_stats().liveBlocks, 0);
});
