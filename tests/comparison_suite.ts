/**
 * The comparison operators, the logical operators and `vm.op.where`
 * (builtins/predicates/compare_operators.ts) on one device, against plain
 * JavaScript: every comparison on float32 (NaN included), int32 and bool,
 * with broadcasting both ways; the logical ops on bools; `where` with a
 * broadcast condition; and the argument errors. Run on the CPU by
 * tests/comparison_operators_test.ts and on WebGPU by
 * tests/webgpu/comparison_suite.ts.
 *
 * @module
 */

import { assertEquals, assertThrows } from "@std/assert";
import type { Device } from "../devices/device.ts";
import { getGlobalFunc, type NDArray, tensor, type TensorDType } from "../mod.ts";

type Register = (name: string, fn: () => Promise<void>) => void;

const TESTS: Record<string, (a: number, b: number) => boolean> = {
  equal: (a, b) => a === b,
  not_equal: (a, b) => a !== b,
  less: (a, b) => a < b,
  less_equal: (a, b) => a <= b,
  greater: (a, b) => a > b,
  greater_equal: (a, b) => a >= b,
};

/** Registers the suite for `deviceName`. */
export function defineComparisonTests(
  deviceName: string,
  getDevice: () => Promise<Device>,
  register: Register = (name, fn) => Deno.test(name, fn),
): void {
  const test = (name: string, fn: (dev: Device) => Promise<void>) =>
    register(`${deviceName}: ${name}`, async () => await fn(await getDevice()));
  const put = (dev: Device, data: number[], shape: number[], dtype: TensorDType) =>
    tensor(data, { shape, dtype, device: dev });
  const run = async (name: string, ...args: unknown[]) => {
    const out = getGlobalFunc(name)!(...args) as NDArray;
    try {
      return { dtype: out.dtype, shape: [...out.shape], data: [...await out.data()].map(Number) };
    } finally {
      out.dispose();
    }
  };

  test("comparisons: float32 with NaN, int32 and bool, broadcast both ways", async (dev) => {
    const a = [1, 2, NaN, -3, 0, 2], b = [2, NaN, -3];
    const cases: [TensorDType, number[], number[]][] = [
      ["float32", a, b],
      ["int32", [1, 2, 7, -3, 0, 2], [2, 7, -3]],
      ["bool", [1, 0, 1, 0, 0, 1], [0, 1, 1]],
    ];
    for (const [dt, xs, ys] of cases) {
      using x = put(dev, xs, [2, 3], dt);
      using y = put(dev, ys, [3], dt);
      for (const [op, f] of Object.entries(TESTS)) {
        const got = await run(`vm.op.${op}`, x, y);
        assertEquals(got.dtype, "bool");
        assertEquals(got.shape, [2, 3]);
        assertEquals(got.data, xs.map((v, i) => f(v, ys[i % 3]) ? 1 : 0), `${op} ${dt}`);
        const back = await run(`vm.op.${op}`, y, x);
        assertEquals(back.data, xs.map((v, i) => f(ys[i % 3], v) ? 1 : 0), `${op} ${dt} swapped`);
      }
    }
  });

  test("logical and, or, xor, not on bools", async (dev) => {
    using x = put(dev, [0, 0, 1, 1], [4], "bool");
    using y = put(dev, [0, 1, 0, 1], [4], "bool");
    assertEquals((await run("vm.op.logical_and", x, y)).data, [0, 0, 0, 1]);
    assertEquals((await run("vm.op.logical_or", x, y)).data, [0, 1, 1, 1]);
    assertEquals((await run("vm.op.logical_xor", x, y)).data, [0, 1, 1, 0]);
    assertEquals((await run("vm.op.logical_not", x)).data, [1, 1, 0, 0]);
  });

  test("where broadcasts the condition and both branches", async (dev) => {
    using c = put(dev, [1, 0, 1], [3], "bool");
    using x = put(dev, [10, 20, 30, 40, 50, 60], [2, 3], "float32");
    using y = put(dev, [-1, -2], [2, 1], "float32");
    const got = await run("vm.op.where", c, x, y);
    assertEquals(got.shape, [2, 3]);
    assertEquals(got.data, [10, -1, 30, 40, -2, 60]);
    using xi = put(dev, [1, 2, 3], [3], "int32");
    using yi = put(dev, [7], [1], "int32");
    assertEquals((await run("vm.op.where", c, xi, yi)).data, [1, 7, 3]);
    using xb = put(dev, [0, 0, 0], [3], "bool");
    using yb = put(dev, [1], [1], "bool");
    assertEquals((await run("vm.op.where", c, xb, yb)).data, [0, 1, 0]);
  });

  test("argument errors name the operator", async (dev) => {
    using f = put(dev, [1, 2], [2], "float32");
    using i = put(dev, [1, 2], [2], "int32");
    using three = put(dev, [1, 2, 3], [3], "float32");
    assertThrows(() => getGlobalFunc("vm.op.less")!(f, i), TypeError, "vm.op.less: dtypes");
    assertThrows(() => getGlobalFunc("vm.op.equal")!(f, three), RangeError, "do not broadcast");
    assertThrows(() => getGlobalFunc("vm.op.logical_and")!(f, f), TypeError, "expected bool");
    assertThrows(() => getGlobalFunc("vm.op.where")!(f, f, f), TypeError, "cond has dtype float32");
    await Promise.resolve();
  });
}
