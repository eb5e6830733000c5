/**
 * Reading and printing tensors of any size the limits allow (issue 27,
 * finding 3): `data()`, `console.log`/`deno repl`, `relaxvm run`,
 * `debug_print` and a cast of a 2^27-element bfloat16 or bool tensor
 * finish with the values or a summary, never a V8 abort ("invalid array
 * length"), and printing reads only the elements it shows.
 */

import { assert, assertEquals, assertStringIncludes, assertThrows } from "@std/assert";
import { ExecBuilder, NDArray, type TensorDType, VirtualMachine } from "../mod.ts";
import { MAX_WIDENED_ELEMENTS } from "../ground/dtype.ts";
import { formatNested } from "../ground/inspect.ts";

const N = 2 ** 27;
/** What the cli fuzz family counts as a bug: more output than this. */
const MAX_OUTPUT = 256 * 1024;

const show = (v: unknown) => Deno.inspect(v, { colors: false });

/**
 * Declares `name()` on `ib`, returning a new tensor of `shape` and `dtype` (zeros) from its
 * own storage: a program of a few hundred bytes.
 */
function addTensorOf(ib: ExecBuilder, name: string, shape: number[], dtype: TensorDType): void {
  ib.function(name, { num_inputs: 0 }, () => {
    const size = shape.reduce((a, b) => a * b, 1);
    ib.emit_call("vm.builtin.alloc_storage", [ib.vm_state(), [size], ib.imm(0), dtype], {
      dst: ib.r(0),
    });
    ib.emit_call("vm.builtin.alloc_tensor", [ib.r(0), ib.imm(0), shape, dtype], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
}

function hugeProgram() {
  const ib = new ExecBuilder();
  addTensorOf(ib, "bf16", [N], "bfloat16");
  addTensorOf(ib, "bools", [N], "bool");
  addTensorOf(ib, "cube", Array(27).fill(2), "bool");
  ib.function("cast", { num_inputs: 0 }, () => {
    ib.emit_call("bf16", [], { dst: ib.r(0) });
    ib.emit_call("vm.op.cast", [ib.r(0), "float32"], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  return ib.get();
}

Deno.test("values: data() of a bfloat16 tensor of 2^27 elements is its float32 values", async () => {
  using exe = hugeProgram();
  using vm = new VirtualMachine(exe);
  using t = await vm.invoke("bf16") as NDArray;
  assertEquals(t.nbytes, 256 * 2 ** 20); // under the default 1 GiB limit
  const bits = t.cpuView() as Uint16Array;
  bits[0] = 0x3fc0; // 1.5
  bits[N - 1] = 0xc040; // -3
  const values = await t.data();
  assert(values instanceof Float32Array);
  assertEquals(values.length, N);
  assertEquals([values[0], values[1], values[N - 1]], [1.5, 0, -3]);
  assertEquals(t.dataSync()[N - 1], -3);
});

Deno.test("values: a widening copy beyond MAX_WIDENED_ELEMENTS is a RangeError naming the size", () => {
  // Allocated, never written: the pages stay untouched, and the check comes before any copy.
  using t = NDArray.empty([MAX_WIDENED_ELEMENTS + 1], "bfloat16");
  const e = assertThrows(() => t.dataSync(), RangeError);
  assertStringIncludes(e.message, `${MAX_WIDENED_ELEMENTS + 1} elements`);
  assertStringIncludes(e.message, `${MAX_WIDENED_ELEMENTS} elements (4.0 GiB)`);
  assertStringIncludes(e.message, "cpuView()");
});

Deno.test("values: a cast of 2^27 bfloat16 elements runs", async () => {
  using exe = hugeProgram();
  using vm = new VirtualMachine(exe); // 768 MiB of the default 1 GiB
  using t = await vm.invoke("cast") as NDArray;
  assertEquals([t.dtype, t.size], ["float32", N]);
});

Deno.test("values: printing a tensor of 2^27 reads only what it shows", async () => {
  using exe = hugeProgram();
  using vm = new VirtualMachine(exe);
  for (const name of ["bf16", "bools"]) {
    using t = await vm.invoke(name) as NDArray;
    const t0 = performance.now();
    const text = show(t);
    const ms = performance.now() - t0;
    // Before: an abort for bfloat16; 7.7 s and 2.7 GB for bool (a JS array of every element).
    assert(ms < 1000, `${name}: ${ms.toFixed(0)} ms`);
    assertStringIncludes(text, `[${N}], cpu(0)) [`);
    assertStringIncludes(text, ", ..., ");
    assert(text.length < 200, text);
  }
  using cube = await vm.invoke("cube") as NDArray;
  // Every axis is 2 long, so none elides as NumPy would: the outer ones are cut instead.
  const text = show(cube);
  assert(text.length < MAX_OUTPUT, `${text.length} characters`);
  assertStringIncludes(text, "...");
});

Deno.test("values: formatNested shows at most maxShown elements, and reads only those", () => {
  let reads = 0;
  const at = (i: number) => (reads++, i % 7);
  const text = formatNested(at, Array(27).fill(2), { width: Infinity });
  assert(reads <= 2000, `${reads} reads`);
  assert(text.length < 40_000, `${text.length} characters`);
  reads = 0;
  assertEquals(formatNested(at, [N]), "[0, 1, 2, ..., 5, 6, 0]"); // 2^27 % 7 is 1
  assertEquals(reads, 6);
  // Beyond rank 32: the flattened ends.
  assertEquals(
    formatNested((i) => i, Array(40).fill(2)),
    "[0, 1, 2, ..., 1099511627773, 1099511627774, 1099511627775] (flattened)",
  );
});

Deno.test("values: debug_print of 2^27 elements prints their ends", async () => {
  const ib = new ExecBuilder();
  addTensorOf(ib, "bools", [N], "bool");
  ib.function("main", { num_inputs: 0 }, () => {
    ib.emit_call("bools", [], { dst: ib.r(0) });
    ib.emit_call("vm.builtin.debug_print", ["here", ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  using exe = ib.get();
  using vm = new VirtualMachine(exe);
  const printed: string[] = [];
  const log = console.log;
  console.log = (...args: unknown[]) => printed.push(args.join(" "));
  try {
    await vm.invoke("main");
  } finally {
    console.log = log;
  }
  assertEquals(printed, [
    `here: shape = (${N}), dtype = bool, data =\n[0, 0, 0, ..., 0, 0, 0]`,
  ]);
});

Deno.test("values: relaxvm run prints a 2^27-element bfloat16 result summarized", async () => {
  using exe = hugeProgram();
  const file = await Deno.makeTempFile({ suffix: ".rvm" });
  try {
    await Deno.writeFile(file, exe.save());
    for (
      const [name, described] of [["bf16", `(bfloat16, shape [${N}])`], [
        "cube",
        "(bool, shape [2, 2",
      ]]
    ) {
      const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
        args: ["run", "--no-prompt", "--allow-read", "cli/main.ts", "run", file, name],
        cwd: new URL("../", import.meta.url),
        stdout: "piped",
        stderr: "piped",
      }).output();
      const out = new TextDecoder().decode(stdout);
      assertEquals(code, 0, new TextDecoder().decode(stderr).slice(0, 2000));
      assert(out.length < MAX_OUTPUT, `${name}: ${out.length} characters`);
      assertStringIncludes(out, described);
      assertStringIncludes(out, "...");
    }
  } finally {
    await Deno.remove(file);
  }
});

Deno.test("values: as_typescript refuses 2^27 constant elements with a RangeError", () => {
  const ib = new ExecBuilder();
  using big = NDArray.empty([N], "uint8");
  ib.function("main", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.copy", [big], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  using exe = ib.get();
  // Before: every element a literal in one JS array, and V8 aborted ("invalid array length").
  assertThrows(() => exe.as_typescript(), RangeError, `hold ${N} elements, more than the 16777216`);
});
