/**
 * What values look like in `console.log` and `deno repl`: short summaries,
 * and tensors nested like NumPy prints them, elided when large.
 */

import { assertEquals, assertStringIncludes } from "@std/assert";
import {
  type AttentionKVCache,
  type Closure,
  cpu,
  dtype,
  ExecBuilder,
  NDArray,
  shape,
  tensor,
  VirtualMachine,
} from "../mod.ts";

const show = (v: unknown) => Deno.inspect(v, { colors: false });

Deno.test("inspect: tensors print their values nested, as NumPy does", () => {
  using m = tensor([[1, 2, 3], [4, 5, 6]]);
  assertEquals(show(m), "NDArray(float32, [2, 3], cpu(0)) [[1, 2, 3], [4, 5, 6]]");
  using s = tensor(2.5);
  assertEquals(show(s), "NDArray(float32, [], cpu(0)) 2.5");
  using i = tensor([1n, -(2n ** 63n)]);
  assertEquals(show(i), "NDArray(int64, [2], cpu(0)) [1, -9223372036854775808]");
  using b = tensor([1, 0, 1], { dtype: "bool" });
  assertEquals(show(b), "NDArray(bool, [3], cpu(0)) [true, false, true]");
  using f = tensor([1 / 3, 1e-7, -0]);
  assertEquals(show(f), "NDArray(float32, [3], cpu(0)) [0.333333, 1e-7, -0]");
  assertEquals(show([m]), `[ ${show(m)} ]`);
});

Deno.test("inspect: large tensors show 3 items at each end of every long axis", () => {
  using v = tensor(Array.from({ length: 2000 }, (_, i) => i), { dtype: "int32" });
  assertEquals(show(v), "NDArray(int32, [2000], cpu(0)) [0, 1, 2, ..., 1997, 1998, 1999]");
  using m = tensor(Array.from({ length: 64 * 64 }, (_, i) => i), {
    shape: [64, 64],
    dtype: "int32",
  });
  assertEquals(
    show(m),
    [
      "NDArray(int32, [64, 64], cpu(0))",
      "[[   0,    1,    2, ...,   61,   62,   63],",
      " [  64,   65,   66, ...,  125,  126,  127],",
      " [ 128,  129,  130, ...,  189,  190,  191],",
      " ...,",
      " [3904, 3905, 3906, ..., 3965, 3966, 3967],",
      " [3968, 3969, 3970, ..., 4029, 4030, 4031],",
      " [4032, 4033, 4034, ..., 4093, 4094, 4095]]",
    ].join("\n"),
  );
  using small3d = tensor(Array.from({ length: 24 }, (_, i) => i * 10), { shape: [2, 3, 4] });
  assertStringIncludes(show(small3d), "[[[  0,  10,  20,  30],\n  [ 40,");
  assertStringIncludes(show(small3d), "]],\n\n [[120,"); // a blank line between 2-D blocks
});

Deno.test("inspect: a released tensor and an empty one say so", () => {
  const t = tensor([1, 2]);
  t.dispose();
  assertEquals(show(t), "NDArray(float32, [2], cpu(0)) <released>");
  using e = NDArray.empty([0, 3], "float32");
  assertEquals(show(e), "NDArray(float32, [0, 3], cpu(0)) []");
});

Deno.test("inspect: builders, scopes, executables, operands, dtypes and shapes are one-line summaries", () => {
  const ib = new ExecBuilder();
  assertEquals(show(ib), "ExecBuilder(no functions; 0 instructions, 0 constants)");
  ib.function("main", { num_inputs: 2, param_names: ["x", "y"] }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("vm.builtin.make_tuple", [ib.r(2), "tag"], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  const scope = ib.function("later", 1);
  assertEquals(show(scope), "FunctionScope(later, open)");
  assertEquals(
    show(ib),
    "ExecBuilder(main(x, y); open: later(1 input); 3 instructions, 1 constant)",
  );
  ib.emit_ret(ib.r(0));
  scope[Symbol.dispose]();
  assertEquals(show(scope), "FunctionScope(later, closed)");
  assertEquals(
    show(ib.get()),
    "Executable(main(x, y), later(1 input); calls vm.op.add, vm.builtin.make_tuple; 1 constant, 4 instructions)",
  );
  assertEquals(
    show([ib.r(2), ib.imm(-1), ib.c(0), ib.f("main"), ib.vm_state()]),
    '[ ib.r(2), ib.imm(-1), ib.c(0), ib.f("main"), ib.vm_state() ]',
  );
  assertEquals(show(dtype("float16")), "DataType(float16)");
  assertEquals(show(shape(2, 3)), "ShapeTuple(2, 3)");
});

Deno.test("inspect: closures show what they captured, KV caches their rows", async () => {
  const ib = new ExecBuilder();
  ib.function("add_captured", 2, () => ib.emit_ret(ib.r(0)));
  ib.function("make", 1, () => {
    ib.emit_call("vm.builtin.make_closure", [ib.f("add_captured"), ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("cache", 2, () => {
    ib.emit_call("vm.builtin.attention_kv_cache_create", [ib.r(0), shape(4, 2), ib.imm(0)], {
      dst: ib.r(2),
    });
    ib.emit_call("vm.builtin.attention_kv_cache_append", [ib.r(2), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  const vm = new VirtualMachine(ib.get());
  const closure = await vm.invoke("make", "x") as Closure;
  assertEquals(show(closure), `Closure(add_captured, capturing [ "x" ])`);
  closure.dispose();
  // A captured 2-D tensor too large for one line: its rows stay aligned, indented under the bracket.
  using big = tensor(Array.from({ length: 1600 }, (_, i) => i), { shape: [40, 40] });
  const withTensor = await vm.invoke("make", big) as Closure;
  assertEquals(
    show(withTensor),
    ["Closure(add_captured, capturing [", ...show(big).split("\n").map((l) => `  ${l}`), "])"]
      .join("\n"),
  );
  withTensor.dispose();
  using init = tensor([0, 0], { shape: [1, 2], dtype: "int32" });
  using row = tensor([7, 8], { shape: [1, 2], dtype: "int32" });
  const cache = await vm.invoke("cache", init, row) as AttentionKVCache;
  assertEquals(show(cache), "AttentionKVCache(int32, 1 of 4 rows of [2], cpu(0))");
  cache.dispose();
  assertEquals(show(cache), "AttentionKVCache(int32) <released>");
});

Deno.test("inspect: a VM shows its devices, how it runs, its functions and live bytes", async () => {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 2, param_names: ["x", "y"] }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  ib.function("typo", 1, () => {
    ib.emit_call("test.inspect.not_registered", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const ex = ib.get();
  const vm = new VirtualMachine(ex);
  assertEquals(
    show(vm),
    "VirtualMachine(cpu(0); compiled mode; main(x, y), typo(1 input); " +
      "unregistered: test.inspect.not_registered; live 0 B)",
  );
  using x = tensor(new Float32Array(300));
  using y = tensor(1);
  using out = await vm.invokeTensor("main", x, y);
  assertStringIncludes(show(vm), "; live 2.0 KiB)"); // the result's 1200 bytes, in a pooled 2 KiB block
  out.dispose();
  assertStringIncludes(show(vm), "; live 0 B)");
  assertEquals(
    show(new VirtualMachine(ex, undefined, { execution: "specialized" })).split("; ").slice(0, 2),
    ["VirtualMachine(cpu(0)", "specialized dispatch"],
  );
  assertStringIncludes(
    show(new VirtualMachine(ex, [cpu(0), cpu(1)], { execution: "generic" })),
    "VirtualMachine(cpu(0), cpu(1); generic dispatch;",
  );
  assertStringIncludes(
    show(new VirtualMachine(ex, [cpu(0), cpu(1)])),
    "; live 0 B on cpu(0), 0 B on cpu(1))",
  );
  const limited = vm.with({ fuel: 1000, timeoutMs: 20, signal: new AbortController().signal });
  assertEquals(
    show(limited),
    `${show(vm)}.with({ fuel: 1000, timeoutMs: 20, signal })`,
  );
  assertEquals(Object.keys(limited), ["invoke", "invokeTensor", "get", "invoke_closure"]);
  // Many functions: the first five, then a count.
  const many = new ExecBuilder();
  for (let i = 0; i < 8; i++) many.function(`f${i}`, 1, () => many.emit_ret(many.r(0)));
  assertStringIncludes(
    show(new VirtualMachine(many.get())),
    "; f0(1 input), f1(1 input), f2(1 input), f3(1 input), f4(1 input), … 3 more; ",
  );
});

Deno.test("inspect: other VM objects (a storage) print their summary, and <released> once freed", async () => {
  const ib = new ExecBuilder();
  ib.function("storage", 0, () => {
    ib.emit_call("vm.builtin.alloc_storage", [ib.vm_state(), [8], ib.imm(0), "float32", "global"], {
      dst: ib.r(0),
    });
    ib.emit_ret(ib.r(0));
  });
  const storage = await new VirtualMachine(ib.get()).invoke<{ dispose(): void }>("storage");
  assertEquals(show(storage), "Storage(32 bytes, cpu(0))");
  storage.dispose();
  assertEquals(show(storage), "Storage(32 bytes, cpu(0)) <released>");
});
