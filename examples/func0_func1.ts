/**
 * The first program of the Relax VM design document (seed 002, "Virtual
 * Machine"): two VM functions, `func0` adds two tensors and `func1`
 * multiplies them. Each is one `Call` of a packed function and a `Ret`.
 *
 * Run: `deno run examples/func0_func1.ts`
 *
 * @module
 */

import { ExecBuilder, type NDArray, tensor, VirtualMachine } from "../mod.ts";

const ib = new ExecBuilder();
// Python: `with ib.function("func0", num_inputs=2):`; `using` closes the scope at the block's end.
{
  using _ = ib.function("func0", { num_inputs: 2 });
  ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
  ib.emit_ret(ib.r(2));
}
// The callback form means the same thing.
ib.function("func1", { num_inputs: 2 }, () => {
  ib.emit_call("vm.op.multiply", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
  ib.emit_ret(ib.r(2));
});
// get() checks the program and renumbers registers before handing out the executable.
const ex = ib.get();

console.log("Built two VM functions. Their bytecode:");
console.log(ex.as_text().trimEnd());
console.log();

/** Prints a tensor's values as `[1, 2, 3]`. */
async function show(t: NDArray): Promise<string> {
  return `[${[...await t.data()].join(", ")}]`;
}

// The VM looks vm.op.add and vm.op.multiply up in the global registry when it loads `ex`.
const vm = new VirtualMachine(ex);
using a = tensor([1, 2, 3, 4]);
using b = tensor([10, 20, 30, 40]);
console.log(`a = ${await show(a)}`);
console.log(`b = ${await show(b)}`);

// Python: `vm["func1"](a, b)`. Every call is awaitable because a kernel may run on a GPU.
using mul = await vm.get("func1")(a, b) as NDArray;
using add = await vm.invoke("func0", a, b) as NDArray;
console.log(`func1(a, b) = a * b = ${await show(mul)}`);
console.log(`func0(a, b) = a + b = ${await show(add)}`);
