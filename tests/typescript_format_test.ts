import { assert, assertEquals, assertStringIncludes } from "@std/assert";
import { ExecBuilder, type Executable, tensor } from "../mod.ts";
import { designDocProgram, everythingProgram, shapeHeapProgram } from "./_programs.ts";

const modUrl = new URL("../mod.ts", import.meta.url).href;

async function rebuild(ex: Executable): Promise<Executable> {
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/rebuilt.ts`;
    await Deno.writeTextFile(file, ex.as_typescript({ importFrom: modUrl }));
    const mod = await import(`file://${file}`);
    return mod.ex as Executable;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
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
