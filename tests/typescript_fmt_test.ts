/**
 * `as_typescript()` output is `deno fmt`-clean: a user who checks a
 * generated module in gets no diff from `deno fmt`, at Deno's default line
 * width (80) or relaxvm's (100). Each module is written to a file and
 * `deno fmt --check` runs over all of them in a subprocess.
 */

import { assertEquals } from "@std/assert";
import { dtype, ExecBuilder, Executable, shape, tensor } from "../mod.ts";
import { saveProgram } from "../program/serialize.ts";
import { designDocProgram, everythingProgram, shapeHeapProgram } from "./_programs.ts";
import { randomProgram } from "./_random_programs.ts";

/** Programs with long names, long argument lists, quotes and big constants. */
function awkwardProgram(): Executable {
  const ib = new ExecBuilder();
  const long = "a_function_name_that_is_long_enough_to_push_every_call_past_eighty_columns";
  ib.declare_function(long, "vm");
  ib.function(
    "main",
    { num_inputs: 3, param_names: ["first_input", "second_input", "third"] },
    () => {
      ib.emit_call('quote"d.packed', [ib.r(0), 'a "string" with quotes', "it's"], { dst: ib.r(3) });
      ib.emit_call(long, [ib.r(0), ib.r(1), ib.r(2)], { dst: ib.r(4) });
      ib.emit_call("vm.builtin.make_tuple", [
        ib.r(3),
        ib.r(4),
        tensor(Array.from({ length: 40 }, (_, i) => i / 7)),
        tensor([1n, -(2n ** 63n), 2n ** 62n, 5n, 6n, 7n, 8n, 9n, 10n]),
        tensor([NaN, 1, 2], { dtype: "float32" }),
        tensor([0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125], { dtype: "bfloat16" }),
        shape(1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288),
        dtype("float16"),
        ib.imm(-123456789),
        ib.f(long),
      ], { dst: ib.r(5) });
      ib.emit_if(ib.r(0), 2);
      ib.emit_goto(1);
      ib.emit_ret(ib.r(5));
    },
  );
  ib.function(long, { num_inputs: 3, param_names: ["x", "y", "z"] }, () => ib.emit_ret(ib.r(2)));
  return ib.get({ liveness: false });
}

/** An executable the builder cannot write, so the module embeds its bytes. */
function bytesProgram(): Executable {
  const base = designDocProgram();
  return Executable.load(saveProgram({ ...base, constants: [5, 5] }));
}

async function fmtCheck(dir: string, width: number): Promise<string> {
  const { code, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["fmt", "--check", `--line-width=${width}`, dir],
    cwd: dir,
    stdout: "piped",
    stderr: "piped",
  }).output();
  return code === 0 ? "" : new TextDecoder().decode(stderr);
}

Deno.test("as_typescript: the module is deno fmt-clean at line widths 80 and 100", async () => {
  const programs: [string, Executable][] = [
    ["design_doc", designDocProgram()],
    ["shape_heap", shapeHeapProgram()],
    ["everything", everythingProgram()],
    ["awkward", awkwardProgram()],
    ["bytes", bytesProgram()],
    ...Array.from(
      { length: 30 },
      (_, i) => [`random_${i + 1}`, randomProgram(i + 1)] as [string, Executable],
    ),
  ];
  const dir = await Deno.makeTempDir();
  try {
    for (const [name, ex] of programs) {
      await Deno.writeTextFile(`${dir}/${name}.ts`, ex.as_typescript());
      await Deno.writeTextFile(
        `${dir}/${name}_local.ts`,
        ex.as_typescript({ importFrom: "../a/path/that/is/rather/long/to/relaxvm/mod.ts" }),
      );
    }
    assertEquals(await fmtCheck(dir, 80), "");
    assertEquals(await fmtCheck(dir, 100), "");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("as_typescript: an import too long for one line still rebuilds the executable", async () => {
  // A query string makes the specifier long (and imports a second copy of the library).
  const from = new URL(`../mod.ts?${"long".repeat(20)}`, import.meta.url).href;
  for (const ex of [awkwardProgram(), bytesProgram()]) {
    const text = ex.as_typescript({ importFrom: from });
    assertEquals(text.includes("import * as relaxvm from"), true, text.slice(0, 300));
    const file = await Deno.makeTempFile({ suffix: ".ts" });
    await Deno.writeTextFile(file, text);
    const { ex: rebuilt } = await import(`file://${file}`);
    await Deno.remove(file);
    assertEquals(rebuilt.save(), ex.save());
  }
});
