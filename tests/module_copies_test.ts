/**
 * Two copies of the library in one process — `mod.ts` imported through two
 * specifiers, as when a `--preload` module or a dependency imports relaxvm
 * differently from the program — share one registry, one allocation
 * context and one set of CPU devices, and accept each other's values.
 */

import {
  assert,
  assertEquals,
  assertInstanceOf,
  assertNotStrictEquals,
  assertRejects,
  assertStrictEquals,
} from "@std/assert";
import * as one from "../mod.ts";

type Relaxvm = typeof one;

/**
 * A second copy: the repository seen through a symbolic link, so that every
 * module has another URL (a query string would copy mod.ts alone, not the
 * modules it imports). This is what a program gets when it imports relaxvm
 * from a checkout and a dependency imports it from elsewhere.
 */
const linkDir = Deno.makeTempDirSync({ prefix: "relaxvm_copy_" });
Deno.symlinkSync(new URL("../", import.meta.url).pathname, `${linkDir}/relaxvm`);
globalThis.addEventListener("unload", () => Deno.removeSync(linkDir, { recursive: true }));
const secondCopy = (path: string) => new URL(`file://${linkDir}/relaxvm/${path}`).href;
const two: Relaxvm = await import(secondCopy("mod.ts"));

const decoder = new TextDecoder();

Deno.test("two copies: they are really two copies of every class", () => {
  assertNotStrictEquals(one.NDArray, two.NDArray);
  assertNotStrictEquals(one.ExecBuilder, two.ExecBuilder);
  assertNotStrictEquals(one.registerFunc, two.registerFunc);
});

Deno.test("two copies: a packed function registered through one is found by the other", async () => {
  const twice = (x: number) => 2 * x;
  one.registerFunc("test.copies.twice", twice, { override: true });
  assertStrictEquals(two.getGlobalFunc("test.copies.twice"), twice);
  assert(two.listGlobalFuncNames().includes("test.copies.twice"));
  assertEquals(one.listGlobalFuncNames(), two.listGlobalFuncNames());
  // A program built with copy two calls it from copy two's VM.
  const ib = new two.ExecBuilder();
  ib.function("main", 1, () => {
    ib.emit_call("test.copies.twice", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const ex = ib.get();
  assertEquals(ex.warnings, [], "registered, as far as copy two's builder can see");
  assertEquals(await new two.VirtualMachine(ex).invoke("main", 21), 42);
});

Deno.test("two copies: values of one are instances of the other's classes", () => {
  using t = one.tensor([1, 2]);
  assertInstanceOf(t, two.NDArray);
  assertInstanceOf(one.shape(2, 3), two.ShapeTuple);
  assertInstanceOf(one.dtype("int32"), two.DataType);
  assertInstanceOf(one.cpu(), two.Device);
  assertStrictEquals(one.cpu(), two.cpu(), "one CPU device per process");
  assert(two.shape(2, 3).equals(one.shape(2, 3)));
  assert(!(({}) instanceof two.NDArray));
  assert(!(one.shape(1) instanceof two.NDArray));
  assert(!(t instanceof two.ShapeTuple));
});

Deno.test("two copies: copy one's program and tensors run in copy two's VM, memory counted there", async () => {
  const ib = new one.ExecBuilder();
  ib.function("main", 2, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("vm.op.multiply", [ib.r(2), one.tensor([10, 10])], { dst: ib.r(3) });
    ib.emit_call("vm.builtin.shape_of", [ib.r(3)], { dst: ib.r(4) });
    ib.emit_call("vm.builtin.make_tuple", [ib.r(3), ib.r(4), one.dtype("float32")], {
      dst: ib.r(5),
    });
    ib.emit_ret(ib.r(5));
  });
  const vm = new two.VirtualMachine(ib.get(), one.cpu());
  using a = one.tensor([1, 2]);
  using b = two.tensor([3, 4]);
  const [sum, shape, dt] = await vm.invoke("main", a, b) as [
    one.NDArray,
    one.ShapeTuple,
    one.DataType,
  ];
  assertInstanceOf(sum, one.NDArray);
  assertEquals([...sum.dataSync()], [40, 60]);
  assertEquals(String(shape), "(2,)");
  assertEquals(String(dt), "float32");
  assert(vm.memory_stats().liveBytes > 0, "the result came from copy two's VM allocator");
  sum.dispose();
  assertEquals(vm.memory_stats().liveBytes, 0);
});

Deno.test("two copies: errors and closures cross too", async () => {
  const ib = new one.ExecBuilder();
  ib.function("ident", 1, () => ib.emit_ret(ib.r(0)));
  ib.function("make", 1, () => {
    ib.emit_call("vm.builtin.make_closure", [ib.f("ident"), ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("bad", 1, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const vm = new two.VirtualMachine(ib.get());
  using closure = await vm.invoke("make", "captured") as one.Closure;
  assertInstanceOf(closure, one.Closure);
  assertEquals(await vm.invoke_closure(closure), "captured");
  const error = await assertRejects(() => vm.invoke("bad", "not a tensor"));
  assertInstanceOf(error, one.VMError);
  assertInstanceOf(error, two.VMError);
});

Deno.test("two copies: the CLI runs a program whose --preload module imports another copy", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm_copies_" });
  try {
    const ib = new one.ExecBuilder();
    ib.function("main", 1, () => {
      ib.emit_call("test.copies.preloaded", [ib.r(0)], { dst: ib.r(1) });
      ib.emit_ret(ib.r(1));
    });
    await Deno.writeFile(`${dir}/prog.rvm`, ib.get().save());
    const other = secondCopy("mod.ts");
    await Deno.writeTextFile(
      `${dir}/preload.ts`,
      `import { registerFunc } from "${other}";\nregisterFunc("test.copies.preloaded", (x: number) => x + 1);\n`,
    );
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-read",
        new URL("../cli/main.ts", import.meta.url).pathname,
        "run",
        `${dir}/prog.rvm`,
        "main",
        "41",
        "--preload",
        `${dir}/preload.ts`,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assertEquals(code, 0, decoder.decode(stderr));
    assertEquals(decoder.decode(stdout).trim(), "42");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("two copies: one WebGPU device per process, and GPU tensors cross too", async () => {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-read",
      new URL("./fixtures/two_copies_gpu.ts", import.meta.url).pathname,
      secondCopy("mod.ts"),
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(code, 0, decoder.decode(stderr));
  const out = decoder.decode(stdout).trim();
  if (out === "no adapter" && Deno.env.get("RELAXVM_REQUIRE_WEBGPU") !== "1") return;
  assertEquals(out, "ok");
});
