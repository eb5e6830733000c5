/**
 * `time_evaluator` runs a function many times and frees each result, but never an argument
 * the function returns (found by the playground: timing an identity function freed the user's
 * tensor after the first run).
 */

import { assertEquals } from "@std/assert";
import { ExecBuilder, type NDArray, tensor, VirtualMachine } from "../mod.ts";

Deno.test("time_evaluator: a function that returns its argument leaves it to the caller", async () => {
  const ib = new ExecBuilder();
  ib.function("id", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
  ib.function("neg", { num_inputs: 1 }, () => {
    ib.emit_call("vm.op.negative", [ib.r(0)], { dst: ib.r(1) });
    ib.emit_ret(ib.r(1));
  });
  const vm = new VirtualMachine(ib.get());
  using x = tensor([1, 2]);
  const timed = await vm.time_evaluator("id", { number: 2, repeat: 3 })(x);
  assertEquals(timed.results.length, 3);
  assertEquals(x.disposed, false);
  assertEquals([...x.dataSync()], [1, 2]);
  // A new result per run is still freed: nothing stays live after the timed runs.
  await vm.time_evaluator("neg", { number: 2, repeat: 3 })(x);
  assertEquals(vm.memory_stats().liveBytes, 0);
  using y = await vm.invoke("neg", x) as NDArray;
  assertEquals([...y.dataSync()], [-1, -2]);
});
