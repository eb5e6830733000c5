/**
 * The REPL one-liner (docs/guide.md's "Use from the REPL") starts `deno repl` with the API in scope, and
 * the REPL prints relaxvm values as their summaries.
 */

import { assert, assertStringIncludes } from "@std/assert";
import { readPages } from "../docs/pages.ts";

const readme = [...(await readPages()).values()].join("\n");

Deno.test("REPL: the docs' one-liner puts the API in scope and values print as summaries", async () => {
  const line = readme.split("\n").find((l) => l.startsWith("deno repl ")) ?? "";
  const match = /--eval '([^']*)'/.exec(line);
  if (match === null) throw new Error("no page shows a `deno repl --eval '...'` one-liner");
  const eval_ = match[1];
  const child = new Deno.Command(Deno.execPath(), {
    args: ["repl", "--allow-read", "--eval", eval_],
    cwd: new URL("../", import.meta.url),
    env: { NO_COLOR: "1" },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const input = [
    "const ib = new ExecBuilder();",
    'ib.function("double", { num_inputs: 1 }, () => { ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) }); ib.emit_ret(ib.r(1)); });',
    "const vm = new VirtualMachine(ib.get());",
    "vm",
    'await vm.invoke("double", tensor([[1, 2, 3], [4, 5, 6]]))',
    "ib",
    "ib.get()",
    'dtype("int32")',
    "close()",
  ].join("\n") + "\n";
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(input));
  await writer.close();
  const { stdout, stderr } = await child.output();
  const out = new TextDecoder().decode(stdout);
  const err = new TextDecoder().decode(stderr);
  assert(!out.includes("Uncaught") && !err.includes("Uncaught"), out + err);
  assertStringIncludes(out, "NDArray(float32, [2, 3], cpu(0)) [[2, 4, 6], [8, 10, 12]]");
  assertStringIncludes(out, "ExecBuilder(double(1 input); 2 instructions, 0 constants)");
  assertStringIncludes(
    out,
    "Executable(double(1 input); calls vm.op.add; 0 constants, 2 instructions)",
  );
  assertStringIncludes(out, "DataType(int32)");
  assertStringIncludes(
    out,
    "VirtualMachine(cpu(0); compiled mode; double(1 input); live 0 B)",
  );
});
