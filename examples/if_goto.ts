/**
 * Control flow: `If` and `Goto`, the two instructions TVM added to the
 * design document's `Call`/`Ret`. A loop is an `If` that leaves it and a
 * `Goto` back edge; a branch is an `If` whose false side is further down.
 * Offsets are relative, counted in instructions from the jump itself.
 *
 * Run: `deno run examples/if_goto.ts`
 *
 * @module
 */

import { ExecBuilder, type NDArray, tensor, VirtualMachine } from "../mod.ts";

// The loop counts with the scalar builtins vm.prim.le (a <= b, a boolean that If takes) and
// vm.prim.add; the vm.prim.* family also has sub, mul, floordiv, floormod, comparisons, and/or/not.
const ib = new ExecBuilder();

// sum_to(n) = 1 + 2 + ... + n. Registers: %0 = n, %1 = i, %2 = total, %3 = i <= n.
ib.function("sum_to", { num_inputs: 1 }, () => {
  ib.emit_call("vm.builtin.copy", [ib.imm(1)], { dst: ib.r(1) }); // 0: i = 1
  ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(2) }); // 1: total = 0
  ib.emit_call("vm.prim.le", [ib.r(1), ib.r(0)], { dst: ib.r(3) }); // 2: loop head
  ib.emit_if(ib.r(3), 4); // 3: i > n → jump to 7
  ib.emit_call("vm.prim.add", [ib.r(2), ib.r(1)], { dst: ib.r(2) }); // 4: total += i
  ib.emit_call("vm.prim.add", [ib.r(1), ib.imm(1)], { dst: ib.r(1) }); // 5: i += 1
  ib.emit_goto(-4); // 6: back edge to 2
  ib.emit_ret(ib.r(2)); // 7
});

// pick(cond, a, b) = cond ? max(a, b) : min(a, b), where cond is a 1-element tensor.
// read_if_cond turns any condition value (number, boolean, tensor on any device) into a boolean.
ib.function("pick", { num_inputs: 3 }, () => {
  ib.emit_call("vm.builtin.read_if_cond", [ib.r(0)], { dst: ib.r(3) }); // 0
  ib.emit_if(ib.r(3), 3); // 1: false → jump to 4
  ib.emit_call("vm.op.maximum", [ib.r(1), ib.r(2)], { dst: ib.r(4) }); // 2: true side
  ib.emit_ret(ib.r(4)); // 3
  ib.emit_call("vm.op.minimum", [ib.r(1), ib.r(2)], { dst: ib.r(4) }); // 4: false side
  ib.emit_ret(ib.r(4)); // 5
});

const ex = ib.get();
console.log("Built a counting loop and a branch. Their bytecode:");
console.log(ex.as_text().trimEnd());
console.log();

const vm = new VirtualMachine(ex);
for (const n of [0, 1, 10, 100]) {
  console.log(`sum_to(${n}) = ${await vm.invoke("sum_to", n)}`);
}

using a = tensor([1, 5, 3]);
using b = tensor([4, 2, 6]);
for (const flag of [1, 0]) {
  using cond = tensor([flag]);
  using out = await vm.invoke("pick", cond, a, b) as NDArray;
  const what = flag ? "maximum" : "minimum";
  console.log(
    `pick(${flag}, [1, 5, 3], [4, 2, 6]) = [${[...await out.data()].join(", ")}]  (${what})`,
  );
}
