/**
 * Programs shared by the tests and the golden files in testdata/: the
 * design documents' examples and a few that cover every operand kind.
 *
 * @module
 */

import { dtype, ExecBuilder, type Executable, registerFunc, shape, tensor } from "../mod.ts";

registerFunc("test.vm.add_num", (a: number, b: number) => a + b, { override: true });
registerFunc("test.vm.sub_num", (a: number, b: number) => a - b, { override: true });
registerFunc("test.vm.lt", (a: number, b: number) => a < b, { override: true });

/** The design document's text-format example (seed 002). */
export function designDocProgram(): Executable {
  const ib = new ExecBuilder();
  ib.function("func0", { num_inputs: 2 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("vm.builtin.move", [ib.r(2)], { dst: ib.r(3) });
    ib.emit_call("vm.builtin.print", [ib.r(3)]);
    ib.emit_ret(ib.r(3));
  });
  return ib.get();
}

/** The shape heap example (seed 002). */
export function shapeHeapProgram(): Executable {
  const ib = new ExecBuilder();
  const x = tensor(new Float32Array(32 * 16), { shape: [32, 16] });
  ib.function("main", { num_inputs: 0 }, () => {
    ib.emit_call("vm.builtin.alloc_shape_heap", [ib.imm(2)], { dst: ib.r(0) });
    ib.emit_call("vm.builtin.shape_of", [x], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.store_shape", [ib.r(1), ib.r(0), ib.imm(0), ib.imm(1)]);
    ib.emit_call("vm.builtin.load_shape", [ib.r(0), ib.imm(0), ib.imm(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  x.dispose();
  return ib.get();
}

/** Every operand kind, every opcode, every constant kind, two functions calling each other. */
export function everythingProgram(liveness = true): Executable {
  const ib = new ExecBuilder();
  ib.function("sum_to", { num_inputs: 1, param_names: ["n"] }, () => {
    // r1 = 0 (acc); r2 = 0 (i); loop: if !(i < n) exit; acc += i; i += 1; goto loop
    ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(2) });
    ib.emit_call("test.vm.lt", [ib.r(2), ib.r(0)], { dst: ib.r(3) });
    ib.emit_if(ib.r(3), 4);
    ib.emit_call("test.vm.add_num", [ib.r(1), ib.r(2)], { dst: ib.r(1) });
    ib.emit_call("test.vm.add_num", [ib.r(2), ib.imm(1)], { dst: ib.r(2) });
    ib.emit_goto(-4);
    ib.emit_ret(ib.r(1));
  });
  ib.function("main", { num_inputs: 1 }, () => {
    ib.emit_call("sum_to", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_call("vm.builtin.make_tuple", [
      ib.r(1),
      ib.convert_constant(-0),
      ib.convert_constant(NaN),
      ib.convert_constant(-Infinity),
      ib.convert_constant(2.5),
      "a string",
      shape(2, 3),
      [4, 5],
      dtype("float32"),
      tensor([[1, 2], [3, 4]]),
      tensor([7], { dtype: "int32" }),
      ib.imm(-5),
      ib.f("sum_to"),
      ib.vm_state(),
      ib.void_arg(),
    ], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  return ib.get({ liveness });
}
