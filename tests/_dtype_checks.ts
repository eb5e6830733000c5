/**
 * Checks of the int64, float16 and bfloat16 dtypes shared by the CPU tests
 * (`dtypes_test.ts`) and the WebGPU suite (`webgpu/dtypes_suite.ts`): values
 * in and out of tensors, casts against the builtins specification's
 * reference vectors (§7), copies between devices, and what each device
 * computes on them. Each takes the device under test.
 *
 * @module
 */

import { assert, assertEquals, assertThrows } from "@std/assert";
import {
  cpu,
  type Device,
  ExecBuilder,
  getGlobalFunc,
  type NDArray,
  tensor,
  TENSOR_DTYPES,
  VirtualMachine,
} from "../mod.ts";

const call = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args) as NDArray;
const fromBits = (b: number) => new Float32Array(new Uint32Array([b]).buffer)[0];

/** A cast's result as plain values, read from any device; the result is released. */
async function castValues(x: NDArray, to: string): Promise<unknown[]> {
  const out = call("vm.op.cast", x, to);
  try {
    assertEquals([out.dtype, out.device, out.shape], [to, x.device, x.shape]);
    return [...await out.data()];
  } finally {
    out.releaseIfUnowned();
  }
}

/** The stored bits of a 16-bit tensor, read from any device. */
async function bits16(t: NDArray): Promise<number[]> {
  const bytes = await t.device.readBlock(t.block, t.byteOffset, t.nbytes);
  return [...new Uint16Array(bytes.slice().buffer)];
}

/** int64 values in and out of a tensor: exact beyond 2^53, numbers and bigints alike. */
export async function checkInt64Values(device: Device): Promise<void> {
  const values = [0n, -1n, 2n ** 53n + 1n, -(2n ** 63n), 2n ** 63n - 1n];
  using t = tensor(values, { device });
  assertEquals(t.dtype, "int64");
  const back = await t.data();
  assert(back instanceof BigInt64Array, "data() is a BigInt64Array");
  assertEquals([...back], values);
  using fromNumbers = tensor([3, -4, 2 ** 60], { dtype: "int64", device });
  assertEquals([...await fromNumbers.data()], [3n, -4n, 2n ** 60n]);
  assertThrows(() => tensor([1.5], { dtype: "int64", device }), RangeError, "not an int64 value");
  assertThrows(() => tensor([2n ** 63n], { device }), RangeError, "not an int64 value");
}

/** float16 and bfloat16 values: rounded to nearest even on the way in, exact on the way out. */
export async function checkHalfValues(device: Device): Promise<void> {
  using h = tensor([1, 65504, 65520, 0.1, 1 / 3, 5.96e-8, NaN, -Infinity, -0], {
    dtype: "float16",
    device,
  });
  assertEquals(await bits16(h), [
    0x3c00,
    0x7bff,
    0x7c00,
    0x2e66,
    0x3555,
    0x0001,
    0x7e00,
    0xfc00,
    0x8000,
  ]);
  const hv = [...await h.data()];
  assertEquals(hv.slice(0, 2), [1, 65504]);
  assertEquals(hv[3], 0.0999755859375);
  assert(Number.isNaN(hv[6]) && Object.is(hv[8], -0));
  using b = tensor([1, fromBits(0x3f808000), fromBits(0x3f818000), Math.PI, -2.5, 0.1, NaN], {
    dtype: "bfloat16",
    device,
  });
  assertEquals(await bits16(b), [0x3f80, 0x3f80, 0x3f82, 0x4049, 0xc020, 0x3dcd, 0x7fc0]);
  const bv = await b.data();
  assert(bv instanceof Float32Array, "bfloat16 data() is a Float32Array of the values");
  assertEquals([...bv].slice(0, 6), [1, 1, 1.015625, 3.140625, -2.5, 0.10009765625]);
}

/** Casts to and from the new dtypes, against the specification's reference values. */
export async function checkCasts(device: Device): Promise<void> {
  using big = tensor([16777217n, 2n ** 53n + 1n, -(2n ** 63n), 2n ** 60n + 2n ** 36n + 1n, -1n], {
    device,
  });
  assertEquals(await castValues(big, "float32"), [
    16777216,
    9007199254740992,
    -9223372036854775808,
    2 ** 60 + 2 ** 37, // rounded once from the integer (through a double it would be 2^60)
    -1,
  ]);
  assertEquals(await castValues(big, "float64"), [
    16777217,
    9007199254740992,
    -9223372036854775808,
    2 ** 60 + 2 ** 36,
    -1,
  ]);
  assertEquals(await castValues(big, "int32"), [16777217, 1, 0, 1, -1], "wraps");
  assertEquals(await castValues(big, "uint8"), [1, 1, 0, 1, 255]);
  assertEquals(await castValues(big, "bool"), [1, 1, 1, 1, 1]);
  using floats = tensor([1.5, -1.5, 9.3e18, -9.3e18, NaN, Infinity, -0, 3e9], { device });
  assertEquals(await castValues(floats, "int64"), [
    1n,
    -1n,
    2n ** 63n - 1n,
    -(2n ** 63n),
    0n,
    2n ** 63n - 1n,
    0n,
    3000000000n,
  ]);
  using doubles = tensor([2.5e18, -7.9, 1e300], { dtype: "float64", device });
  assertEquals(await castValues(doubles, "int64"), [2500000000000000000n, -7n, 2n ** 63n - 1n]);
  using ints = tensor([-5, 7], { dtype: "int32", device });
  assertEquals(await castValues(ints, "int64"), [-5n, 7n]);
  using unsigned = tensor([4294967295], { dtype: "uint32", device });
  assertEquals(await castValues(unsigned, "int64"), [4294967295n]);
  // float32 → float16 / bfloat16 round to nearest even; back is exact.
  using f = tensor([65519, 65520, 2.9802322387695312e-8, 2.9802326e-8, fromBits(0x7f7fffff)], {
    device,
  });
  const half = call("vm.op.cast", f, "float16");
  assertEquals(await bits16(half), [0x7bff, 0x7c00, 0x0000, 0x0001, 0x7c00]);
  assertEquals(await castValues(half, "float32"), [
    65504,
    Infinity,
    0,
    5.960464477539063e-8,
    Infinity,
  ]);
  half.releaseIfUnowned();
  const bf = call("vm.op.cast", f, "bfloat16");
  assertEquals(await bits16(bf), [0x4780, 0x4780, 0x3300, 0x3300, 0x7f80]);
  bf.releaseIfUnowned();
  using h = tensor([0.5, -2, 70000], { dtype: "float16", device });
  assertEquals(await castValues(h, "int64"), [0n, -2n, 2n ** 63n - 1n], "infinity saturates");
  assertEquals(await castValues(h, "bfloat16"), [0.5, -2, Infinity]);
  using b = tensor([3.140625, -0, 300], { dtype: "bfloat16", device });
  assertEquals(await castValues(b, "float16"), [3.140625, -0, 300]);
  assertEquals(await castValues(b, "int32"), [3, 0, 300]);
  assertEquals(await castValues(b, "float64"), [3.140625, -0, 300]);
}

/** On a GPU: every pair of dtypes casts bit for bit as the CPU does. */
export async function checkCastsMatchCpu(device: Device): Promise<void> {
  const dtypes = TENSOR_DTYPES;
  const floats = [0, -0, 1, -2.5, 3.7, 255.9, -129, 65519, 65520, 16777217, 3e9, -3e9, 9.3e18];
  floats.push(1e30, Infinity, -Infinity, NaN, 1e-40, 2.98e-8, 0.1, fromBits(0x3f818000));
  const ints = [0n, -1n, 128n, -129n, 65536n, 2147483647n, -2147483648n, 4294967296n];
  ints.push(16777219n, 2n ** 53n + 1n, -(2n ** 63n), 2n ** 63n - 1n, 2n ** 40n + 2n ** 16n + 1n);
  const mismatches: string[] = [];
  for (const from of dtypes) {
    using onCpu = from === "int64"
      ? tensor(ints)
      : from === "bool"
      ? tensor(floats.map((v) => v !== 0), { dtype: "bool" })
      : tensor(from.includes("float") ? floats : floats.filter(Number.isFinite).map(Math.trunc), {
        dtype: from,
      });
    using onDevice = await onCpu.copyTo(device);
    for (const to of dtypes) {
      const want = call("vm.op.cast", onCpu, to), got = call("vm.op.cast", onDevice, to);
      const a = await cpu().readBlock(want.block, want.byteOffset, want.nbytes);
      const b = await device.readBlock(got.block, got.byteOffset, got.nbytes);
      if (a.length !== b.length || a.some((x, i) => x !== b[i])) mismatches.push(`${from}→${to}`);
      want.releaseIfUnowned();
      got.releaseIfUnowned();
    }
  }
  assertEquals(mismatches, [], "pairs whose bits differ from the CPU's");
}

/** Tensors of every new dtype copy between devices and transpose unchanged. */
export async function checkCopies(device: Device): Promise<void> {
  using i = tensor([[1n, 2n ** 62n], [-3n, 4n]]);
  using h = tensor([[1, 2], [3, 0.5]], { dtype: "float16" });
  using b = tensor([[1, 2], [3, 0.5]], { dtype: "bfloat16" });
  for (const t of [i, h, b]) {
    using there = await t.copyTo(device);
    using back = await there.copyTo(cpu());
    assertEquals([...back.dataSync()], [...t.dataSync()], `${t.dtype} round trip`);
    const ib = new ExecBuilder();
    ib.function("f", 1, () => {
      ib.emit_call("vm.builtin.to_device", [ib.r(0), ib.imm(device.deviceType), ib.imm(0)], {
        dst: ib.r(1),
      });
      ib.emit_call("vm.op.transpose", [ib.r(1)], { dst: ib.r(2) });
      ib.emit_ret(ib.r(2));
    });
    using moved = await new VirtualMachine(ib.get(), [cpu(), device]).invoke("f", t) as NDArray;
    assertEquals(moved.device, device);
    const v = [...t.dataSync()];
    assertEquals([...await moved.data()], [v[0], v[2], v[1], v[3]], `${t.dtype} transposed`);
  }
}

/** int64 arithmetic where it runs (the CPU), and the error that names op and dtype elsewhere. */
export async function checkInt64Arithmetic(device: Device): Promise<void> {
  using a = tensor([2n ** 62n, -7n, 7n, 2n ** 63n - 1n], { device });
  using b = tensor([2n ** 62n, 2n, -2n, 1n], { device });
  if (device.kind !== "cpu") {
    for (const op of ["add", "maximum", "negative", "sum"]) {
      const args = op === "negative" || op === "sum" ? [a] : [a, b];
      assertThrows(
        () => call(`vm.op.${op}`, ...args),
        TypeError,
        `vm.op.${op}: int64 arithmetic is not available on ${device}: WGSL has no 64-bit integers`,
      );
    }
    return;
  }
  const run = async (op: string, ...args: unknown[]) => {
    const out = call(`vm.op.${op}`, ...args);
    try {
      assertEquals(out.dtype, "int64");
      return [...await out.data()];
    } finally {
      out.releaseIfUnowned();
    }
  };
  assertEquals(await run("add", a, b), [-(2n ** 63n), -5n, 5n, -(2n ** 63n)], "wraps");
  assertEquals(await run("subtract", a, b), [0n, -9n, 9n, 2n ** 63n - 2n]);
  assertEquals(await run("multiply", a, b), [0n, -14n, -14n, 2n ** 63n - 1n]);
  assertEquals(await run("divide", a, b), [1n, -3n, -3n, 2n ** 63n - 1n], "truncates");
  assertEquals(await run("maximum", a, b), [2n ** 62n, 2n, 7n, 2n ** 63n - 1n]);
  assertEquals(await run("minimum", a, b), [2n ** 62n, -7n, -2n, 1n]);
  assertEquals(await run("negative", a), [-(2n ** 62n), 7n, -7n, -(2n ** 63n) + 1n]);
  assertEquals(await run("relu", a), [2n ** 62n, 0n, 7n, 2n ** 63n - 1n]);
  using zero = tensor([0n]);
  using min = tensor([-(2n ** 63n)]);
  using minusOne = tensor([-1n]);
  assertEquals(await run("divide", a, zero), await run("add", a, zero), "x / 0 is x");
  assertEquals(await run("divide", min, minusOne), [-(2n ** 63n)], "-2^63 / -1 wraps");
  // Broadcasting and reductions.
  using m = tensor([[1n, 2n, 3n], [4n, 5n, 6n]]);
  using row = tensor([10n, 20n, 30n]);
  assertEquals(await run("add", m, row), [11n, 22n, 33n, 14n, 25n, 36n]);
  assertEquals(await run("sum", m), [21n]);
  assertEquals(await run("sum", m, [0]), [5n, 7n, 9n]);
  assertEquals(await run("max", m, [1]), [3n, 6n]);
  using edge = tensor([2n ** 63n - 1n, 1n]);
  assertEquals(await run("sum", edge), [-(2n ** 63n)], "sum wraps");
  assertThrows(() => call("vm.op.exp", a), TypeError, "has dtype int64, expected float32");
  assertThrows(() => call("vm.op.mean", a), TypeError, "has dtype int64, expected float32");
  using i32 = tensor([1], { dtype: "int32" });
  assertThrows(() => call("vm.op.add", a, i32), TypeError, "differ");
}

/** float16 and bfloat16 operands: a clear error that says to cast to float32 first. */
export function checkHalfArithmetic(device: Device): void {
  using h = tensor([1, 2], { dtype: "float16", device });
  using b = tensor([1, 2], { dtype: "bfloat16", device });
  const shaderNote = device.kind === "webgpu"
    ? ((device as { shaderF16?: boolean }).shaderF16
      ? "offers shader-f16"
      : "does not offer shader-f16")
    : "vm.op.cast first)";
  for (const [op, t] of [["add", h], ["exp", b], ["matmul", h], ["sum", b]] as const) {
    const args = op === "add" || op === "matmul" ? [t, t] : [t];
    const e = assertThrows(() => call(`vm.op.${op}`, ...args), TypeError);
    assert(
      e.message.includes(`vm.op.${op}: a has dtype ${t.dtype}`) ||
        e.message.includes(`vm.op.${op}: x has dtype ${t.dtype}`),
      e.message,
    );
    assert(
      e.message.includes(`compute ${t.dtype} tensors as float32: cast them with vm.op.cast first`),
      e.message,
    );
    assert(e.message.includes(shaderNote), e.message);
  }
}
