/**
 * Untrusted executables: each finding of the security review, reproduced
 * with a crafted program, and what relaxvm does about it now. Programs are
 * crafted as program data and written with the serializer, which (unlike
 * the builder) writes whatever it is given.
 */

import {
  assert,
  assertEquals,
  assertRejects,
  assertStringIncludes,
  assertThrows,
} from "@std/assert";
import {
  CheckError,
  cpu,
  dtype,
  ExecBuilder,
  Executable,
  type FunctionInfo,
  getGlobalFunc,
  LoadError,
  type NDArray,
  type ProgramData,
  registerFunc,
  shape,
  tensor,
  VirtualMachine,
  VMError,
} from "../mod.ts";
import { activateAllocators, defaultAllocator } from "../devices/allocation_context.ts";
import { MemoryScope } from "../devices/memory_scope.ts";
import { saveProgram } from "../program/serialize.ts";

/** The data of a small valid program: `main(x) = copy(x)`, calling one packed function. */
function validProgram(): ProgramData {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const ex = ib.get();
  return {
    functions: ex.functions,
    constants: ex.constants,
    instrOffset: ex.instrOffset,
    instrData: ex.instrData,
    liveness: ex.liveness,
  };
}

/** `validProgram()` with function-table entry `name` changed by `change`. */
function withFunction(name: string, change: Partial<FunctionInfo>): ProgramData {
  const p = validProgram();
  return {
    ...p,
    functions: p.functions.map((f) => (f.name === name ? { ...f, ...change } : f)),
  };
}

Deno.test("security: a function declaring 2^24 registers it never uses is rejected at load", () => {
  // Finding 1: the VM allocated a slot per declared register per call, so 152 bytes could
  // ask for gigabytes. The register file must be what the code names.
  const bytes = saveProgram(withFunction("main", { registerFileSize: 1 << 24 }));
  assert(bytes.length < 400, `${bytes.length} bytes`);
  const e = assertThrows(() => Executable.load(bytes), LoadError, "declares 16777216 registers");
  assertStringIncludes(e.message, "use 2");
});

Deno.test("security: every unused field of a packed-function entry must be 0", () => {
  // Finding 3: a packed entry's start/end range was never checked, and the VM constructor
  // looped over it (102 s for a 184-byte file).
  const cases: [Partial<FunctionInfo>, string][] = [
    [{ start: 0, end: 2 ** 31 }, "is a packed function but has end 2147483648 (must be 0)"],
    [{ start: 5, end: 5 }, "has start 5"],
    [{ numArgs: 3 }, "has numArgs 3"],
    [{ registerFileSize: 9 }, "has registerFileSize 9"],
    [{ paramNames: ["x"] }, "is a packed function but has parameter names"],
  ];
  for (const [change, message] of cases) {
    const t0 = performance.now();
    const bytes = saveProgram(withFunction("vm.builtin.copy", change));
    assertThrows(() => Executable.load(bytes), LoadError, message);
    assert(performance.now() - t0 < 1000, "rejected without looping over the range");
  }
});

Deno.test("security: a VM function's parameter names match its inputs", () => {
  const bytes = saveProgram(withFunction("main", { paramNames: ["a", "b", "c"] }));
  assertThrows(() => Executable.load(bytes), LoadError, "3 parameter names for 1 inputs");
});

Deno.test("security: the Executable constructor verifies and copies what it is given", () => {
  // Finding 10: an Executable built from data with a string jump offset ran that string
  // inside the VM's generated JavaScript.
  const g = globalThis as { pwned?: number };
  delete g.pwned;
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_goto(1);
    ib.emit_ret(ib.r(0));
  });
  const ex = ib.get();
  const words = [...ex.instrData] as unknown[];
  words[1] = "1; globalThis.pwned = 1; //"; // the goto's offset
  const hostile = { ...ex, functions: ex.functions, instrData: words as unknown as Float64Array };
  const e = assertThrows(() => new Executable(hostile), CheckError);
  assertStringIncludes(e.message, "is not an integer");
  assertEquals(g.pwned, undefined);

  // Valid data is accepted, and the executable keeps its own copy of the code.
  const data = new Float64Array(ex.instrData);
  const copy = new Executable({ ...ex, instrData: data });
  data[1] = 40; // a jump out of the function, after verification
  assertEquals(copy.instrData[1], 1);
  assertEquals(copy.as_text(), ex.as_text());
});

Deno.test("security: hand-made function tables are verified too", async () => {
  const p = validProgram();
  const twice = { ...p, functions: [...p.functions, p.functions[0]] };
  assertThrows(() => new Executable(twice), CheckError, "is in the function table twice");
  const weird = { ...p, functions: [{ ...p.functions[0], kind: "native" as "vm" }] };
  assertThrows(() => new Executable(weird), CheckError, 'unknown kind "native"');
  const badConstant = { ...p, constants: [{ evil: true } as unknown as number] };
  assertThrows(() => new Executable(badConstant), CheckError, "constant c[0] is not");
  const vm = new VirtualMachine(new Executable(p));
  assertEquals(await vm.invoke("main", 21), 21);
});

Deno.test("security: a rejected load frees the tensor constants it had already read", () => {
  const host = defaultAllocator(cpu());
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.copy", [tensor(new Float32Array(256))], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  const bytes = ib.get().save();
  const before = host.stats().liveBytes;
  // Cut inside the code section: the constants were read, the code was not.
  assertThrows(() => Executable.load(bytes.subarray(0, bytes.length - 8)), LoadError);
  assertEquals(host.stats().liveBytes, before);
});

Deno.test("security: names print escaped in dumps and errors, never as raw control characters", async () => {
  // Finding 11: a crafted name faked instructions in `as_text` and injected terminal escapes.
  const fake = "evil\n  ret   %0\n@fake:\u001b[2J\u202e";
  const ib = new ExecBuilder();
  ib.function(fake, { num_inputs: 1 }, () => {
    ib.emit_call(fake + "_packed", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const ex = ib.get();
  const text = ex.as_text() + ex.stats();
  // deno-lint-ignore no-control-regex
  assert(!/[\u0000-\u0008\u000b-\u001f\u007f\u202e]/.test(text), JSON.stringify(text));
  assertEquals(text.split("\n").filter((l) => l.startsWith("@")).length, 2, "no fake function");
  assertStringIncludes(text, "@evil\\n  ret   %0\\n@fake:\\x1b[2J\\u202e:");
  // The VM names the unknown packed function (and the function calling it) escaped too.
  const e = await assertRejects(
    () => new VirtualMachine(ex).invoke(fake, 1),
    VMError,
    "Unknown packed function",
  );
  // deno-lint-ignore no-control-regex
  assert(!/[\u0000-\u0008\u000b-\u001f\u007f\u202e]/.test(e.message), JSON.stringify(e.message));
});

Deno.test("finding 6: a VM's allocations stay under its memory limit (maxMemoryBytes)", async () => {
  // One instruction asked for 8 GiB: a shape heap of 2^30 - 1 int64s, rejected before any is touched.
  const ib = new ExecBuilder();
  ib.function("heap", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.alloc_shape_heap", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("add", { num_inputs: 2 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  const ex = ib.get();
  const vm = new VirtualMachine(ex);
  const t0 = performance.now();
  const e = await assertRejects(() => vm.invoke("heap", 2 ** 30 - 1), VMError);
  assertStringIncludes(e.message, "8589934584 bytes");
  assertStringIncludes(e.message, "memory limit of 1073741824 bytes (maxMemoryBytes)");
  assertEquals(e.packedFunc, "vm.builtin.alloc_shape_heap");
  assert(performance.now() - t0 < 1000, "rejected before touching memory");
  // A broadcast add of 160 KiB of inputs would make 1.5 GiB.
  using col = tensor(new Float32Array(24576), { shape: [24576, 1] });
  using row = tensor(new Float32Array(16384), { shape: [1, 16384] });
  await assertRejects(() => vm.invoke("add", col, row), VMError, "memory limit");
  assertEquals(vm.memory_stats().liveBytes, 0);
  // A small limit counts every block the VM holds, pooled ones too, and trims the pool first.
  const small = new VirtualMachine(ex, cpu(), { maxMemoryBytes: 64 * 1024 });
  for (const n of [1000, 2000, 3000, 4000, 5000, 6000, 7000]) {
    const out = await small.invoke("heap", n) as { dispose(): void };
    out.dispose();
  }
  await assertRejects(() => small.invoke("heap", 9000), VMError, "65536");
  assertEquals(small.memory_stats().liveBytes, 0);
  assertThrows(
    () => new VirtualMachine(ex, cpu(), { maxMemoryBytes: -1 }),
    RangeError,
    "maxMemoryBytes",
  );
});

Deno.test("finding 7: a disposed argument is a VMError and leaks none of the others", async () => {
  const host = defaultAllocator(cpu());
  const ib = new ExecBuilder();
  ib.function("two", { num_inputs: 2 }, () => ib.emit_ret(ib.r(0)));
  const vm = new VirtualMachine(ib.get());
  const before = host.stats().liveBytes;
  const good = tensor([1, 2, 3, 4]);
  const dead = tensor([5, 6]);
  dead.dispose();
  const e = await assertRejects(() => vm.invoke("two", good, dead), VMError, "Argument 1");
  assertStringIncludes(e.message, "disposed");
  assertThrows(() => vm.save_function("two", "saved", good, dead), VMError, "Argument 1");
  assertThrows(() => vm.set_input("two", good, dead), VMError, "Argument 1");
  good.dispose();
  assert(good.disposed, "nothing kept a reference to the good argument");
  // At most: the garbage collector may free tensors other tests dropped meanwhile.
  assert(host.stats().liveBytes <= before, `${host.stats().liveBytes - before} bytes left`);
});

Deno.test("finding 8: a program cannot kill its executable's constants", async () => {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.kill", [tensor([1, 2, 3])], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  ib.function("read", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.copy", [ib.c(0)], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  const ex = ib.get();
  const vm = new VirtualMachine(ex);
  const e = await assertRejects(() => vm.invoke("main"), VMError, "constant");
  assertEquals(e.packedFunc, "vm.builtin.kill");
  // The executable is intact: other VMs, save and as_typescript still work.
  const other = new VirtualMachine(ex);
  using t = await other.invoke("read") as NDArray;
  assertEquals([...t.dataSync()], [1, 2, 3]);
  assertEquals(Executable.load(ex.save()).as_text(), ex.as_text());
  assertStringIncludes(ex.as_typescript(), "tensor(");
  using again = await vm.invoke("read") as NDArray;
  assertEquals([...again.dataSync()], [1, 2, 3], "the VM that tried still has it");
});

Deno.test("finding 9: reshape and alloc_tensor reject malformed shapes and dtypes", async () => {
  const ib = new ExecBuilder();
  ib.function("reshape", { num_inputs: 2 }, () => {
    ib.emit_call("vm.builtin.reshape", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  ib.function("alloc", { num_inputs: 2 }, () => {
    ib.emit_call(
      "vm.builtin.alloc_storage",
      [ib.vm_state(), shape(64), ib.imm(0), dtype("uint8")],
      {
        dst: ib.r(2),
      },
    );
    ib.emit_call("vm.builtin.alloc_tensor", [ib.r(2), ib.imm(0), ib.r(0), ib.r(1)], {
      dst: ib.r(3),
    });
    ib.emit_ret(ib.r(3));
  });
  const vm = new VirtualMachine(ib.get());
  using t = tensor([1, 2, 3, 4, 5, 6, 7, 8]);
  for (const bad of [[-1, -8], [0.5, 16], [-8], ["x"], [NaN], [2 ** 53, 0], [Infinity, 0]]) {
    await assertRejects(() => vm.invoke("reshape", t, bad), VMError, "reshape:");
    await assertRejects(() => vm.invoke("alloc", bad, "float32"), VMError, "alloc_tensor:");
  }
  for (const bad of ["float31", "", 7, null]) {
    await assertRejects(() => vm.invoke("alloc", [2], bad), VMError, "alloc_tensor:");
  }
  using ok = await vm.invoke("reshape", t, [2, 4]) as { shape: readonly number[] } & Disposable;
  assertEquals(ok.shape, [2, 4]);
  assertEquals(vm.memory_stats().liveBytes, 0);
});

Deno.test("finding 11: odd thrown values become VMErrors; wrapping calls no user code unguarded", async () => {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  const throwingMessage = new Error("x");
  Object.defineProperty(throwingMessage, "message", {
    get() {
      throw new Error("message getter");
    },
  });
  const throwingToString = {
    toString() {
      throw new Error("toString");
    },
  };
  const hostileProto = new Proxy({}, {
    getPrototypeOf() {
      throw new Error("getPrototypeOf trap");
    },
  });
  const thrown: unknown[] = [
    proxy,
    throwingMessage,
    throwingToString,
    hostileProto,
    Symbol("s"),
    undefined,
    null,
    Object.create(null),
  ];
  let which = 0;
  registerFunc("test.security.throw_odd", () => {
    throw thrown[which];
  }, { override: true });
  registerFunc("test.security.reject_odd", () => Promise.reject(thrown[which]), { override: true });
  registerFunc("test.security.return_revoked", () => proxy, { override: true });
  const ib = new ExecBuilder();
  for (const name of ["throw_odd", "reject_odd", "return_revoked"]) {
    ib.function(name, { num_inputs: 0 }, () => {
      ib.emit_call(`test.security.${name}`, [], { dst: ib.r(0) });
      ib.emit_ret(ib.r(0));
    });
  }
  const ex = ib.get();
  for (
    const options of [{ execution: "specialized" }, { execution: "generic" }, {
      execution: "compiled",
    }] as const
  ) {
    const vm = new VirtualMachine(ex, cpu(), options);
    for (which = 0; which < thrown.length; which++) {
      await assertRejects(() => vm.invoke("throw_odd"), VMError);
      await assertRejects(() => vm.invoke("reject_odd"), VMError);
    }
    await assertRejects(() => vm.invoke("return_revoked"), VMError);
    // A revoked Proxy passed in is a VMError too.
    await assertRejects(() => vm.invoke("throw_odd", proxy), VMError);
  }
});

Deno.test("finding 11: a thenable result is awaited like a Promise", async () => {
  registerFunc("test.security.thenable", (x: number) => ({
    then(resolve: (v: unknown) => void) {
      setTimeout(() => resolve(x * 2), 1);
    },
  }), { override: true });
  registerFunc("test.security.bad_then", () => ({
    get then() {
      throw new Error("then getter");
    },
  }), { override: true });
  registerFunc("test.security.then_throws", () => ({
    then() {
      throw new Error("then throws");
    },
  }), { override: true });
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("test.security.thenable", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("test.security.thenable", [ib.r(1)]); // discarded
    ib.emit_ret(ib.r(1));
  });
  for (const name of ["bad_then", "then_throws"]) {
    ib.function(name, { num_inputs: 0 }, () => {
      ib.emit_call(`test.security.${name}`, [], { dst: ib.r(0) });
      ib.emit_ret(ib.r(0));
    });
  }
  const ex = ib.get();
  for (
    const options of [{ execution: "specialized" }, { execution: "generic" }, {
      execution: "compiled",
    }] as const
  ) {
    const vm = new VirtualMachine(ex, cpu(), options);
    assertEquals(await vm.invoke("main", 21), 42);
    await assertRejects(() => vm.invoke("bad_then"), VMError, "then getter");
    await assertRejects(() => vm.invoke("then_throws"), VMError, "then throws");
  }
});

Deno.test("bombs: a chain of a million nested tuples frees without exhausting the stack", async () => {
  registerFunc("test.security.lt", (a: number, b: number) => a < b, { override: true });
  registerFunc("test.security.inc", (a: number) => a + 1, { override: true });
  const ib = new ExecBuilder();
  // nest(n, leaf, keep): wraps `leaf` in n tuples; returns the chain when keep, else drops it.
  ib.function("nest", { num_inputs: 3 }, () => {
    ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(3) }); // 0: i = 0
    ib.emit_call("test.security.lt", [ib.r(3), ib.r(0)], { dst: ib.r(4) }); // 1
    ib.emit_if(ib.r(4), 4); // 2
    ib.emit_call("vm.builtin.make_tuple", [ib.r(1)], { dst: ib.r(1) }); // 3
    ib.emit_call("test.security.inc", [ib.r(3)], { dst: ib.r(3) }); // 4
    ib.emit_goto(-4); // 5
    ib.emit_if(ib.r(2), 2); // 6
    ib.emit_ret(ib.r(1)); // 7
    ib.emit_ret(ib.r(3)); // 8
  });
  const vm = new VirtualMachine(ib.get());
  using leaf = tensor([1, 2, 3]);
  const host = defaultAllocator(cpu()).stats().liveBytes;
  assertEquals(await vm.invoke("nest", 1_000_000, leaf, 0), 1_000_000);
  // Handing out is recursive: a result nested too deeply is refused, and released.
  const e = await assertRejects(() => vm.invoke("nest", 5000, leaf, 1), VMError, "nested more");
  assertStringIncludes(e.message, "1000");
  const ok = await vm.invoke("nest", 3, leaf, 1) as unknown[][][];
  assertEquals(ok[0][0][0], leaf, "the user's own tensor, handed back");
  assert(defaultAllocator(cpu()).stats().liveBytes <= host, "nothing left outside the VM");
  assert(!leaf.disposed);
  assertEquals(vm.memory_stats().liveBytes, 0);
});

Deno.test("builtins: failures found by the builtin fuzz family are named and leak nothing", () => {
  const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args);
  const host = defaultAllocator(cpu());
  const before = host.stats().liveBytes;
  // A tuple or closure over a freed value used to hold the values before it forever.
  const good = tensor([1, 2, 3, 4]);
  const dead = tensor([5]);
  dead.dispose();
  assertThrows(() => call("vm.builtin.make_tuple", good, dead), ReferenceError, "make_tuple:");
  assertThrows(
    () => call("vm.builtin.make_closure", () => 0, good, dead),
    ReferenceError,
    "make_closure:",
  );
  good.dispose();
  assert(good.disposed, "nothing else holds the good value");
  // At most: the garbage collector may free tensors other tests dropped meanwhile.
  assert(host.stats().liveBytes <= before, `${host.stats().liveBytes - before} bytes left`);
  // A KV cache without rows allocated its tensor, then failed, unnamed.
  const scope = new MemoryScope([cpu()], "pooled", 1 << 20);
  using init = tensor([1, 2]);
  const previous = activateAllocators(scope);
  try {
    assertThrows(
      () => call("vm.builtin.attention_kv_cache_create", init, shape(), 0),
      RangeError,
      "attention_kv_cache_create: reserve_shape needs at least one dimension",
    );
  } finally {
    activateAllocators(previous);
  }
  assertEquals(scope.allocators().reduce((n, a) => n + a.stats().liveBytes, 0), 0);
  // A dtype that does not parse is the check's own error.
  assertThrows(
    () => call("vm.builtin.check_prim_value_info", 1, "float31", ""),
    TypeError,
    "check_prim_value_info:",
  );
});

Deno.test("finding 8: builtins that write in place refuse the executable's constants", async () => {
  const heap = tensor([0n, 0n], { dtype: "int64" });
  const logits = tensor([1, 2, 3, 4]);
  const ib = new ExecBuilder();
  ib.function("store", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.store_shape", [shape(7, 8), heap, ib.imm(0), ib.imm(1)], {
      dst: ib.r(0),
    });
    ib.emit_ret(ib.r(0));
  });
  ib.function("softmax", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.apply_softmax_with_temperature", [logits, ib.convert_constant(1)], {
      dst: ib.r(0),
    });
    ib.emit_ret(ib.r(0));
  });
  const ex = ib.get();
  heap.dispose();
  logits.dispose();
  const vm = new VirtualMachine(ex);
  await assertRejects(
    () => vm.invoke("store"),
    VMError,
    "store_shape: the shape heap is read-only",
  );
  await assertRejects(() => vm.invoke("softmax"), VMError, "logits is read-only");
  const [c0, c1] = ex.constants.filter((c) =>
    typeof c === "object" && "dataSync" in c
  ) as NDArray[];
  assertEquals([...c0.dataSync()], [0n, 0n], "the heap constant is unchanged");
  assertEquals([...c1.dataSync()], [1, 2, 3, 4], "the logits constant is unchanged");
});

Deno.test("bombs: inputs and high register numbers cost a file nothing, so they cannot cost the VM", async () => {
  // Found by the bombs fuzz family: 2^24 declared inputs took seconds to load and to construct.
  const inputs = saveProgram(withFunction("main", { numArgs: 1 << 24, registerFileSize: 1 << 24 }));
  let t0 = performance.now();
  assertThrows(() => Executable.load(inputs), LoadError, "takes 16777216 inputs, more than 65536");
  assert(performance.now() - t0 < 500, `${performance.now() - t0} ms`);
  // One instruction naming register 2^24 - 1 asked for a register file of 2^24 slots: every
  // call copied it, and construction scanned it per block. The VM renumbers such a program.
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 1 }, () => {
    for (let i = 0; i < 200; i++) ib.emit_if(ib.r(0), 1);
    ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const p = validProgram();
  const built = ib.get();
  const code = Float64Array.from(built.instrData);
  code[code.length - 6] = (1 << 24) - 1; // the copy's destination
  code[code.length - 1] = (1 << 24) - 1; // the register returned
  const high = saveProgram({
    ...p,
    functions: built.functions.map((f) =>
      f.kind === "vm" ? { ...f, registerFileSize: 1 << 24 } : f
    ),
    instrOffset: built.instrOffset,
    instrData: code,
  });
  assert(high.length < 6000, `${high.length} bytes`);
  const ex = Executable.load(high);
  assertStringIncludes(ex.as_text(), "dst: %16777215");
  t0 = performance.now();
  const vm = new VirtualMachine(ex);
  assertEquals(await vm.invoke("main", 5), 5);
  assert(performance.now() - t0 < 300, `${performance.now() - t0} ms to construct and call`);
});
