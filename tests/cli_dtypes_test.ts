// `relaxvm run` with the int64, float16 and bfloat16 dtypes: exact int64 arguments
// (beyond 2^53 too), and results printed with bigints as integers.
import { assertEquals } from "@std/assert";
import { ExecBuilder, type NDArray, tensor } from "../mod.ts";
import { formatValue, parseArg, shortestFloat } from "../cli/values.ts";

Deno.test("relaxvm run: --dtype int64 reads integers exactly", () => {
  const t = parseArg("[[9007199254740993, -1], [2, 3]]", "int64") as NDArray;
  assertEquals([t.dtype, t.shape, [...t.dataSync()]], [
    "int64",
    [2, 2],
    [9007199254740993n, -1n, 2n, 3n],
  ]);
  t.dispose();
  const h = parseArg("[0.1, 1]", "float16") as NDArray;
  assertEquals([...h.dataSync()], [0.0999755859375, 1]);
  h.dispose();
  assertEquals(parseArg("7", "int64"), 7, "a bare number stays a number");
});

Deno.test("relaxvm run: int64 and bfloat16 results print as values", async () => {
  using i = tensor([[2n ** 62n, -1n]]);
  assertEquals(await formatValue(i), "[[4611686018427387904, -1]] (int64, shape [1, 2])");
  using b = tensor([3.14159, 1], { dtype: "bfloat16" });
  assertEquals(await formatValue(b), "[3.140625, 1] (bfloat16, shape [2])");
});

Deno.test("relaxvm run: an int64 program end to end", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm_cli_int64_" });
  try {
    const ib = new ExecBuilder();
    ib.function("add", 2, () => {
      ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    await Deno.writeFile(`${dir}/add.rvm`, ib.get().save());
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--no-prompt",
        "--allow-read",
        "cli/main.ts",
        "run",
        `${dir}/add.rvm`,
        "add",
        "[9007199254740993, 1]",
        "[1, 2]",
        "--dtype",
        "int64",
      ],
      cwd: new URL("../", import.meta.url),
      stdout: "piped",
      stderr: "piped",
    }).output();
    assertEquals(code, 0, new TextDecoder().decode(stderr));
    assertEquals(new TextDecoder().decode(stdout), "[9007199254740994, 3] (int64, shape [2])\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("relaxvm run: float32 and float16 results print by their shortest text, not the double's 17 digits", async () => {
  using f = tensor([0.1, 0.2 + 0.1, 1 / 3, -0, 1e-45, 3.4028234663852886e38, 16777216, 1.5]);
  assertEquals(
    await formatValue(f),
    "[0.1, 0.3, 0.33333334, -0, 1e-45, 3.4028235e+38, 16777216, 1.5] (float32, shape [8])",
  );
  using h = tensor([0.1, 1 / 3, 65504], { dtype: "float16" });
  // 65500 reads back as float16's 65504, and is how NumPy prints it.
  assertEquals(await formatValue(h), "[0.1, 0.3333, 65500] (float16, shape [3])");
  // Each printed text reads back as the same float32, for every float32 of a sample.
  const bits = new Uint32Array(10_000).map((_, i) => (Math.imul(i, 2654435761) >>> 0) & 0x7f7fffff);
  const values = new Float32Array(bits.buffer);
  for (const v of values) assertEquals(Math.fround(Number(shortestFloat(v, Math.fround))), v);
});
