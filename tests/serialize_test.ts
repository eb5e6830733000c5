import {
  assert,
  assertEquals,
  assertInstanceOf,
  assertStrictEquals,
  assertThrows,
} from "@std/assert";
import {
  type DataType,
  dtype,
  ExecBuilder,
  Executable,
  LoadError,
  NDArray,
  type ShapeTuple,
  tensor,
  VirtualMachine,
} from "../mod.ts";
import { designDocProgram, everythingProgram, shapeHeapProgram } from "./_programs.ts";

const testdata = new URL("../testdata/", import.meta.url);

Deno.test("save/load: round trip keeps code, functions, flags and constants exactly", () => {
  const ex = everythingProgram();
  const back = Executable.load(ex.save());
  assertEquals(back.save(), ex.save());
  assertEquals(back.as_text(), ex.as_text());
  assertEquals(back.stats(), ex.stats());
  assertEquals(back.functions, ex.functions);
  assertStrictEquals(back.liveness, true);
  assertStrictEquals(Executable.load(everythingProgram(false).save()).liveness, false);
  const [negZero, nan, negInf, half, str, s1, s2, dt, t1, t2] = back.constants;
  assert(Object.is(negZero, -0));
  assert(Number.isNaN(nan));
  assertStrictEquals(negInf, -Infinity);
  assertStrictEquals(half, 2.5);
  assertStrictEquals(str, "a string");
  assertEquals([...(s1 as ShapeTuple)], [2, 3]);
  assertEquals([...(s2 as ShapeTuple)], [4, 5]);
  assertEquals(String(dt as DataType), "float32");
  assertInstanceOf(t1, NDArray);
  assertEquals([...(t1 as NDArray).dataSync()], [1, 2, 3, 4]);
  assertEquals((t1 as NDArray).shape, [2, 2]);
  assertEquals((t2 as NDArray).dtype, "int32");
  assertEquals(back.function_names, ["sum_to", "main"]);
  assert(back.has_function("main") && !back.has_function("vm.builtin.copy"));
});

Deno.test("golden: as_text, stats and binaries match testdata/", async () => {
  const programs = {
    design_doc: designDocProgram(),
    shape_heap: shapeHeapProgram(),
    everything: everythingProgram(),
  };
  for (const [name, ex] of Object.entries(programs)) {
    assertEquals(
      ex.stats() + "\n" + ex.as_text(),
      await Deno.readTextFile(new URL(`${name}.txt`, testdata)),
      name,
    );
    assertEquals(
      ex.as_text({ releases: true }),
      await Deno.readTextFile(new URL(`${name}.releases.txt`, testdata)),
      name,
    );
    const golden = await Deno.readFile(new URL(`${name}.rvm`, testdata));
    assertEquals(
      ex.save(),
      golden,
      `${name}.rvm (run \`deno task golden\` after an intended format change)`,
    );
    assertEquals(Executable.load(golden).as_text(), ex.as_text());
  }
});

// The listing as the design document prints it; tests/tvm/relaxvm_golden_test.ts checks every
// golden dump against what TVM 0.27 itself prints for the same executable.
Deno.test("golden: the design document's listing is TVM's", () => {
  assertEquals(designDocProgram().as_text().split("\n").slice(0, 5), [
    "@func0:",
    "  call  vm.op.add        in: %0, %1       dst: %2",
    "  call  vm.builtin.move  in: %2           dst: %3",
    "  call  vm.builtin.print in: %3           dst: %void",
    "  ret   %3",
  ]);
});

Deno.test("load: every truncation is a LoadError naming a section and offset", () => {
  const bytes = everythingProgram().save();
  for (let n = 0; n < bytes.length; n++) {
    const e: LoadError = assertThrows(() => Executable.load(bytes.subarray(0, n)), LoadError);
    assert(e.offset >= 0 && e.offset <= n, `offset ${e.offset} for length ${n}`);
    assert(e.message.includes(`section "${e.section}"`));
  }
});

Deno.test("load: corrupted bytes are a LoadError or a valid executable, never another exception", () => {
  const bytes = everythingProgram().save();
  let seed = 12345;
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  let rejected = 0;
  for (let trial = 0; trial < 3000; trial++) {
    const copy = bytes.slice();
    const flips = 1 + Math.floor(rand() * 3);
    for (let k = 0; k < flips; k++) {
      copy[Math.floor(rand() * copy.length)] = Math.floor(rand() * 256);
    }
    try {
      const ex = Executable.load(copy);
      ex.as_text(); // what loads must also print
    } catch (e) {
      if (!(e instanceof LoadError)) throw new Error(`trial ${trial}: ${e}`, { cause: e });
      rejected++;
    }
  }
  assert(rejected > 1000, `only ${rejected} of 3000 corruptions rejected`);
});

Deno.test("load: header errors say what is wrong", () => {
  const bytes = designDocProgram().save();
  const badMagic = bytes.slice();
  badMagic[0] = 0;
  assertThrows(() => Executable.load(badMagic), LoadError, "bad magic number");
  const badVersion = bytes.slice();
  badVersion[8] = 99;
  const e: LoadError = assertThrows(
    () => Executable.load(badVersion),
    LoadError,
    "format version 99",
  );
  assertEquals([e.section, e.offset], ["header", 8]);
  assertThrows(() => Executable.load(new Uint8Array([...bytes, 0])), LoadError, "unexpected bytes");
  assertThrows(() => Executable.load("not bytes" as unknown as Uint8Array), LoadError);
});

Deno.test("load: code that does not check is rejected", () => {
  // Build a valid program, then rewrite its jump so it leaves the function.
  const ib = new ExecBuilder();
  ib.function("f", 1, () => {
    ib.emit_goto(1);
    ib.emit_ret(ib.r(0));
  });
  const bytes = ib.get().save();
  const view = new DataView(bytes.buffer);
  // The goto's offset word is the second word of instr_data: find the float64 1 after the opcode 3.
  let patched = false;
  for (let at = 0; at + 16 <= bytes.length; at += 8) {
    if (view.getFloat64(at, true) === 3 && view.getFloat64(at + 8, true) === 1) {
      view.setFloat64(at + 8, 40, true);
      patched = true;
      break;
    }
  }
  assert(patched);
  const e: LoadError = assertThrows(() => Executable.load(bytes), LoadError, "jumps by 40");
  assertEquals(e.section, "code");
});

Deno.test("load: every problem in the code is reported, not only the first", () => {
  const ib = new ExecBuilder();
  ib.function("f", 1, () => {
    ib.emit_goto(2);
    ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const bytes = ib.get().save();
  const view = new DataView(bytes.buffer);
  // Rewrite the goto's offset (2 → 40) and the ret's register (%1 → %0 is fine; %1 → %9 is not).
  let patched = 0;
  for (let at = 0; at + 16 <= bytes.length; at += 8) {
    const word = view.getFloat64(at, true), next = view.getFloat64(at + 8, true);
    if (word === 3 && next === 2) view.setFloat64(at + 8, 40, true), patched++;
    if (word === 2 && next === 1) view.setFloat64(at + 8, 9, true), patched++;
  }
  assertEquals(patched, 2);
  const e: LoadError = assertThrows(() => Executable.load(bytes), LoadError, "2 problems");
  assert(e.message.includes("@f[0]: jumps by 40"), e.message);
  assert(e.message.includes("@f[2]: reads %9, outside the register file"), e.message);
});

Deno.test("save + load of 1,000,000 instructions round-trips", () => {
  const ib = new ExecBuilder();
  ib.function("big", 2, () => {
    for (let i = 0; i < 999_999; i++) {
      ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2 + (i % 8)) });
    }
    ib.emit_ret(ib.r(2));
  });
  const ex = ib.get();
  const bytes = ex.save();
  assertEquals(Executable.load(bytes).save(), bytes);
});

/** A program with int64, float16 and bfloat16 constants that uses each. */
function newDTypesProgram(): Executable {
  const ib = new ExecBuilder();
  ib.function("main", 0, () => {
    ib.emit_call("vm.op.add", [tensor([2n ** 60n + 1n, -3n]), tensor([1n, 1n])], {
      dst: ib.r(0),
    });
    ib.emit_call("vm.op.cast", [tensor([0.1, 65504], { dtype: "float16" }), "float32"], {
      dst: ib.r(1),
    });
    ib.emit_call("vm.op.cast", [tensor([Math.PI, -0], { dtype: "bfloat16" }), dtype("float32")], {
      dst: ib.r(2),
    });
    ib.emit_call("vm.builtin.make_tuple", [ib.r(0), ib.r(1), ib.r(2), dtype("bfloat16")], {
      dst: ib.r(3),
    });
    ib.emit_ret(ib.r(3));
  });
  return ib.get();
}

Deno.test("save/load: int64, float16 and bfloat16 constants keep their exact bits and run", async () => {
  const ex = newDTypesProgram();
  const back = Executable.load(ex.save());
  assertEquals(back.save(), ex.save());
  const tensors = back.constants.filter((c) => c instanceof NDArray) as NDArray[];
  assertEquals(tensors.map((t) => t.dtype), ["int64", "int64", "float16", "bfloat16"]);
  assertEquals([...tensors[0].dataSync()], [2n ** 60n + 1n, -3n]);
  assertEquals([...new Uint16Array(tensors[3].cpuView().buffer, tensors[3].byteOffset, 2)], [
    0x4049,
    0x8000,
  ]);
  assertEquals(
    back.constants.filter((c) => !(c instanceof NDArray) && typeof c !== "string").map(String),
    ["float32", "bfloat16"],
  );
  const [sum, half, bf, dt] = await new VirtualMachine(back).invoke("main") as [
    NDArray,
    NDArray,
    NDArray,
    DataType,
  ];
  assertEquals([...sum.dataSync()], [2n ** 60n + 2n, -2n]);
  assertEquals([...half.dataSync()], [0.0999755859375, 65504]);
  assertEquals([...bf.dataSync()], [3.140625, -0]);
  assertEquals([dt.code, dt.bits, dt.lanes], [4, 16, 1]);
  for (const t of [sum, half, bf]) t.dispose();
});
