/**
 * A tour of relaxvm (`deno task demo`): build a program with `ExecBuilder`,
 * inspect it, save and load it as bytes, run it, watch an error being
 * reported, and read the memory statistics.
 *
 * Run: `deno run examples/tour.ts`
 *
 * @module
 */

import { ExecBuilder, Executable, type NDArray, tensor, VirtualMachine, VMError } from "../mod.ts";

/** Prints a heading and the sentence that explains the section. */
function section(title: string, sentence: string): void {
  console.log(`\n== ${title} ==`);
  console.log(sentence);
}

/** A tensor's values as `[1, 2, 3]`. */
async function show(t: NDArray): Promise<string> {
  return `[${[...await t.data()].join(", ")}]`;
}

// ---------------------------------------------------------------------------
section(
  "1. Build",
  "ExecBuilder writes bytecode: add(a, b) and mul(a, b), and mean_or_sum(a, b, flag) that branches.",
);
const ib = new ExecBuilder();
ib.function("add", { num_inputs: 2 }, () => {
  ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
  ib.emit_ret(ib.r(2));
});
ib.function("mul", { num_inputs: 2 }, () => {
  ib.emit_call("vm.op.multiply", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
  ib.emit_ret(ib.r(2));
});
// mean_or_sum(a, b, flag) = flag ? (a + b) * 0.5 : a + b
ib.function("mean_or_sum", { num_inputs: 3 }, () => {
  // A VM function calls another one by name, like a packed function.
  ib.emit_call("add", [ib.r(0), ib.r(1)], { dst: ib.r(3) }); // 0
  ib.emit_call("vm.builtin.read_if_cond", [ib.r(2)], { dst: ib.r(4) }); // 1
  ib.emit_if(ib.r(4), 3); // 2: flag false → jump to 5
  // The tensor 0.5 goes into the constant pool as c[0].
  const half = ib.convert_constant(tensor([0.5]));
  ib.emit_call("mul", [ib.r(3), half], { dst: ib.r(5) }); // 3
  ib.emit_ret(ib.r(5)); // 4
  ib.emit_ret(ib.r(3)); // 5
});
// get() runs the checker (CheckError on mistakes) and renumbers registers.
const ex: Executable = ib.get();
console.log(`Built ${ex.function_names.length} VM functions: ${ex.function_names.join(", ")}.`);

// ---------------------------------------------------------------------------
section(
  "2. stats()",
  "The constant pool and the globals (VM and packed functions), as TVM prints them.",
);
console.log(ex.stats().trimEnd());

section("3. as_text()", "The instruction listing in TVM's layout: %N registers, c[N] constants.");
console.log(ex.as_text().trimEnd());

section(
  "4. as_text({ releases: true })",
  "The same listing with the points where the VM frees each register's value after its last use.",
);
console.log(ex.as_text({ releases: true }).trimEnd());

section(
  "5. as_typescript()",
  "A TypeScript module that rebuilds this executable; `relaxvm build` turns one into a .rvm file.",
);
console.log(ex.as_typescript({ importFrom: "jsr:@relaxvm/relaxvm" }).trimEnd());

// ---------------------------------------------------------------------------
section(
  "6. save() and Executable.load()",
  "The binary form travels as bytes and loads back unchanged.",
);
const bytes = ex.save();
const loaded = Executable.load(bytes);
const again = loaded.save();
const identical = again.length === bytes.length && again.every((b, i) => b === bytes[i]);
console.log(`save() wrote ${bytes.length} bytes.`);
console.log(`Loaded back and saved again: ${identical ? "identical bytes" : "DIFFERENT bytes"}.`);
console.log(`Same listing: ${loaded.as_text() === ex.as_text()}.`);

// ---------------------------------------------------------------------------
section(
  "7. Run on the CPU",
  "A VirtualMachine runs the loaded executable; every call is awaitable.",
);
const vm = new VirtualMachine(loaded);
using a = tensor([1, 2, 3]);
using b = tensor([3, 4, 5]);
using yes = tensor([1]);
using no = tensor([0]);
using sum = await vm.invoke("add", a, b) as NDArray;
using product = await vm.invoke("mul", a, b) as NDArray;
using mean = await vm.invoke("mean_or_sum", a, b, yes) as NDArray;
using total = await vm.invoke("mean_or_sum", a, b, no) as NDArray;
console.log(`a = ${await show(a)}, b = ${await show(b)}`);
console.log(`add(a, b)               = ${await show(sum)}`);
console.log(`mul(a, b)               = ${await show(product)}`);
console.log(`mean_or_sum(a, b, [1])  = ${await show(mean)}`);
console.log(`mean_or_sum(a, b, [0])  = ${await show(total)}`);

// ---------------------------------------------------------------------------
section(
  "8. Errors",
  "A failing call throws VMError, which says where it failed; the original error is its cause.",
);
using wrong = tensor([1, 2]);
try {
  await vm.invoke("add", a, wrong); // shapes [3] and [2] do not broadcast
} catch (e) {
  if (!(e instanceof VMError)) throw e;
  console.log(`Caught ${e.name}: ${e.message}`);
  console.log(`  function:    ${e.functionName}`);
  console.log(`  pc:          ${e.pc}`);
  console.log(`  instruction: ${e.instruction}`);
  console.log(`  packed func: ${e.packedFunc}`);
  console.log(`  cause:       ${e.cause}`);
}
using after = await vm.invoke("add", a, b) as NDArray;
console.log(`The same VM still works afterwards: add(a, b) = ${await show(after)}`);

// ---------------------------------------------------------------------------
section(
  "9. memory_stats()",
  "Every tensor the VM creates goes through the device's allocator, which counts it.",
);
const stats = vm.memory_stats();
for (const [key, value] of Object.entries(stats)) console.log(`  ${key}: ${value}`);
