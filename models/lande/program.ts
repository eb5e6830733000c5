/**
 * lande's network as a Relax VM program: `buildLande()` returns an
 * executable with `load_params(url, device_type, device_id)` (the tensor
 * cache `tools/fetch_lande.ts` writes) and `classify(x: float32[B, 620],
 * params) → float32[B, 50]`, the probability of each language:
 * `softmax(linear(relu(linear(x, w1, b1)), w2, b2))`. Any batch size.
 *
 * @module
 */

import { ExecBuilder, type Executable } from "../../mod.ts";

/** Builds the classifier. */
export function buildLande(): Executable {
  const ib = new ExecBuilder();
  ib.function(
    "load_params",
    { num_inputs: 3, param_names: ["url", "device_type", "device_id"] },
    () => {
      ib.emit_call("vm.builtin.tensor_cache.load", [ib.r(0), ib.r(1), ib.r(2)]);
      ib.emit_call("vm.builtin.param_array_from_cache", ["param", ib.imm(4)], { dst: ib.r(3) });
      ib.emit_ret(ib.r(3));
    },
  );
  ib.function("classify", { num_inputs: 2, param_names: ["x", "params"] }, () => {
    const [x, params] = [ib.r(0), ib.r(1)];
    for (let i = 0; i < 4; i++) {
      ib.emit_call("vm.builtin.tuple_getitem", [params, ib.imm(i)], { dst: ib.r(2 + i) });
    }
    ib.emit_call("vm.op.linear", [x, ib.r(2), ib.r(3)], { dst: ib.r(6) });
    ib.emit_call("vm.op.relu", [ib.r(6)], { dst: ib.r(7) });
    ib.emit_call("vm.op.linear", [ib.r(7), ib.r(4), ib.r(5)], { dst: ib.r(8) });
    ib.emit_call("vm.op.softmax", [ib.r(8)], { dst: ib.r(9) });
    ib.emit_ret(ib.r(9));
  });
  return ib.get();
}
