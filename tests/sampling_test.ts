// Sampling and logits processing (TVM lm_support.cc), with the reference
// vectors of the builtins specification (§4.8.7) and TVM's
// test_multinomial_from_uniform (tests/python/relax/test_vm_builtin.py).
import { assertAlmostEquals, assertEquals, assertThrows } from "@std/assert";
import { ExecBuilder, getGlobalFunc, type NDArray, tensor, VirtualMachine } from "../mod.ts";

const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args);

Deno.test("sample_top_p_from_logits: the reference vectors", () => {
  using logits = tensor([1, 2, 3, 4], { shape: [1, 4] });
  const cases: [number, number, number, number][] = [
    [0, 0.9, 0.5, 3],
    [1, 0.9, 0.0, 3],
    [1, 0.9, 0.5, 3],
    [1, 0.9, 0.7, 2],
    [1, 0.9, 0.99, 1],
    [1, 0.5, 0.9, 3],
    [1, 0.0, 0.99, 3],
    [2, 1.0, 0.5, 2],
  ];
  for (const [temperature, topP, u, want] of cases) {
    assertEquals(
      call("vm.builtin.sample_top_p_from_logits", logits, temperature, topP, u),
      want,
      `temperature ${temperature}, top_p ${topP}, u ${u}`,
    );
  }
});

Deno.test("sample_top_p_from_logits: ties go to the lower index; errors", () => {
  using tied = tensor([5, 1, 5]);
  assertEquals(call("vm.builtin.sample_top_p_from_logits", tied, 0, 0.9, 0.5), 0);
  using batch = tensor([1, 2, 3, 4], { shape: [2, 2] });
  assertThrows(
    () => call("vm.builtin.sample_top_p_from_logits", batch, 1, 0.9, 0.5),
    RangeError,
    "expected one row",
  );
  using ints = tensor([1, 2], { dtype: "int32" });
  assertThrows(
    () => call("vm.builtin.sample_top_p_from_logits", ints, 1, 0.9, 0.5),
    TypeError,
    "logits must be float32, got int32",
  );
  using logits = tensor([1, 2]);
  assertThrows(
    () => call("vm.builtin.sample_top_p_from_logits", logits, 1, 0.9, 1.5),
    RangeError,
    "beyond the distribution",
  );
  assertThrows(
    () => call("vm.builtin.sample_top_p_from_logits", logits, "1", 0.9, 0.5),
    TypeError,
    "temperature must be a number",
  );
});

Deno.test("sample_top_p_from_prob: the reference vectors", () => {
  using prob = tensor([0.1, 0.2, 0.3, 0.4]);
  const cases: [number, number, number][] = [
    [0.5, 0.3, 3],
    [0.5, 0.6, 3],
    [0.5, 0.9, 2],
    [0.9, 0.5, 2],
    [0.9, 0.8, 1],
    [0.9, 0.95, 1],
    [1.0, 0.05, 3],
    [1.0, 0.5, 2],
    [1.0, 0.95, 0],
    [0.0, 0.99, 3],
  ];
  for (const [topP, u, want] of cases) {
    assertEquals(
      call("vm.builtin.sample_top_p_from_prob", prob, topP, u),
      want,
      `top_p ${topP}, u ${u}`,
    );
  }
});

Deno.test("sample_top_p_from_prob: NaN probabilities are skipped; all NaN is an error", () => {
  using someNaN = tensor([NaN, 0.5, 0.5]);
  assertEquals(call("vm.builtin.sample_top_p_from_prob", someNaN, 0.9, 0.7), 2);
  using allNaN = tensor([NaN, NaN]);
  assertThrows(
    () => call("vm.builtin.sample_top_p_from_prob", allNaN, 0.9, 0.5),
    RangeError,
    "every probability is NaN",
  );
});

Deno.test("multinomial_from_uniform: the reference vectors, strict comparison", () => {
  const run = (p: number[][], u: number[]) => {
    using prob = tensor(p);
    using uniform = tensor(u.map((x) => [x]));
    const out = call("vm.builtin.multinomial_from_uniform", prob, uniform) as NDArray;
    assertEquals([out.dtype, out.shape], ["int64", [p.length, 1]]);
    const values = [...out.dataSync()].map(Number);
    out.releaseIfUnowned();
    return values;
  };
  assertEquals(
    run([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.5, 0.5, 0, 0]], [0.35, 0.0, 0.999]),
    [2, 0, 1],
  );
  assertEquals(run([[0.1, 0.2, 0.3, 0.4]], [1.0]), [3], "never exceeded: the last index");
  assertEquals(run([[0.1, 0.2, 0.3, 0.4]], [0.1]), [1], "0.1 is not > 0.1");
  assertEquals(run([[0, 0, 1, 0]], [0]), [2]);
  using prob = tensor([[0.5, 0.5]]);
  using wrong = tensor([[0.1], [0.2]]);
  assertThrows(
    () => call("vm.builtin.multinomial_from_uniform", prob, wrong),
    RangeError,
    "expected prob [batch, V] and uniform [batch, 1]",
  );
});

Deno.test("TVM test_multinomial_from_uniform: through a VM", async () => {
  const ib = new ExecBuilder();
  ib.function("foo", 2, () => {
    ib.emit_call("vm.builtin.multinomial_from_uniform", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  const rows = [[1, 2, 3, 4, 5], [0, 1, 1, 0, 2], [3, 3, 3, 3, 3]].map((r) => {
    const sum = r.reduce((a, b) => a + b);
    return r.map((x) => x / sum);
  });
  using x = tensor(rows);
  using y = tensor([[1.0], [0], [1]]);
  const vm = new VirtualMachine(ib.get());
  using out = await vm.invoke("foo", x, y) as NDArray;
  assertEquals([out.dtype, out.shape], ["int64", [3, 1]]);
  assertEquals(
    [...out.dataSync()],
    [4n, 1n, 4n],
    "u = 1: the last index; u = 0: the first positive",
  );
});

Deno.test("apply_repetition_penalty: in place, repeated ids penalized again", () => {
  using logits = tensor([2.0, -1.0, 0.0, 4.0]);
  using ids = tensor([0, 1, 0, 2], { dtype: "int32" });
  assertEquals(call("vm.builtin.apply_repetition_penalty", logits, ids, 2), null);
  assertEquals([...logits.dataSync()], [0.5, -2.0, 0.0, 4.0]);
  using bad = tensor([7], { dtype: "int32" });
  assertThrows(
    () => call("vm.builtin.apply_repetition_penalty", logits, bad, 2),
    RangeError,
    "token id 7 is outside the 4 logits",
  );
  using floats = tensor([0]);
  assertThrows(
    () => call("vm.builtin.apply_repetition_penalty", logits, floats, 2),
    TypeError,
    "token_ids must be int32, got float32",
  );
});

Deno.test("apply_presence_and_frequency_penalty: OpenAI's definition, in place", () => {
  using logits = tensor([1, 1, 1]);
  using ids = tensor([0, 2], { dtype: "int32" });
  using freqs = tensor([3, 1], { dtype: "int32" });
  call("vm.builtin.apply_presence_and_frequency_penalty", logits, ids, freqs, 0.5, 0.25);
  assertEquals([...logits.dataSync()], [-0.25, 1, 0.25]);
  using few = tensor([1], { dtype: "int32" });
  assertThrows(
    () => call("vm.builtin.apply_presence_and_frequency_penalty", logits, ids, few, 0.5, 0.25),
    RangeError,
    "2 token ids but 1 frequencies",
  );
});

Deno.test("apply_softmax_with_temperature: TVM's values, and exact for very negative logits", () => {
  const softmax = (values: number[], temperature: number) => {
    using t = tensor(values);
    call("vm.builtin.apply_softmax_with_temperature", t, temperature);
    return [...t.dataSync() as Float32Array];
  };
  const close = (actual: number[], expected: number[]) =>
    expected.forEach((e, i) => assertAlmostEquals(actual[i], e, 1e-7));
  close(softmax([1, 2, 3], 1), [0.09003057, 0.24472846, 0.66524094]);
  close(softmax([1, 2, 3], 0.5), [0.015876241, 0.11731043, 0.86681336]);
  close(softmax([-1, -2, -3], 1), [0.66524094, 0.24472848, 0.09003057]);
  // TVM starts its running maximum at FLT_MIN and loses these; relaxvm does not.
  close(softmax([-100, -101, -102], 1), [0.66524094, 0.24472848, 0.09003057]);
  close(softmax([-200, -201], 1), [0.7310586, 0.26894143]);
  // Every row of a batch.
  using batch = tensor([[1, 2, 3], [-1, -2, -3]]);
  call("vm.builtin.apply_softmax_with_temperature", batch, 1);
  close([...batch.dataSync() as Float32Array], [
    0.09003057,
    0.24472846,
    0.66524094,
    0.66524094,
    0.24472848,
    0.09003057,
  ]);
});
