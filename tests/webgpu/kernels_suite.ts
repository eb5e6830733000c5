/**
 * WebGPU kernel paths the shared operator suite does not reach: dispatches
 * beyond 65535 workgroups, tensors at offsets inside a shared buffer, outputs
 * sharing a buffer with an input, the multi-pass and workgroup variants of
 * reductions, softmax and layer norm, both matmul variants, conversions at
 * the edges of float64/float32, and the caches. Expected values are plain
 * JavaScript.
 *
 * @module
 */

import { installBuiltins } from "../../builtins/install.ts";
import { assert, assertAlmostEquals, assertEquals, assertThrows } from "@std/assert";
import { backendFor } from "../../kernels/kernel_backend.ts";
import { getGlobalFunc } from "../../ground/registry.ts";
import { NDArray } from "../../devices/ndarray.ts";
import { tensor } from "../../devices/tensor.ts";
import { shape } from "../../ground/shape_tuple.ts";
import { kernelContext, type WebGPUDevice } from "../../devices/webgpu/webgpu_device.ts";
import { gpuTest } from "./suite_registry.ts";
import { ExecBuilder } from "../../builder/exec_builder.ts";
import { VirtualMachine } from "../../vm/virtual_machine.ts";
import { runProgram } from "../../devices/webgpu/kernel_program.ts";
import { elementwiseProgram } from "../../kernels/webgpu/elementwise_program.ts";
import { binaryFn } from "../../kernels/webgpu/elementwise_ops.ts";
import { attentionPerThread, attentionProgram } from "../../kernels/webgpu/attention.ts";
import { refAttention } from "../_operator_reference.ts";
import { attentionGeometry } from "../../kernels/attention_layout.ts";

installBuiltins();

const be = () => backendFor("webgpu");

/** Calls `vm.op.<name>` and returns the result's elements as numbers. */
async function op(name: string, ...args: unknown[]): Promise<number[]> {
  const out = getGlobalFunc(`vm.op.${name}`)!(...args) as NDArray;
  try {
    return Array.from(await out.data() as ArrayLike<number>);
  } finally {
    out.releaseIfUnowned();
  }
}

function assertClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol = 1e-4): void {
  assertEquals(actual.length, expected.length, "length");
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i], e = expected[i];
    if (Number.isNaN(e) && Number.isNaN(a)) continue;
    assert(Math.abs(a - e) <= tol * (1 + Math.abs(e)), `element ${i}: ${a}, expected ${e}`);
  }
}

/** Views `shape` of `dtype` at `byteOffset` in a shared storage (as `alloc_tensor` makes them). */
function view(base: NDArray, byteOffset: number, dims: number[], dtype = base.dtype): NDArray {
  return new NDArray(base.storage, byteOffset, dims, dtype);
}

function refMatmul(
  a: Float32Array,
  b: Float32Array,
  M: number,
  K: number,
  N: number,
): Float64Array {
  const out = new Float64Array(M * N);
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += a[m * K + k] * b[k * N + n];
      out[m * N + n] = s;
    }
  }
  return out;
}

function ramp(n: number, scale = 1, mod = 13): Float32Array {
  return new Float32Array(n).map((_, i) => ((i * 7) % mod) * scale - (mod * scale) / 2);
}

gpuTest("elementwise kernels launch more than 65535 workgroups in two dimensions", async (gpu) => {
  const n = 64 * 65535 + 3; // odd: the one-element-per-thread variant, 65536 workgroups
  using a = tensor(ramp(n), { device: gpu });
  using b = tensor(new Float32Array([0.5]), { device: gpu });
  const got = await op("add", a, b);
  const src = ramp(n);
  for (const i of [0, 1, 64 * 65535 - 1, 64 * 65535, n - 1]) {
    assertEquals(got[i], src[i] + 0.5, `element ${i}`);
  }
  assert(got.every((v, i) => v === src[i] + 0.5));
  // Strided variant: [n/2, 2] + [2] broadcasts along the last axis.
  const m = 64 * 65536;
  using c = tensor(new Float32Array(m).fill(1), { shape: [m / 2, 2], device: gpu });
  using d = tensor([10, 20], { device: gpu });
  const got2 = await op("add", c, d);
  assertEquals([got2[0], got2[1], got2[m - 2], got2[m - 1]], [11, 21, 11, 21]);
});

gpuTest("kernels read and write tensors at offsets inside a shared buffer", async (gpu) => {
  const base = NDArray.empty([64], "float32", gpu);
  try {
    const a = view(base, 4, [3, 4]); // element offset 1: not vec4-aligned
    const b = view(base, 64, [4]);
    const out = view(base, 128, [3, 4]);
    gpu.writeBlock(
      base.storage.block,
      0,
      new Uint8Array(new Float32Array(64).map((_, i) => i).buffer),
    );
    be().binary("multiply", a, b, out);
    const want = Array.from({ length: 12 }, (_, i) => (1 + i) * (16 + (i % 4)));
    assertEquals(Array.from(await out.data() as Float32Array), want);
    // The output shares a buffer with its inputs: computed via a temporary, inputs intact.
    be().unary("negative", a, out);
    assertEquals(Array.from(await out.data() as Float32Array), want.map((_, i) => -(1 + i)));
    assertEquals(Array.from(await a.data() as Float32Array), want.map((_, i) => 1 + i));
    for (const t of [a, b, out]) t.releaseIfUnowned();
  } finally {
    base.releaseIfUnowned();
  }
});

gpuTest("reductions split long axes across workgroups and passes", async (gpu) => {
  using ones = tensor(new Float32Array(1 << 20).fill(1), { device: gpu });
  assertEquals(await op("sum", ones), [1 << 20]);
  const rows = 3, n = 100_000;
  const x = new Float32Array(rows * n).map((_, i) => Math.sin(i));
  x[n + 777] = 5; // row maxima at known places
  x[2 * n + n - 1] = 6;
  x[12345] = 4;
  using t = tensor(x, { shape: [rows, n], device: gpu });
  assertEquals(await op("max", t, shape(1)), [4, 5, 6]);
  const sums = [0, 1, 2].map((r) => x.subarray(r * n, (r + 1) * n).reduce((s, v) => s + v, 0));
  assertClose(await op("mean", t, shape(1)), sums.map((s) => s / n), 1e-4);
  // Axis 0 of a tall matrix: one thread per column walking a stride.
  const tall = new Float32Array(5000 * 3).map((_, i) => i % 3);
  using tt = tensor(tall, { shape: [5000, 3], device: gpu });
  assertEquals(await op("sum", tt, shape(0)), [0, 5000, 10000]);
  // int32 through the workgroup path.
  const ints = new Int32Array(200_000).map((_, i) => (i * 7919) % 100_003);
  using ti = tensor(ints, { shape: [1, 200_000], device: gpu });
  assertEquals(await op("max", ti, shape(1)), [ints.reduce((m, v) => Math.max(m, v), -Infinity)]);
});

gpuTest(
  "NaN and infinities through maximum, minimum, relu and softmax: the CPU's special values",
  async (gpu) => {
    const a = [NaN, 1, -Infinity, Infinity, NaN, 5, -2, 7];
    const b = [2, NaN, 3, -Infinity, NaN, Infinity, -Infinity, -1];
    // Exact bits, -0 told from 0; every NaN reads as one NaN (JavaScript has one, whatever
    // sign bit the hardware that produced it chose).
    const bits = (
      x: ArrayLike<number>,
    ) => [
      ...new Uint32Array(new Float32Array(Array.from(x, (v) => Number.isNaN(v) ? NaN : v)).buffer),
    ];
    const both = async (name: string, ...inputs: number[][]) => {
      using c0 = tensor(inputs[0]), c1 = tensor(inputs[1] ?? inputs[0]);
      using g0 = tensor(inputs[0], { device: gpu }),
        g1 = tensor(inputs[1] ?? inputs[0], { device: gpu });
      const cpuArgs = inputs.length === 1 ? [c0] : [c0, c1];
      const gpuArgs = inputs.length === 1 ? [g0] : [g0, g1];
      assertEquals(bits(await op(name, ...gpuArgs)), bits(await op(name, ...cpuArgs)), name);
    };
    await both("maximum", a, b); // 8 elements: the vec4 template
    await both("minimum", a, b);
    await both("maximum", a.slice(0, 7), b.slice(0, 7)); // 7: the scalar template
    await both("relu", a);
    await both("softmax", [1, NaN, 2]);
    await both("softmax", [1, Infinity, 2]);
  },
);

gpuTest("float divide is correctly rounded, as the CPU's, on ties and edges", async (gpu) => {
  // WGSL lets `/` be 2.5 ULP off, and NVIDIA's driver is (DIVIDE_RN in elementwise_ops.ts): every
  // quotient must be the float32 nearest the exact one, through the op (the adapter's choice)
  // and through the integer division hardware adapters get, in its scalar and vec4 forms.
  const x: number[] = [-2.5, 51, 7, 1, 0, -0, 5, Infinity, -Infinity, NaN, 1, 3e38, 1e-40, 255];
  const y: number[] = [5 / 255, 2, 3, 3, 5, 5, 0, 2, Infinity, 1, NaN, 1e-3, 3, 0.1];
  x.push(1.5e-38, 3e38, 1e-30, 16777215, 1, 8388609, 2 ** -126, -(2 ** 127));
  y.push(3, 0.5, 1e10, 16777213, 16777215, 3, 1.5, 2 ** -20);
  let seed = 31;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  while (x.length < 4096) {
    x.push((next() - 0.5) * 2 ** (next() * 40 - 20));
    y.push((next() - 0.5) * 2 ** (next() * 40 - 20));
  }
  const [xs, ys] = [new Float32Array(x), new Float32Array(y)];
  const want = Array.from(new Float32Array(xs.map((v, i) => v / ys[i])));
  // WGSL lets an implementation flush subnormals to zero (NVIDIA's does): where an operand or
  // the quotient is subnormal, zero of the quotient's sign passes too.
  const tiny = (v: number) => v !== 0 && Math.abs(v) < 2 ** -126;
  const flushed = (g: number, i: number) =>
    (tiny(xs[i]) || tiny(ys[i]) || tiny(want[i])) &&
    Object.is(g, want[i] < 0 || Object.is(want[i], -0) ? -0 : 0);
  const check = (got: number[], how: string) => {
    const wrong = got.flatMap((g, i) =>
      Object.is(g, want[i]) || flushed(g, i) ? [] : [`${xs[i]} / ${ys[i]}: ${g}`]
    );
    assertEquals(wrong.slice(0, 5), [], `${how}: ${wrong.length} quotients differ`);
  };
  using a = tensor(xs, { device: gpu });
  using b = tensor(ys, { device: gpu });
  check(await op("divide", a, b), "vm.op.divide");
  for (const n of [4096, 4095]) { // 4096: the vec4 variant; 4095: one element a thread
    const out = NDArray.empty([n], "float32", gpu);
    try {
      const input = { type: "f32" as const, offset: 0, strides: [1] };
      const program = elementwiseProgram(
        binaryFn("divide", "f32", true),
        [input, input],
        [n],
        "f32",
        0,
      );
      runProgram(kernelContext(gpu), program, [a, b, out].map((t) => t.block as GPUBuffer));
      check([...(await out.data() as Float32Array)], `integer division, ${n} elements`);
    } finally {
      out.releaseIfUnowned();
    }
    want.pop();
  }
});

gpuTest("max propagates NaN as the CPU does", async (gpu) => {
  using t = tensor([1, NaN, 3], { device: gpu });
  assert(Number.isNaN((await op("max", t))[0]));
  using big = tensor(new Float32Array(10_000).fill(2).map((v, i) => (i === 9000 ? NaN : v)), {
    device: gpu,
  });
  assert(Number.isNaN((await op("max", big))[0]));
});

gpuTest(
  "softmax and layer_norm use a workgroup per long row and a thread per short row",
  async (gpu) => {
    for (const [rows, n] of [[3, 1000], [5000, 3]]) {
      const x = ramp(rows * n, 0.25);
      using t = tensor(x, { shape: [rows, n], device: gpu });
      const want: number[] = [];
      for (let r = 0; r < rows; r++) {
        const row = Array.from(x.subarray(r * n, (r + 1) * n));
        const m = Math.max(...row);
        const e = row.map((v) => Math.exp(v - m));
        const s = e.reduce((a, b) => a + b, 0);
        want.push(...e.map((v) => v / s));
      }
      assertClose(await op("softmax", t), want, 1e-4);
    }
    for (const [rows, n] of [[2, 5000], [3000, 8]]) {
      const x = ramp(rows * n, 0.5, 17);
      using t = tensor(x, { shape: [rows, n], device: gpu });
      using g = tensor(new Float32Array(n).fill(2), { device: gpu });
      using b = tensor(new Float32Array(n).fill(1), { device: gpu });
      const want: number[] = [];
      for (let r = 0; r < rows; r++) {
        const row = Array.from(x.subarray(r * n, (r + 1) * n));
        const mean = row.reduce((a, v) => a + v, 0) / n;
        const v = row.reduce((a, x) => a + (x - mean) ** 2, 0) / n;
        want.push(...row.map((x) => ((x - mean) / Math.sqrt(v + 1e-5)) * 2 + 1));
      }
      assertClose(await op("layer_norm", t, g, b), want, 1e-4);
    }
  },
);

gpuTest("matmul: vec4 and scalar variants, edges, offsets and broadcast batches", async (gpu) => {
  const cases: [number, number, number][] = [
    [64, 128, 96],
    [65, 64, 68],
    [130, 8, 36], // 16-row blocks with a partial last block and a partial column pair
    [257, 16, 68],
    [7, 5, 3],
    [33, 12, 17],
  ];
  for (const [M, K, N] of cases) {
    const a = ramp(M * K, 0.125), b = ramp(K * N, 0.0625, 11);
    using ta = tensor(a, { shape: [M, K], device: gpu });
    using tb = tensor(b, { shape: [K, N], device: gpu });
    assertClose(await op("matmul", ta, tb), refMatmul(a, b, M, K, N), 1e-5);
  }
  // A at element offset 1: the vec4 variant does not apply, the scalar one must.
  const base = NDArray.empty([1 + 8 * 8], "float32", gpu);
  try {
    const a = ramp(64, 0.5);
    gpu.writeBlock(base.storage.block, 4, new Uint8Array(a.buffer));
    const va = view(base, 4, [8, 8]);
    using tb = tensor(a, { shape: [8, 8], device: gpu });
    const out = NDArray.empty([8, 8], "float32", gpu);
    be().matmul(va, tb, out);
    assertClose(await out.data() as Float32Array, refMatmul(a, a, 8, 8, 8), 1e-5);
    out.releaseIfUnowned();
    va.releaseIfUnowned();
  } finally {
    base.releaseIfUnowned();
  }
  // [2, 1, 8, 12] @ [3, 12, 16] → [2, 3, 8, 16]
  const A = ramp(2 * 8 * 12, 0.25), B = ramp(3 * 12 * 16, 0.125, 7);
  using ta = tensor(A, { shape: [2, 1, 8, 12], device: gpu });
  using tb = tensor(B, { shape: [3, 12, 16], device: gpu });
  const got = await op("matmul", ta, tb);
  for (let i = 0; i < 2; i++) {
    for (let j = 0; j < 3; j++) {
      const want = refMatmul(
        A.subarray(i * 96, (i + 1) * 96),
        B.subarray(j * 192, (j + 1) * 192),
        8,
        12,
        16,
      );
      assertClose(got.slice((i * 3 + j) * 128, (i * 3 + j + 1) * 128), want, 1e-5);
    }
  }
});

gpuTest("transpose moves 8-bit and 64-bit elements", async (gpu) => {
  const dims = [2, 3, 5], perm = [2, 0, 1];
  const src = Array.from({ length: 30 }, (_, i) => i);
  const want: number[] = [];
  for (let k = 0; k < 5; k++) {
    for (let i = 0; i < 2; i++) for (let j = 0; j < 3; j++) want.push(src[i * 15 + j * 5 + k]);
  }
  for (const dt of ["uint8", "int8", "int16", "float64", "bool"] as const) {
    const vals = dt === "bool" ? src.map((v) => v % 2) : src;
    using t = tensor(vals, { shape: dims, dtype: dt, device: gpu });
    const expect = dt === "bool" ? want.map((v) => v % 2) : want;
    assertEquals(await op("transpose", t, shape(...perm)), expect, dt);
  }
});

gpuTest("casts round float64 to float32 exactly and keep neighbouring bytes", async (gpu) => {
  const doubles = [
    0.1,
    1 / 3,
    1e-40, // a float32 subnormal
    1.5e-45, // rounds to the smallest subnormal
    7e-46, // rounds to zero
    3.4028235677973366e38, // rounds to float32 max
    3.4028236e38, // rounds to infinity
    -0,
    1 + 2 ** -24, // a tie: rounds to even (1)
    1 + 3 * 2 ** -24, // a tie: rounds to even (1 + 2^-22)
    -123456789.125,
    Infinity,
    NaN,
  ];
  using d = tensor(doubles, { dtype: "float64", device: gpu });
  const got = await op("cast", d, "float32");
  assertEquals(got, doubles.map(Math.fround));
  assertEquals(Object.is(got[7], -0), true);
  // float32 → float64 is exact, subnormals included.
  const floats = [0.1, 1e-40, -3.5, 2 ** -149, 3.4e38].map(Math.fround);
  using f = tensor(floats, { device: gpu });
  assertEquals(await op("cast", f, "float64"), floats);
  using i = tensor([-2147483648, 2147483647, 0, -1], { dtype: "int32", device: gpu });
  assertEquals(await op("cast", i, "float64"), [-2147483648, 2147483647, 0, -1]);
  using u = tensor([4294967295, 1], { dtype: "uint32", device: gpu });
  assertEquals(await op("cast", u, "float64"), [4294967295, 1]);
  using big = tensor([16777217.9, -2147483648.5, 4294967296, -0.9], {
    dtype: "float64",
    device: gpu,
  });
  assertEquals(await op("cast", big, "int32"), [16777217, -2147483648, 2147483647, 0]);
  assertEquals(await op("cast", big, "uint32"), [16777217, 0, 4294967295, 0]);
  // A uint8 output at byte offset 1 of a shared buffer leaves bytes 0 and 4.. alone.
  const base = NDArray.empty([8], "uint8", gpu);
  try {
    gpu.writeBlock(base.storage.block, 0, new Uint8Array([9, 9, 9, 9, 9, 9, 9, 9]));
    const out = view(base, 1, [3], "uint8");
    using x = tensor([1.9, 300, -4], { device: gpu });
    be().cast(x, out);
    assertEquals(Array.from(await base.data() as Uint8Array), [9, 1, 255, 0, 9, 9, 9, 9]);
    out.releaseIfUnowned();
  } finally {
    base.releaseIfUnowned();
  }
});

gpuTest("empty tensors dispatch nothing and 0-d tensors work", async (gpu: WebGPUDevice) => {
  using e = tensor(new Float32Array(0), { shape: [0, 3], device: gpu });
  const before = gpu.dispatchCount;
  assertEquals(await op("exp", e), []);
  assertEquals(gpu.dispatchCount, before);
  assertEquals(await op("sum", e, shape(0)), [0, 0, 0]);
  using s = tensor(2, { device: gpu });
  assertEquals(await op("multiply", s, s), [4]);
  assertEquals(await op("sum", s), [2]);
  assertEquals(await op("softmax", s), [1]);
});

gpuTest("pipelines and bind groups are reused when a program runs again", async (gpu) => {
  using a = tensor(ramp(1000), { shape: [10, 100], device: gpu });
  using b = tensor(ramp(100), { device: gpu });
  const out = NDArray.empty([10, 100], "float32", gpu);
  try {
    be().binary("add", a, b, out);
    await out.data();
    const compiles = kernelContext(gpu).pipelines.compileCount;
    const groups = kernelContext(gpu).bindings.bindGroupCount;
    for (let i = 0; i < 5; i++) be().binary("add", a, b, out);
    await out.data();
    assertEquals(kernelContext(gpu).pipelines.compileCount, compiles);
    assertEquals(kernelContext(gpu).bindings.bindGroupCount, groups);
    assertAlmostEquals((await out.data())[0], ramp(1000)[0] + ramp(100)[0]);
  } finally {
    out.releaseIfUnowned();
  }
});

gpuTest("take clamps out-of-range indices that live in GPU memory", async (gpu) => {
  using x = tensor([[0, 1], [10, 11], [20, 21]], { device: gpu });
  // -1 counts from the end (row 2); 3 and 100 clamp to row 2, -4 and -100 to row 0.
  using idx = tensor([-1, 3, 100, -4, -100, 1], { dtype: "int32", device: gpu });
  assertEquals(await op("take", x, idx, 0), [20, 21, 20, 21, 20, 21, 0, 1, 0, 1, 10, 11]);
  // The same indices from CPU memory are checked before anything runs.
  using host = tensor([-1, 3], { dtype: "int32" });
  assertThrows(() => getGlobalFunc("vm.op.take")!(x, host, 0), RangeError, "index 3");
});

gpuTest("take uploads CPU indices as a counted temporary and frees it", async (gpu) => {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 2 }, () => {
    ib.emit_call("vm.op.take", [ib.r(0), ib.r(1), ib.imm(0)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  const vm = new VirtualMachine(ib.get(), gpu);
  using x = tensor(ramp(40 * 64), { shape: [40, 64], device: gpu });
  using ids = tensor([7, 39, 0], { dtype: "int32" });
  const before = gpu.dispatchCount;
  const out = await vm.invoke("main", x, ids) as NDArray;
  assertEquals(gpu.dispatchCount, before + 1);
  assertEquals(out.device, gpu);
  const src = ramp(40 * 64);
  const want = [7, 39, 0].flatMap((r) => Array.from(src.subarray(r * 64, r * 64 + 64)));
  assertEquals(Array.from(await out.data() as Float32Array), want);
  const stats = vm.memory_stats(gpu);
  // Live: the output's block (rounded up by the allocator); the peak also counts the indices.
  assert(stats.liveBytes >= out.nbytes, JSON.stringify(stats));
  assert(stats.peakBytes > stats.liveBytes, JSON.stringify(stats));
  out.dispose();
  assertEquals(vm.memory_stats(gpu).liveBytes, 0);
});

gpuTest("take rejects rows that are not whole 4-byte words", (gpu) => {
  using bytes = tensor([1, 2, 3, 4, 5], { dtype: "uint8", device: gpu });
  using idx = tensor([0, 4], { dtype: "int32", device: gpu });
  assertThrows(
    () => getGlobalFunc("vm.op.take")!(bytes, idx, 0),
    TypeError,
    "WebGPU take copies 4-byte words: rows of 1 uint8 elements (1 bytes)",
  );
});

gpuTest("indexing and attention kernels read tensors at offsets inside a shared buffer", async (
  gpu,
) => {
  const values = new Float32Array(256).map((_, i) => (i % 17) / 8 - 1);
  const base = NDArray.empty([256], "float32", gpu);
  gpu.writeBlock(base.storage.block, 0, new Uint8Array(values.buffer));
  const at = (element: number, dims: number[]) => view(base, element * 4, dims);
  // Element offsets 1, 3 and 6: no vec4 path applies.
  const x = at(1, [6, 4]), idxBase = tensor([5, 0, 2], { dtype: "int32", device: gpu });
  const q = at(3, [2, 1, 4]), k = at(6, [2, 5, 4]), v = at(50, [2, 5, 4]);
  try {
    const row = (r: number) => Array.from(values.subarray(1 + r * 4, 5 + r * 4));
    assertEquals(await op("take", x, idxBase, 0), [...row(5), ...row(0), ...row(2)]);
    assertEquals(
      await op("strided_slice", x, shape(0, 1), shape(4, 3), shape(0, 0), shape(-2, -3)),
      [values[1 + 16 + 3], values[1 + 8 + 3]],
    );
    assertEquals(await op("concat", [x, x], 0), [
      ...values.subarray(1, 25),
      ...values.subarray(1, 25),
    ]);
    const refAtt = (h: number) => {
      const qv = values.subarray(3 + h * 4, 7 + h * 4);
      const s = [0, 1, 2, 3, 4].map((j) => {
        let d = 0;
        for (let c = 0; c < 4; c++) d += qv[c] * values[6 + (h * 5 + j) * 4 + c];
        return d / 2;
      });
      const m = Math.max(...s), e = s.map((t) => Math.exp(t - m));
      const sum = e.reduce((a, b) => a + b, 0);
      return [0, 1, 2, 3].map((c) =>
        e.reduce((a, p, j) => a + p * values[50 + (h * 5 + j) * 4 + c], 0) / sum
      );
    };
    assertClose(await op("attention", q, k, v, 1), [...refAtt(0), ...refAtt(1)], 1e-5);
  } finally {
    for (const t of [x, idxBase, q, k, v]) t.releaseIfUnowned();
    base.releaseIfUnowned();
  }
});

gpuTest("attention is one dispatch per call, for prefill and long decode alike", async (gpu) => {
  for (const [Tq, Tk] of [[64, 64], [1, 2048], [1, 3000]]) {
    const n = 6 * Tk * 64;
    using q = tensor(ramp(6 * Tq * 64, 0.01), { shape: [1, 6, Tq, 64], device: gpu });
    using k = tensor(ramp(n, 0.01, 11), { shape: [1, 6, Tk, 64], device: gpu });
    using v = tensor(ramp(n, 0.1, 7), { shape: [1, 6, Tk, 64], device: gpu });
    const before = gpu.dispatchCount;
    const out = getGlobalFunc("vm.op.attention")!(q, k, v, 1) as NDArray;
    try {
      assertEquals(gpu.dispatchCount, before + 1, `Tq ${Tq}, Tk ${Tk}`);
      const got = await out.data();
      assert(got.every(Number.isFinite), `Tq ${Tq}, Tk ${Tk}: finite`);
    } finally {
      out.releaseIfUnowned();
    }
  }
});

gpuTest("attention: the per-thread and the workgroup variants agree with the reference", async (
  gpu,
) => {
  // [heads, Tq, Tk, D, Dv, causal offset]; the workgroup variant walks keys 64 at a time.
  const cases: [number, number, number, number, number, number | null][] = [
    [6, 1, 1, 64, 64, 0],
    [6, 1, 100, 64, 64, 99],
    [2, 2, 2100, 12, 20, null],
    [2, 70, 70, 16, 16, 0],
    [3, 5, 9, 6, 3, 4],
    [1, 3, 130, 128, 128, null],
  ];
  for (const [n, [heads, Tq, Tk, D, Dv, causalOffset]] of [...cases, ...cases.slice(1)].entries()) {
    const rq = { shape: [heads, Tq, D], data: Array.from(ramp(heads * Tq * D, 0.05)) };
    const rk = { shape: [heads, Tk, D], data: Array.from(ramp(heads * Tk * D, 0.05, 11)) };
    if (n >= cases.length) {
      // Scores that grow with the key: every chunk raises the running maximum, so the
      // running sum and output must be rescaled each time.
      rk.data = rk.data.map((_, e) => {
        const h = Math.floor(e / (Tk * D)), j = Math.floor(e / D) % Tk, d = e % D;
        return rq.data[h * Tq * D + d] * (j / Tk) * 4;
      });
    }
    const rv = { shape: [heads, Tk, Dv], data: Array.from(ramp(heads * Tk * Dv, 0.1, 7)) };
    using q = tensor(rq.data, { shape: rq.shape, device: gpu });
    using k = tensor(rk.data, { shape: rk.shape, device: gpu });
    using v = tensor(rv.data, { shape: rv.shape, device: gpu });
    const want = refAttention(rq, rk, rv, 0.25, causalOffset).data;
    for (const perThread of [true, false]) {
      const out = NDArray.empty([heads, Tq, Dv], "float32", gpu);
      try {
        const program = attentionProgram({
          geometry: attentionGeometry(rq.shape, rk.shape, rv.shape, "BHSD"),
          scale: 0.25,
          causalOffset,
          offsets: [0, 0, 0, 0],
          perThread,
        });
        runProgram(kernelContext(gpu), program, [q, k, v, out].map((t) => t.block as GPUBuffer));
        const what = `heads ${heads} Tq ${Tq} Tk ${Tk} D ${D} Dv ${Dv} perThread ${perThread}`;
        const got = await out.data() as Float32Array;
        assertEquals(got.length, want.length, what);
        for (let i = 0; i < want.length; i++) {
          assert(Math.abs(got[i] - want[i]) <= 1e-5 + 1e-4 * Math.abs(want[i]), `${what}: ${i}`);
        }
      } finally {
        out.releaseIfUnowned();
      }
    }
  }
  // The choice: a thread per row for prefills and on software adapters, head sizes permitting.
  assertEquals(attentionPerThread(384, 64, 64, false), true);
  assertEquals(attentionPerThread(6, 64, 64, false), false);
  assertEquals(attentionPerThread(6, 64, 64, true), true);
  assertEquals(attentionPerThread(384, 160, 64, true), false);
});
