/**
 * A model TVM compiled: testdata/tvm/mlp_dynamic_batch.tvm is the VM
 * executable of a two-layer MLP with a dynamic batch dimension, built by
 * tools/tvm/build_mlp.py with TVM's Relax front end and
 * `tvm.relax.build(mod, target="llvm")`. relaxvm loads it, prints what TVM
 * printed, writes it back byte for byte, and names the TIR kernels (compiled
 * into TVM's LLVM library, not into the executable) that a call needs: the
 * call fails with the unknown-packed-function VMError, which says that they
 * are native code and points to the WebGPU export. No Python needed.
 */

import {
  assert,
  assertEquals,
  assertRejects,
  assertStringIncludes,
  assertThrows,
} from "@std/assert";
import { Executable, LoadError, VirtualMachine, VMError } from "../../mod.ts";
import { tensorOf, toHex, type Value } from "./description.ts";

const dir = new URL("../../testdata/tvm/", import.meta.url);
const bytes = await Deno.readFile(new URL("mlp_dynamic_batch.tvm", dir));
const tvm = JSON.parse(await Deno.readTextFile(new URL("mlp_dynamic_batch.json", dir))) as {
  as_text: string;
  as_python: string;
  stats: string;
  kernels: string[];
  run: { function: string; inputs: Value[] };
};

Deno.test("TVM-compiled MLP: relaxvm loads it and prints what TVM prints", () => {
  using ex = Executable.load(bytes);
  assertEquals(ex.function_names, ["forward"]);
  assertEquals(ex.as_text(), tvm.as_text);
  assertEquals(ex.as_python(), tvm.as_python);
  assertEquals(ex.stats(), tvm.stats); // string constants (ErrorContext(...)) raw, as TVM prints
  assertEquals(toHex(ex.save({ format: "tvm" })), toHex(bytes), "TVM -> relaxvm -> TVM");
});

Deno.test("TVM-compiled MLP: a call names the TIR kernels relaxvm lacks, in an unknown-packed-function VMError", async () => {
  using ex = Executable.load(bytes);
  using vm = new VirtualMachine(ex);
  // The VM's summary lists what is unregistered: exactly the kernels TVM's LLVM library holds.
  const summary = Deno.inspect(vm);
  const listed = summary.match(/unregistered: ([^;)]*)/)?.[1].split(", ") ?? [];
  assertEquals(listed, tvm.kernels, summary);
  const inputs = tvm.run.inputs.map((v) =>
    tensorOf(v[1] as string, v[2] as number[], v[3] as string)
  );
  const e = await assertRejects(() => vm.invoke("forward", ...inputs), VMError);
  // vm.builtin.alloc_shape_heap, check_tensor_info and match_shape ran; shape_func is the first kernel.
  assertStringIncludes(e.message, 'Unknown packed function "shape_func"');
  for (const k of tvm.kernels.slice(1)) assertStringIncludes(e.message, `"${k}"`);
  assert(e.message.includes("forward"), e.message);
  // Issue 28: registerFunc is the wrong way; the message says what the kernels are and where to go.
  assert(!e.message.includes("registerFunc"), e.message);
  assertStringIncludes(e.message, "native code in TVM's compiled library");
  assertStringIncludes(e.message, "tools/tvm/export_webgpu.py");
  assertStringIncludes(e.message, "Running TVM-compiled models");
  for (const t of inputs) t.dispose();
});

Deno.test('TVM-compiled MLP with exec_mode="compiled": a LoadError names the VM-TIR function', async () => {
  const compiled = await Deno.readFile(new URL("mlp_compiled_mode.tvm", dir));
  const e = assertThrows(() => Executable.load(compiled), LoadError, "VM-TIR function");
  assertStringIncludes(e.message, 'exec_mode="bytecode"');
  assertEquals(e.section, "functions");
});
