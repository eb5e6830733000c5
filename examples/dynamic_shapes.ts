/**
 * Shape calculation on the shape heap (seed 002, "Shape calculation"). The
 * VM keeps the integers of shape arithmetic in an array, the shape heap:
 * builtins store a tensor's dimensions into it and build new shapes from it.
 *
 * Run: `deno run examples/dynamic_shapes.ts`
 *
 * @module
 */

import {
  ExecBuilder,
  MakeShapeCode,
  MatchShapeCode,
  tensor,
  VirtualMachine,
  VMError,
} from "../mod.ts";

// The codes of vm.builtin.match_shape and vm.builtin.make_shape (TVM's conventions):
// StoreToHeap: heap[value] = shape[i]; UseImm: dimension i is value;
// LoadShape: dimension i is heap[value].
const { StoreToHeap } = MatchShapeCode;
const { UseImm, LoadShape } = MakeShapeCode;

const ib = new ExecBuilder();

// The design document's program: store the shape of a (32, 16) constant and load it back.
ib.function("main", { num_inputs: 0 }, () => {
  // A heap of two integers in r(0).
  ib.emit_call("vm.builtin.alloc_shape_heap", [ib.imm(2)], { dst: ib.r(0) });
  // A plain NDArray argument becomes a constant (c[0]); its shape goes to r(1).
  const x = tensor(new Float32Array(32 * 16), { shape: [32, 16] });
  ib.emit_call("vm.builtin.shape_of", [x], { dst: ib.r(1) });
  // heap[0] = 32, heap[1] = 16
  ib.emit_call("vm.builtin.store_shape", [ib.r(1), ib.r(0), ib.imm(0), ib.imm(1)]);
  // ShapeTuple(heap[0], heap[1])
  ib.emit_call("vm.builtin.load_shape", [ib.r(0), ib.imm(0), ib.imm(1)], { dst: ib.r(2) });
  ib.emit_ret(ib.r(2));
});

// A derived shape: for an input of shape (m, n), return (1, n, m). match_shape
// binds m and n into the heap; make_shape mixes an immediate with heap loads.
ib.function("derived_shape", { num_inputs: 1 }, () => {
  ib.emit_call("vm.builtin.alloc_shape_heap", [ib.imm(2)], { dst: ib.r(1) });
  // match_shape(input, heap, ndim, code, value, ..., err_ctx): heap[0] = m, heap[1] = n.
  // It also rejects an input that is not 2-D, naming the context string.
  ib.emit_call("vm.builtin.match_shape", [
    ib.r(0),
    ib.r(1),
    ib.imm(2),
    ib.imm(StoreToHeap),
    ib.imm(0),
    ib.imm(StoreToHeap),
    ib.imm(1),
    "derived_shape input",
  ]);
  // make_shape(heap, ndim, code, value, ...): (1, heap[1], heap[0]).
  ib.emit_call("vm.builtin.make_shape", [
    ib.r(1),
    ib.imm(3),
    ib.imm(UseImm),
    ib.imm(1),
    ib.imm(LoadShape),
    ib.imm(1),
    ib.imm(LoadShape),
    ib.imm(0),
  ], { dst: ib.r(2) });
  ib.emit_ret(ib.r(2));
});

const ex = ib.get();
console.log("Built two functions that compute shapes on the shape heap:");
console.log(ex.as_text().trimEnd());
console.log();

const vm = new VirtualMachine(ex);
console.log(`main() = ${await vm.invoke("main")}  (the shape of the constant tensor)`);

using y = tensor(new Float32Array(6), { shape: [2, 3] });
console.log(`derived_shape(tensor of shape (2, 3)) = ${await vm.invoke("derived_shape", y)}`);

// A 1-D input fails match_shape; the VMError says where and why.
using z = tensor([1, 2, 3]);
try {
  await vm.invoke("derived_shape", z);
} catch (e) {
  if (!(e instanceof VMError)) throw e;
  console.log(`derived_shape(tensor of shape (3)) fails: ${e.cause}`);
}
