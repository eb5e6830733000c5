/**
 * The playground's logic without a browser (web/playground/program.ts and
 * samples.ts): evaluating editor text, the argument syntax, result
 * formatting, and the built-in samples' two forms agreeing. The page itself
 * is tested in Chromium by tests/browser_test.ts.
 *
 * @module
 */

import {
  assert,
  assertEquals,
  assertInstanceOf,
  assertRejects,
  assertStringIncludes,
  assertThrows,
} from "@std/assert";
import { cpu, ExecBuilder, Executable, type NDArray, shape, ShapeTuple, tensor } from "../mod.ts";
import {
  argumentHint,
  evaluateProgram,
  formatConsoleValue,
  formatResult,
  functionBody,
  parseArguments,
  resultJSON,
  SCOPE_NAMES,
} from "../web/playground/program.ts";
import { sample, SAMPLES } from "../web/playground/samples.ts";
import { STRICT_CSP } from "../web/serve.ts";
import { checked, decodeShared, encodeShared, SHARE_PREFIX } from "../web/playground/share.ts";

Deno.test("each sample's editor text builds the same bytes as its compiled form", async () => {
  for (const s of SAMPLES) {
    const typed = await evaluateProgram(s.source);
    assertEquals(typed.save(), s.build().save(), s.name);
    assert(typed.function_names.includes(s.function), `${s.name} has no ${s.function}`);
  }
});

Deno.test("each sample runs on its default arguments", async () => {
  const { VirtualMachine } = await import("../mod.ts");
  for (const s of SAMPLES) {
    const vm = new VirtualMachine(s.build());
    const out = await vm.invoke(s.function, ...parseArguments(s.args, "float32", cpu()));
    const json = await resultJSON(out);
    assert("tensor" in json || "tuple" in json, `${s.name}: ${JSON.stringify(json)}`);
  }
});

Deno.test("sample() names the known samples when the name is unknown", () => {
  assertEquals(sample("mlp").function, "mlp");
  assertThrows(() => sample("nope"), RangeError, 'No sample named "nope" (have: add, mlp,');
});

Deno.test("evaluateProgram takes as_typescript() output as it is: imports and export", async () => {
  const ex = sample("mlp").build();
  const source = ex.as_typescript();
  assertStringIncludes(source, "import {");
  assertStringIncludes(source, "export const ex");
  assertEquals((await evaluateProgram(source)).save(), ex.save());
});

Deno.test("functionBody removes imports keeping line numbers, and drops export", () => {
  const body = functionBody(
    'import {\n  ExecBuilder,\n} from "jsr:@relaxvm/relaxvm";\nimport type { NDArray } from "x";\nexport const ex = 1;',
  );
  const lines = body.split("\n");
  assertEquals(lines.length, 6);
  assertEquals(lines[4], "const ex = 1;");
  assert(!body.includes("import"), body);
});

Deno.test("evaluateProgram uses what the code returns, else ex, else ib", async () => {
  const fn = `ib.function("f", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));`;
  const viaIb = await evaluateProgram(`const ib = new ExecBuilder();\n${fn}`);
  const viaEx = await evaluateProgram(`const ib = new ExecBuilder();\n${fn}\nconst ex = ib.get();`);
  const viaReturn = await evaluateProgram(
    `const b = new ExecBuilder();\nb.function("g", 1, () => b.emit_ret(b.r(0)));\nreturn b.get();`,
  );
  assertEquals(viaIb.function_names, ["f"]);
  assertEquals(viaEx.save(), viaIb.save());
  assertEquals(viaReturn.function_names, ["g"]);
  assertInstanceOf(viaReturn, Executable);
});

Deno.test("evaluateProgram may await, and sees every export of the library", async () => {
  assert(SCOPE_NAMES.includes("ExecBuilder") && SCOPE_NAMES.includes("webgpu"));
  const ex = await evaluateProgram(
    `await Promise.resolve();
const ib = new relaxvm.ExecBuilder();
ib.function("f", 1, () => {
  ib.emit_call("vm.op.reshape", [ib.r(0), shape(4)], { dst: ib.r(1) });
  ib.emit_ret(ib.r(1));
});`,
  );
  assertStringIncludes(ex.as_text(), "vm.op.reshape");
});

Deno.test("evaluateProgram errors name the line, and a missing result says what to write", async () => {
  const error = await assertRejects(
    () => evaluateProgram("const ib = new ExecBuilder();\n\nib.emit_ret(ib.r(0));"),
    Error,
    "no function is open",
  );
  assertStringIncludes(error.message, "(line 3)");
  await assertRejects(() => evaluateProgram("const x = 1;"), TypeError, "The program gave nothing");
  await assertRejects(() => evaluateProgram("return 5;"), TypeError, "The program gave a number");
  await assertRejects(() => evaluateProgram("const = ;"), SyntaxError);
});

Deno.test("parseArguments: arrays become tensors of the dtype on the device; scalars pass", () => {
  const args = parseArguments(
    '[[[1, 2], [3, 4]], 5, "s", true, null, {"shape": [2, 3]}, {"tensor": [7], "dtype": "int32"}]',
    "float64",
    cpu(),
  );
  const t = args[0] as NDArray;
  assertEquals([t.dtype, t.shape, [...t.dataSync()]], ["float64", [2, 2], [1, 2, 3, 4]]);
  assertEquals(args.slice(1, 5), [5, "s", true, null]);
  assertInstanceOf(args[5], ShapeTuple);
  assertEquals([...(args[5] as ShapeTuple)], [2, 3]);
  assertEquals((args[6] as NDArray).dtype, "int32");
  assertEquals(parseArguments("  ", "float32", cpu()), []);
});

Deno.test("parseArguments rejects what it cannot make, naming the argument", () => {
  assertThrows(() => parseArguments("[1,", "float32", cpu()), SyntaxError, "not JSON");
  assertThrows(() => parseArguments('{"a": 1}', "float32", cpu()), TypeError, "a JSON array");
  assertThrows(
    () => parseArguments('[[1], {"a": 1}]', "float32", cpu()),
    TypeError,
    'Cannot make argument 1 from {"a":1}',
  );
  assertThrows(
    () => parseArguments("[[1, 2], [[1], [2, 3]]]", "float32", cpu()),
    TypeError,
    "Cannot make argument 1:",
  );
});

Deno.test("resultJSON and formatResult: tensors, tuples, shapes and scalars", async () => {
  using t = tensor([[1.5, 2], [3, 4]]);
  const json = await resultJSON([t, new ShapeTuple([2, 3]), 7, "s"]);
  assertEquals(json, {
    tuple: [
      { tensor: { dtype: "float32", shape: [2, 2], device: "cpu(0)", values: [1.5, 2, 3, 4] } },
      { shape: [2, 3] },
      { value: 7 },
      { value: "s" },
    ],
  });
  assertEquals(
    formatResult(json),
    'tuple of 4\n  [0] float32[2, 2] on cpu(0)\n  [[1.5, 2],\n   [3, 4]]\n  [1] shape(2, 3)\n  [2] 7\n  [3] "s"',
  );
  using big = tensor(new Int32Array(2000), { dtype: "int32" });
  const text = formatResult(await resultJSON(big));
  assertEquals(text, "int32[2000] on cpu(0)\n[0, 0, 0, ..., 0, 0, 0]");
  using i64 = tensor([2n ** 60n], { dtype: "int64" });
  assertEquals(
    (await resultJSON(i64) as { tensor: { values: string[] } }).tensor.values,
    ["1152921504606846976"],
  );
});

Deno.test("strict.html carries the strict policy the server sends", async () => {
  const html = await Deno.readTextFile(new URL("../web/strict.html", import.meta.url));
  const meta = /http-equiv="Content-Security-Policy"\s+content="([^"]+)"/.exec(html);
  assertEquals(meta?.[1], STRICT_CSP);
  assertStringIncludes(html, 'data-csp="strict"');
});

Deno.test("share: a program survives the link, unicode and all; other fragments are no link", async () => {
  const program = {
    source: "// π ≈ 3.14159 — ünïcödé\nconst ib = new ExecBuilder();\n",
    args: "[[1, 2]]",
    fn: "main",
  };
  const hash = await encodeShared(program);
  assert(hash.startsWith(SHARE_PREFIX));
  assert(/^#p1=[A-Za-z0-9_-]+$/.test(hash), hash); // URL-safe, no padding
  assertEquals(await decodeShared(hash), program);
  assertEquals(await decodeShared(""), null);
  assertEquals(await decodeShared("#section-2"), null);
  await assertRejects(() => decodeShared(hash.slice(0, 12)), SyntaxError, "damaged");
  assertThrows(() => checked({ source: 1, args: "", fn: "" }), TypeError);
  // Long programs compress: the samples' text is repetitive.
  const long = { source: SAMPLES.map((s) => s.source).join("\n"), args: "[]", fn: "main" };
  assert((await encodeShared(long)).length < long.source.length);
});

Deno.test("argumentHint names a function's inputs, by name when the program gave them", () => {
  const ib = new ExecBuilder();
  ib.function("named", { num_inputs: 2, param_names: ["x", "w"] }, () => ib.emit_ret(ib.r(0)));
  ib.function("bare", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  ib.function("none", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.null_value", [], { dst: ib.r(0) });
    ib.emit_ret(ib.r(0));
  });
  const ex = ib.get();
  assertEquals(
    argumentHint(ex, "named"),
    "@named takes 2 arguments (x, w): write [x, w] as JSON, a nested array for a tensor",
  );
  assertEquals(
    argumentHint(ex, "bare"),
    "@bare takes 1 argument (%0): write [%0] as JSON, a nested array for a tensor",
  );
  assertEquals(argumentHint(ex, "none"), "@none takes no arguments: []");
  assertEquals(argumentHint(ex, "missing"), "");
});

Deno.test("formatConsoleValue prints values as the REPL does", () => {
  using t = tensor([[1, 2], [3, 4]], { dtype: "int32" });
  assertEquals(formatConsoleValue("text"), "text");
  assertEquals(formatConsoleValue(t), "NDArray(int32, [2, 2], cpu(0)) [[1, 2], [3, 4]]");
  assertEquals(formatConsoleValue(["a", 1, 2n, null]), '["a", 1, 2n, null]');
  assertEquals(formatConsoleValue({ n: 3, s: shape(2, 3) }), "{ n: 3, s: ShapeTuple(2, 3) }");
  assertEquals(formatConsoleValue(new RangeError("no")), "RangeError: no");
});
