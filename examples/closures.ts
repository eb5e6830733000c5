/**
 * Closures: `vm.builtin.make_closure(f, ...captured)` binds values to a VM
 * function. As in TVM, the captured values become the function's *last*
 * parameters, so a closure of `scale(x, factor)` that captures `factor` is
 * called with `x` alone. A closure can leave the VM and be called from
 * TypeScript (`vm.invoke_closure`), or be called inside the VM
 * (`vm.builtin.invoke_closure`).
 *
 * Run: `deno run examples/closures.ts`
 *
 * @module
 */

import { ExecBuilder, type NDArray, tensor, VirtualMachine } from "../mod.ts";

const ib = new ExecBuilder();

// scale(x, factor) = x * factor
ib.function("scale", { num_inputs: 2 }, () => {
  ib.emit_call("vm.op.multiply", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
  ib.emit_ret(ib.r(2));
});

// make_scaler(factor) returns the closure "x => scale(x, factor)" to the caller.
// ib.f("scale") is a function reference operand, printed f[scale].
ib.function("make_scaler", { num_inputs: 1 }, () => {
  ib.emit_call("vm.builtin.make_closure", [ib.f("scale"), ib.r(0)], { dst: ib.r(1) });
  ib.emit_ret(ib.r(1));
});

// apply_twice(closure, x) = closure(closure(x)), calling the closure inside the VM.
ib.function("apply_twice", { num_inputs: 2 }, () => {
  ib.emit_call("vm.builtin.invoke_closure", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
  ib.emit_call("vm.builtin.invoke_closure", [ib.r(0), ib.r(2)], { dst: ib.r(3) });
  ib.emit_ret(ib.r(3));
});

const ex = ib.get();
console.log("Built scale, a closure factory and a closure caller. Their bytecode:");
console.log(ex.as_text().trimEnd());
console.log();

/** Prints a tensor's values as `[1, 2, 3]`. */
async function show(t: NDArray): Promise<string> {
  return `[${[...await t.data()].join(", ")}]`;
}

const vm = new VirtualMachine(ex);
using factor = tensor([10]);
using x = tensor([1, 2, 3]);

const times10 = await vm.invoke("make_scaler", factor);
console.log(`make_scaler([10]) returned ${times10}`);

// Called from TypeScript: the captured factor is appended after x.
using once = await vm.invoke_closure(times10, x) as NDArray;
console.log(`vm.invoke_closure(closure, [1, 2, 3]) = ${await show(once)}`);

// Passed back into the VM and called there twice.
using twice = await vm.invoke("apply_twice", times10, x) as NDArray;
console.log(`apply_twice(closure, [1, 2, 3]) = ${await show(twice)}`);
