import { assert, assertEquals, assertStringIncludes } from "@std/assert";
import { dtype, ExecBuilder, Executable, tensor } from "../mod.ts";
import { InstructionCursor } from "../program/decoder.ts";
import { saveProgram } from "../program/serialize.ts";
import { designDocProgram, everythingProgram, shapeHeapProgram } from "./_programs.ts";
import { randomProgram } from "./_random_programs.ts";

const modUrl = new URL("../mod.ts", import.meta.url).href;

/** Writes each executable's `as_typescript()` to a module, imports them all, returns their `ex`. */
async function rebuildAll(exs: readonly Executable[]): Promise<Executable[]> {
  const dir = await Deno.makeTempDir();
  try {
    const out: Executable[] = [];
    for (const [i, ex] of exs.entries()) {
      const file = `${dir}/rebuilt_${i}.ts`;
      await Deno.writeTextFile(file, ex.as_typescript({ importFrom: modUrl }));
      out.push((await import(`file://${file}`)).ex as Executable);
    }
    return out;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function rebuild(ex: Executable): Promise<Executable> {
  return (await rebuildAll([ex]))[0];
}

/** Asserts that every executable's TypeScript dump rebuilds its exact bytes. */
async function assertRoundTrips(exs: readonly Executable[], what: (i: number) => string) {
  const back = await rebuildAll(exs);
  exs.forEach((ex, i) => assertEquals(back[i].save(), ex.save(), what(i)));
}

Deno.test("as_typescript: the module rebuilds a byte-identical executable", async () => {
  for (
    const ex of [
      designDocProgram(),
      shapeHeapProgram(),
      everythingProgram(),
      everythingProgram(false),
    ]
  ) {
    const back = await rebuild(ex);
    assertEquals(back.save(), ex.save());
  }
});

Deno.test("as_typescript: NaN tensors are written as bytes and stay exact", async () => {
  const ib = new ExecBuilder();
  const weird = new Float32Array([NaN, -0, Infinity]);
  new Uint32Array(weird.buffer)[0] = 0x7fc00123; // a NaN with a payload
  ib.function("f", 0, () => {
    ib.emit_call("vm.builtin.copy", [tensor(weird)], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  const ex = ib.get();
  const text = ex.as_typescript({ importFrom: modUrl });
  assertStringIncludes(text, "new Uint8Array(");
  assertEquals((await rebuild(ex)).save(), ex.save());
});

Deno.test("as_typescript: imports from jsr by default and reads like the builder DSL", () => {
  const text = designDocProgram().as_typescript();
  assert(text.includes(`from "jsr:@relaxvm/relaxvm"`));
  assertStringIncludes(text, `ib.function("func0", { num_inputs: 2 }, () => {`);
  assertStringIncludes(text, `ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });`);
  assertStringIncludes(text, `ib.emit_call("vm.builtin.print", [ib.r(3)]);`);
  assertStringIncludes(text, "export const ex = ib.get();");
});

Deno.test("as_typescript: a function declared before its callers keeps its table index and code position", async () => {
  const ib = new ExecBuilder();
  ib.declare_function("helper", "vm"); // first in the table, last in the code
  ib.declare_function("vm.builtin.copy");
  ib.function("main", 1, () => {
    ib.emit_call("helper", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  ib.function("helper", 1, () => {
    ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const ex = ib.get();
  assertEquals(ex.functions.map((f) => f.name), ["helper", "vm.builtin.copy", "main"]);
  const text = ex.as_typescript({ importFrom: modUrl });
  assert(text.indexOf(`ib.function("main"`) < text.indexOf(`ib.function("helper"`), text);
  await assertRoundTrips([ex, Executable.load(ex.save())], (i) => ["built", "loaded"][i]);
});

Deno.test("as_typescript: random programs, built and loaded, rebuild byte-identically", async () => {
  const seeds = Array.from({ length: 60 }, (_, i) => i + 1);
  const built = seeds.map(randomProgram);
  const loaded = built.map((ex) => Executable.load(ex.save()));
  for (const ex of loaded) {
    assert(!ex.as_typescript().includes("Executable.load("), "rebuilt with ExecBuilder, not bytes");
  }
  await assertRoundTrips([...built, ...loaded], (i) => `seed ${seeds[i % seeds.length]}`);
});

Deno.test("as_typescript: every testdata/*.rvm file rebuilds byte-identically", async () => {
  const dir = new URL("../testdata/", import.meta.url);
  const files: string[] = [];
  for await (const e of Deno.readDir(dir)) if (e.name.endsWith(".rvm")) files.push(e.name);
  assert(files.length >= 3, `found ${files}`);
  const exs = await Promise.all(
    files.map(async (f) => Executable.load(await Deno.readFile(new URL(f, dir)))),
  );
  await assertRoundTrips(exs, (i) => files[i]);
});

Deno.test("as_typescript: what the builder cannot write is embedded as bytes, still identical", async () => {
  const base = designDocProgram();
  const data = {
    functions: base.functions,
    constants: base.constants,
    instrOffset: base.instrOffset,
    instrData: base.instrData,
    liveness: base.liveness,
  };
  // func0's registers %2 and %3 swapped: valid code, but get() would renumber it.
  const swapped = { ...data, instrData: data.instrData.slice() };
  const cursor = new InstructionCursor(swapped);
  const func0 = data.functions.find((f) => f.name === "func0")!;
  for (let i = func0.start; i < func0.end; i++) {
    cursor.seek(i).renameRegisters((r) => r === 2 ? 3 : r === 3 ? 2 : r);
  }
  // A copy of the last instruction appended after every function: code nobody owns.
  const last = data.instrOffset[data.instrOffset.length - 1];
  const stray = {
    ...data,
    instrOffset: Uint32Array.from([...data.instrOffset, data.instrData.length]),
    instrData: Float64Array.from([...data.instrData, ...data.instrData.subarray(last)]),
  };
  const variants: [string, Executable][] = [
    ["not numbered in order of first use", Executable.load(saveProgram(swapped))],
    ["c[0] and c[1] are equal", Executable.load(saveProgram({ ...data, constants: [5, 5] }))],
    ["belong to no function", Executable.load(saveProgram(stray))],
  ];
  for (const [reason, ex] of variants) {
    const text = ex.as_typescript({ importFrom: modUrl });
    assertStringIncludes(text, reason);
    assertStringIncludes(text, "Executable.load(");
  }
  await assertRoundTrips(variants.map(([, ex]) => ex), (i) => variants[i][0]);
});

Deno.test("as_typescript: int64, float16 and bfloat16 constants rebuild byte-identically", async () => {
  const ib = new ExecBuilder();
  ib.function("f", 0, () => {
    ib.emit_call("vm.builtin.make_tuple", [
      tensor([2n ** 63n - 1n, -(2n ** 63n), 0n]),
      tensor([0.1, NaN, -0, Infinity, 6e-8], { dtype: "float16" }),
      tensor([Math.PI, NaN, -0, 3e38], { dtype: "bfloat16" }),
      dtype("bfloat16"),
    ], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  const ex = ib.get();
  const text = ex.as_typescript({ importFrom: modUrl });
  assertStringIncludes(
    text,
    "new BigInt64Array([9223372036854775807n, -9223372036854775808n, 0n])",
  );
  assertStringIncludes(text, `dtype: "bfloat16"`);
  assert(!text.includes("Executable.load("), "written with the builder");
  await assertRoundTrips([ex, Executable.load(ex.save())], (i) => ["built", "loaded"][i]);
  // A bfloat16 NaN other than tensor()'s own cannot be written as a value: embedded as bytes.
  const odd = tensor([NaN], { dtype: "bfloat16" });
  (odd.cpuView() as Uint16Array)[0] = 0xffc1;
  const ib2 = new ExecBuilder();
  ib2.function("g", 0, () => {
    ib2.emit_call("vm.builtin.copy", [odd], { dst: ib2.r(0) });
    ib2.emit_ret(ib2.r(0));
  });
  const withOddNaN = ib2.get();
  assertStringIncludes(
    withOddNaN.as_typescript(),
    "constant c[0] is a bfloat16 tensor holding a NaN with a payload",
  );
  await assertRoundTrips([withOddNaN], () => "odd NaN");
  odd.dispose();
});
