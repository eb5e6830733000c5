/**
 * The models of `tools/tvm/export_webgpu.py` written with relaxvm's DSL and
 * operators (relaxvm's hand-written WGSL), taking their weights in the
 * package's order, so one process can run the same model through TVM's
 * kernels and through relaxvm's (bench/tvm_webgpu_bench.ts).
 *
 * @module
 */

import { ExecBuilder, type Executable, MakeShapeCode, MatchShapeCode } from "../mod.ts";

/** `forward(x[n, dIn], fc1.weight, fc1.bias, fc2.weight, fc2.bias)`: relu between two linears. */
export function relaxvmMLP(): Executable {
  const ib = new ExecBuilder();
  ib.function("forward", { num_inputs: 5 }, () => {
    ib.emit_call("vm.op.linear", [ib.r(0), ib.r(1), ib.r(2)], { dst: ib.r(5) });
    ib.emit_call("vm.op.relu", [ib.r(5)], { dst: ib.r(6) });
    ib.emit_call("vm.op.linear", [ib.r(6), ib.r(3), ib.r(4)], { dst: ib.r(7) });
    ib.emit_ret(ib.r(7));
  });
  return ib.get();
}

/**
 * The pre-norm encoder block, `forward(x[s, d], ln1.weight, ln1.bias, q.weight, q.bias, ...,
 * down.weight, down.bias)`: self-attention (one fused `vm.op.attention` over `[s, heads, d /
 * heads]`) and a GELU MLP, with residuals.
 */
export function relaxvmEncoder(d: number, heads: number): Executable {
  const ib = new ExecBuilder();
  const hd = d / heads;
  ib.function("forward", { num_inputs: 17 }, () => {
    let next = 17;
    const call = (name: string, args: Parameters<ExecBuilder["emit_call"]>[1]) => {
      const dst = ib.r(next++);
      ib.emit_call(name, args, { dst });
      return dst;
    };
    const p = (i: number) => ib.r(1 + i);
    const heap = call("vm.builtin.alloc_shape_heap", [ib.imm(1)]);
    ib.emit_call("vm.builtin.match_shape", [
      ib.r(0),
      heap,
      ib.imm(2),
      ib.imm(MatchShapeCode.StoreToHeap),
      ib.imm(0),
      ib.imm(MatchShapeCode.AssertEqualToImm),
      ib.imm(d),
      "encoder: x",
    ]);
    const { LoadShape, UseImm } = MakeShapeCode;
    const split = call("vm.builtin.make_shape", [
      heap,
      ib.imm(3),
      ib.imm(LoadShape),
      ib.imm(0),
      ib.imm(UseImm),
      ib.imm(heads),
      ib.imm(UseImm),
      ib.imm(hd),
    ]);
    const flat = call("vm.builtin.make_shape", [
      heap,
      ib.imm(2),
      ib.imm(LoadShape),
      ib.imm(0),
      ib.imm(UseImm),
      ib.imm(d),
    ]);
    const eps = ib.convert_constant(1e-5);
    const h = call("vm.op.layer_norm", [ib.r(0), p(0), p(1), eps]);
    const project = (w: number) =>
      call("vm.builtin.reshape", [call("vm.op.linear", [h, p(w), p(w + 1)]), split]);
    const q = project(2), k = project(4), v = project(6);
    const attended = call("vm.op.attention", [
      q,
      k,
      v,
      ib.imm(0),
      ib.convert_constant(1 / Math.sqrt(hd)),
      "BSHD",
    ]);
    const merged = call("vm.builtin.reshape", [attended, flat]);
    const x1 = call("vm.op.add", [ib.r(0), call("vm.op.linear", [merged, p(8), p(9)])]);
    const h2 = call("vm.op.layer_norm", [x1, p(10), p(11), eps]);
    const up = call("vm.op.gelu", [call("vm.op.linear", [h2, p(12), p(13)])]);
    ib.emit_ret(call("vm.op.add", [x1, call("vm.op.linear", [up, p(14), p(15)])]));
  });
  return ib.get();
}
