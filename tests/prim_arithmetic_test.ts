/**
 * `vm.prim.*`: scalar arithmetic and comparisons on prim values, for loops. The expected values
 * are Python's (`//`, `%`, `min`, `max`, `/`, which TIR's FloorDiv/FloorMod follow), computed by
 * `python3 -c 'print(a // b, a % b, min(a, b), max(a, b), a / b)'` for each pair below.
 */

import { assertEquals, assertRejects, assertStrictEquals, assertThrows } from "@std/assert";
import { ExecBuilder, getGlobalFunc, VirtualMachine } from "../mod.ts";

const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args);

// [a, b, a // b, a % b, min, max, a / b] from Python 3.11.
const PYTHON: [number | bigint, number | bigint, number | bigint, number | bigint, number][] = [
  [7, 2, 3, 1, 3.5],
  [-7, 2, -4, 1, -3.5],
  [7, -2, -4, -1, -3.5],
  [-7, -2, 3, -1, 3.5],
  [0, 3, 0, 0, 0],
  [6, 3, 2, 0, 2],
  [-6, 3, -2, 0, -2],
  [7.5, 2, 3, 1.5, 3.75],
  [-7.5, 2, -4, 0.5, -3.75],
  [7.5, -2.5, -3, -0, -3],
  [2n ** 60n + 1n, 7, 164703072086692425n, 2n, 1.647030720866924e+17],
  [-(2n ** 60n) - 1n, 7, -164703072086692426n, 5n, -1.647030720866924e+17],
];

Deno.test("vm.prim: floordiv, floormod, div, min, max as Python computes them", () => {
  for (const [a, b, floordiv, floormod, div] of PYTHON) {
    const what = `${a}, ${b}`;
    assertStrictEquals(call("vm.prim.floordiv", a, b), floordiv, `floordiv ${what}`);
    assertStrictEquals(call("vm.prim.floormod", a, b), floormod, `floormod ${what}`);
    assertStrictEquals(call("vm.prim.div", a, b), div, `div ${what}`);
    const big = typeof a === "bigint" || typeof b === "bigint";
    const [x, y] = big ? [BigInt(a), BigInt(b)] : [a, b];
    assertStrictEquals(call("vm.prim.min", a, b), x < y ? x : y, `min ${what}`);
    assertStrictEquals(call("vm.prim.max", a, b), x > y ? x : y, `max ${what}`);
    assertStrictEquals(call("vm.prim.add", a, b), big ? BigInt(a) + BigInt(b) : +a + +b);
    assertStrictEquals(call("vm.prim.sub", a, b), big ? BigInt(a) - BigInt(b) : +a - +b);
    assertStrictEquals(call("vm.prim.mul", a, b), big ? BigInt(a) * BigInt(b) : +a * +b);
  }
});

Deno.test("vm.prim: comparisons give booleans; NaN compares false except for ne", () => {
  const pairs: [unknown, unknown][] = [[1, 2], [2, 2], [3, 2], [2n, 2], [1.5, 1n], [NaN, 1]];
  for (const [a, b] of pairs) {
    const [x, y] = [a as number, b as number];
    assertEquals(
      ["lt", "le", "gt", "ge", "eq", "ne"].map((op) => call(`vm.prim.${op}`, a, b)),
      [x < y, x <= y, x > y, x >= y, x == y, x != y],
      `${a}, ${b}`,
    );
  }
  assertEquals(call("vm.prim.and", true, 2), true);
  assertEquals(call("vm.prim.and", 1, 0), false);
  assertEquals(call("vm.prim.or", false, 0n), false);
  assertEquals(call("vm.prim.or", 0, 3), true);
  assertEquals(call("vm.prim.not", 0), true);
});

Deno.test("vm.prim: wrong operands and integer division by zero are clear errors", () => {
  assertThrows(
    () => call("vm.prim.add", "1", 2),
    TypeError,
    "vm.prim.add: the first operand must be a number or bigint prim value, got string",
  );
  assertThrows(() => call("vm.prim.lt", 1, null), TypeError, "second operand");
  assertThrows(() => call("vm.prim.mul", 1.5, 2n), TypeError, "cannot meet a bigint");
  assertThrows(() => call("vm.prim.floordiv", 7, 0), RangeError, "integer division by zero");
  assertThrows(() => call("vm.prim.floormod", 7n, 0n), RangeError, "integer division by zero");
  assertEquals(call("vm.prim.floordiv", 7.5, 0), Infinity);
  assertThrows(() => call("vm.prim.not", "yes"), TypeError, "expected a boolean or number");
});

Deno.test("vm.prim: a loop summing 0..n-1 with If and Goto, no packed functions of its own", async () => {
  const ib = new ExecBuilder();
  ib.function("triangle", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(1) }); // 0: i = 0
    ib.emit_call("vm.builtin.copy", [ib.imm(0)], { dst: ib.r(2) }); // 1: sum = 0
    ib.emit_call("vm.prim.lt", [ib.r(1), ib.r(0)], { dst: ib.r(3) }); // 2: i < n?
    ib.emit_if(ib.r(3), 4); // 3: no: to 7
    ib.emit_call("vm.prim.add", [ib.r(2), ib.r(1)], { dst: ib.r(2) }); // 4: sum += i
    ib.emit_call("vm.prim.add", [ib.r(1), ib.imm(1)], { dst: ib.r(1) }); // 5: i += 1
    ib.emit_goto(-4); // 6: to 2
    ib.emit_ret(ib.r(2)); // 7
  });
  const vm = new VirtualMachine(ib.get());
  for (const n of [0, 1, 2, 10, 1000]) {
    assertEquals(await vm.invoke("triangle", n), (n * (n - 1)) / 2, `n = ${n}`);
  }
  await assertRejects(() => vm.invoke("triangle", "3"), Error, "vm.prim.lt");
  assertEquals(await vm.invoke("triangle", 3), 3, "the VM stays usable after the error");
});
