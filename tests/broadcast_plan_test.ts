/**
 * The broadcast plan cache (kernels/broadcast.ts `broadcastPlan`) and the
 * operators that use it: a cached plan is only ever returned for the shapes
 * it was made for, whatever the callers do with their arrays and however
 * many shape pairs go through.
 */

import { assert, assertEquals, assertNotStrictEquals, assertStrictEquals } from "@std/assert";
import {
  broadcastPlan,
  broadcastStrides,
  collapseDims,
  sameShape,
  tryBroadcastShapes,
} from "../kernels/broadcast.ts";
import { ExecBuilder, type NDArray, tensor, VirtualMachine } from "../mod.ts";

/** What a plan for `a`, `b` must hold, computed without the cache. */
function expectedPlan(a: number[], b: number[]) {
  const shape = tryBroadcastShapes(a, b)!;
  return {
    shape,
    size: shape.reduce((x, y) => x * y, 1),
    walk: collapseDims(shape, [broadcastStrides(a, shape), broadcastStrides(b, shape)]),
  };
}

function assertPlan(a: number[], b: number[]) {
  const plan = broadcastPlan(a, b);
  if (plan === undefined) throw new Error(`[${a}] and [${b}] should broadcast`);
  assertEquals({ shape: plan.shape, size: plan.size, walk: plan.walk }, expectedPlan(a, b));
  assertEquals([plan.a, plan.b], [a, b]);
}

Deno.test("broadcastPlan: the same shapes give the same (cached) plan, equal shapes too", () => {
  const plan = broadcastPlan([7, 1, 5], [3, 1])!;
  assertStrictEquals(broadcastPlan([7, 1, 5], [3, 1]), plan, "new arrays, equal shapes");
  assertStrictEquals(broadcastPlan(plan.a, plan.b), plan, "the frozen keys themselves");
  assertEquals(plan.shape, [7, 3, 5]);
  assert(Object.isFrozen(plan.shape) && Object.isFrozen(plan.walk.shape));
  assert(plan.walk.strides.every(Object.isFrozen));
});

Deno.test("broadcastPlan: different shapes never get another pair's plan", () => {
  const pairs: [number[], number[]][] = [
    [[2, 3], [3]],
    [[2, 3], [1]],
    [[3], [2, 3]],
    [[2, 1], [1, 3]],
    [[2, 3], [2, 1]],
    [[1, 2, 3], [3]],
    [[], [4]],
    [[4], []],
  ];
  for (let round = 0; round < 3; round++) {
    for (const [a, b] of pairs) assertPlan(a, b);
  }
  assertEquals(broadcastPlan([2, 3], [4]), undefined);
  assertEquals(broadcastPlan([2, 3], [2]), undefined, "a failure is not cached as a success");
});

Deno.test("broadcastPlan: mutating the caller's array after planning cannot return a stale plan", () => {
  const a = [6, 1], b = [1, 4];
  const first = broadcastPlan(a, b)!;
  assertEquals(first.shape, [6, 4]);
  a[0] = 2; // the same array object, now [2, 1]
  b[1] = 5;
  const second = broadcastPlan(a, b)!;
  assertNotStrictEquals(second, first);
  assertEquals(second.shape, [2, 5]);
  assertEquals(first.shape, [6, 4], "the old plan is unchanged");
  assertEquals(first.a, [6, 1], "its key is its own frozen copy");
});

Deno.test("broadcastPlan: more shape pairs than the cache holds are all planned correctly", () => {
  for (let round = 0; round < 2; round++) {
    for (let n = 1; n <= 40; n++) assertPlan([n, 1], [1, n + 1]);
  }
});

Deno.test("sameShape compares dimensions, not identity", () => {
  assert(sameShape([2, 3], [2, 3]));
  assert(sameShape([], []));
  assert(!sameShape([2, 3], [3, 2]));
  assert(!sameShape([2, 3], [2, 3, 1]));
});

Deno.test("operators: one VM function alternating shapes at the same instruction stays correct", async () => {
  // r2 = add(r0, r1) then multiply(r2, r1): run with three shape pairs in turn, twice each.
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 2 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("vm.op.multiply", [ib.r(2), ib.r(1)], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  const vm = new VirtualMachine(ib.get());
  const cases = [
    { a: [[1, 2, 3], [4, 5, 6]], b: [10, 20, 30], want: [[110, 440, 990], [140, 500, 1080]] },
    { a: [[1], [2]], b: [[1, 2, 3]], want: [[2, 6, 12], [3, 8, 15]] },
    { a: [1, 2, 3], b: [2, 2, 2], want: [6, 8, 10] },
  ];
  for (let round = 0; round < 2; round++) {
    for (const c of cases) {
      using a = tensor(c.a), b = tensor(c.b);
      using out = await vm.invoke("main", a, b) as NDArray;
      const want = tensor(c.want);
      assertEquals(out.shape, want.shape);
      assertEquals(out.dataSync(), want.dataSync());
      want.dispose();
    }
  }
  assertEquals(vm.memory_stats().liveBytes, 0);
});

Deno.test("operators: a same-shape result shares its operand's frozen shape, which stays immutable", async () => {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 2 }, () => {
    ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_call("vm.op.exp", [ib.r(2)], { dst: ib.r(3) });
    ib.emit_ret(ib.r(3));
  });
  const vm = new VirtualMachine(ib.get());
  using a = tensor([[1, 2], [3, 4]]), b = tensor([[0, 0], [0, 0]]);
  using out = await vm.invoke("main", a, b) as NDArray;
  assertStrictEquals(out.shape, a.shape);
  assert(Object.isFrozen(out.shape));
  assertEquals(out.shape, [2, 2]);
});
