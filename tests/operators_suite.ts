/**
 * The operator test suite, run on every device: `operators_cpu_test.ts`
 * calls `defineOperatorTests` with the CPU, `operators_webgpu_test.ts` with a
 * GPU. Every `vm.op.*` function is called through the registry on tensors
 * made on the device under test, read back with `await data()`, and
 * compared with the plain-JS references in `_operator_reference.ts` — never
 * with another backend.
 *
 * @module
 */

import { assert, assertEquals, AssertionError, assertThrows } from "@std/assert";
import { installBuiltins } from "../builtins/install.ts";
import { OPERATOR_NAMES } from "../builtins/operators/tensor_operators.ts";
import { INDEXING_OPERATOR_NAMES } from "../builtins/operators/indexing_operators.ts";
import { ATTENTION_OPERATOR_NAMES } from "../builtins/operators/attention_operators.ts";
import { CONV_OPERATOR_NAMES } from "../builtins/operators/conv_operators.ts";
import { SAMPLING_OPERATOR_NAMES } from "../builtins/lm_support/device_sampling.ts";
import { Tuple } from "../ground/tuple.ts";
import { ExecBuilder } from "../builder/exec_builder.ts";
import { VirtualMachine } from "../vm/virtual_machine.ts";
import { getGlobalFunc } from "../ground/registry.ts";
import type { TensorDType } from "../ground/dtype.ts";
import { cpu } from "../devices/cpu_device.ts";
import type { Device } from "../devices/device.ts";
import { dtype } from "../ground/dtype.ts";
import { NDArray } from "../devices/ndarray.ts";
import { tensor } from "../devices/tensor.ts";
import { shape, ShapeTuple } from "../ground/shape_tuple.ts";
import {
  type Ref,
  REF_BINARY_FLOAT,
  REF_BINARY_INT,
  REF_UNARY,
  refArgmax,
  refAttention,
  refBinary,
  refCastValue,
  refCausalMask,
  refConcat,
  refLayerNorm,
  refLinear,
  refMatmul,
  refNucleusOrder,
  refReduce,
  refSampleTopP,
  refSoftmax,
  refStridedSlice,
  refTake,
  refTranspose,
  refUnary,
  sizeOf,
} from "./_operator_reference.ts";

installBuiltins();

/** Registers one test case: `Deno.test` for the CPU, `gpuTest` for WebGPU (run in a child process). */
export type RegisterTest = (name: string, fn: () => Promise<void>) => void;

/** What an operator returned, read back to the host. */
interface Result {
  shape: number[];
  dtype: string;
  device: Device;
  data: number[];
}

/** Tolerances: `|actual - expected| <= atol + rtol * |expected|`. */
interface Tolerance {
  rtol: number;
  atol: number;
}

const FLOAT_TOL: Tolerance = { rtol: 1e-4, atol: 1e-5 };
const EXACT: Tolerance = { rtol: 0, atol: 0 };

/** Deterministic values in `[lo, hi)`, rounded to float32 so the reference sees what the device sees. */
function randomValues(n: number, seed: number, lo = -1, hi = 1): number[] {
  let s = seed >>> 0;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    // mulberry32
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    const u = ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    out.push(Math.fround(lo + (hi - lo) * u));
  }
  return out;
}

function randomRef(dims: number[], seed: number, lo = -1, hi = 1): Ref {
  return { shape: dims, data: randomValues(sizeOf(dims), seed, lo, hi) };
}

function randomIntRef(dims: number[], seed: number, lo = -1000, hi = 1000): Ref {
  return { shape: dims, data: randomValues(sizeOf(dims), seed, lo, hi).map(Math.floor) };
}

/** Values with |v| in [0.5, 2): safe divisors. */
function divisorRef(dims: number[], seed: number): Ref {
  const data = randomValues(sizeOf(dims), seed, -1, 1).map((v) =>
    Math.fround(v < 0 ? v - 0.5 : v + 0.5)
  );
  return { shape: dims, data };
}

function fmt(dims: readonly number[]): string {
  return `[${dims.join(", ")}]`;
}

/** The permutation swapping the two axes before the last of a rank-`n` tensor. */
function swapLast(n: number): number[] {
  const p = Array.from({ length: n }, (_, i) => i);
  [p[n - 3], p[n - 2]] = [p[n - 2], p[n - 3]];
  return p;
}

/** Calls a registered operator and reads the result back. */
async function call(name: string, ...args: unknown[]): Promise<Result> {
  const fn = getGlobalFunc(name);
  if (fn === undefined) throw new AssertionError(`${name} is not registered`);
  const out = fn(...args);
  if (!(out instanceof NDArray)) {
    throw new AssertionError(`${name} returned ${out}, not an NDArray`);
  }
  try {
    // int64 results are bigints; every value the suite uses is exact as a number.
    const data = Array.from(await out.data() as ArrayLike<number | bigint>, Number);
    return { shape: [...out.shape], dtype: out.dtype, device: out.device, data };
  } finally {
    out.releaseIfUnowned();
  }
}

/** Asserts shape, dtype and every element within tolerance (NaN matches NaN). */
function assertResult(
  actual: Result,
  expected: Ref,
  expectedDType: string,
  tol: Tolerance,
  what: string,
): void {
  assertEquals(actual.shape, expected.shape, `${what}: shape`);
  assertEquals(actual.dtype, expectedDType, `${what}: dtype`);
  assertEquals(actual.data.length, expected.data.length, `${what}: element count`);
  for (let i = 0; i < expected.data.length; i++) {
    const a = actual.data[i], e = expected.data[i];
    const ok = Number.isNaN(e)
      ? Number.isNaN(a)
      : !Number.isFinite(e)
      ? a === e
      : Math.abs(a - e) <= tol.atol + tol.rtol * Math.abs(e);
    if (!ok) {
      throw new AssertionError(
        `${what}: element ${i} is ${a}, expected ${e} (±${tol.atol} + ${tol.rtol}·|e|)`,
      );
    }
  }
}

/**
 * Registers a test case for every `vm.op.*` operator on one device.
 * `getDevice` is called inside each test, so registering never asks for a
 * device.
 *
 * @param deviceName Prefix of every test name, e.g. `"cpu"`.
 * @param getDevice Returns the device under test.
 * @param register Registers one case; `Deno.test` by default.
 */
export function defineOperatorTests(
  deviceName: string,
  getDevice: () => Promise<Device>,
  register: RegisterTest = (name, fn) => Deno.test(name, fn),
): void {
  const test = (name: string, fn: (dev: Device) => Promise<void> | void) => {
    register(`${deviceName}: ${name}`, async () => await fn(await getDevice()));
  };
  /** A tensor on the device under test holding `ref`. */
  const put = (dev: Device, ref: Ref, dt = "float32") =>
    tensor(ref.data, { shape: ref.shape, dtype: dt as TensorDType, device: dev });

  test("every operator is registered and returns its output on the input device", async (dev) => {
    for (
      const name of [
        ...OPERATOR_NAMES,
        ...INDEXING_OPERATOR_NAMES,
        ...ATTENTION_OPERATOR_NAMES,
        ...CONV_OPERATOR_NAMES,
        ...SAMPLING_OPERATOR_NAMES,
      ]
    ) {
      assert(getGlobalFunc(name) !== undefined, name);
    }
    using x = put(dev, randomRef([2, 3], 1));
    const out = await call("vm.op.exp", x);
    assertEquals(out.device, dev);
  });

  // ---------------------------------------------------------------- binary

  const BROADCAST_CASES: [number[], number[]][] = [
    [[2, 3], [2, 3]],
    [[37, 29], [37, 29]],
    [[3, 4], []],
    [[], [3, 4]],
    [[], []],
    [[1], [5]],
    [[4, 5], [5]],
    [[4, 5], [4, 1]],
    [[3, 1], [1, 4]],
    [[2, 1, 4], [3, 1]],
    [[2, 3, 1, 5], [3, 4, 1]],
    [[1, 1], [1, 1]],
    [[5, 1, 67], [1, 3, 67]],
    [[0, 3], [3]],
    [[4099], [4099]],
  ];

  for (const op of Object.keys(REF_BINARY_FLOAT)) {
    test(`vm.op.${op} float32 with broadcasting`, async (dev) => {
      for (const [i, [sa, sb]] of BROADCAST_CASES.entries()) {
        const ra = randomRef(sa, 10 + i, -3, 3);
        const rb = op === "divide" ? divisorRef(sb, 50 + i) : randomRef(sb, 50 + i, -3, 3);
        using a = put(dev, ra);
        using b = put(dev, rb);
        const got = await call(`vm.op.${op}`, a, b);
        assertResult(
          got,
          refBinary(ra, rb, REF_BINARY_FLOAT[op]),
          "float32",
          FLOAT_TOL,
          `${op} ${fmt(sa)} ${fmt(sb)}`,
        );
      }
    });

    test(`vm.op.${op} int32 with broadcasting`, async (dev) => {
      for (const [i, [sa, sb]] of BROADCAST_CASES.entries()) {
        const ra = randomIntRef(sa, 100 + i), rb = randomIntRef(sb, 200 + i);
        using a = put(dev, ra, "int32");
        using b = put(dev, rb, "int32");
        const got = await call(`vm.op.${op}`, a, b);
        assertResult(
          got,
          refBinary(ra, rb, REF_BINARY_INT[op]),
          "int32",
          EXACT,
          `${op} ${fmt(sa)} ${fmt(sb)}`,
        );
      }
    });
  }

  test("int32 arithmetic wraps and divides like WGSL", async (dev) => {
    const cases: [string, number[], number[], number[]][] = [
      ["add", [2147483647, -2147483648, 5], [1, -1, -7], [-2147483648, 2147483647, -2]],
      ["subtract", [-2147483648, 2147483647], [1, -1], [2147483647, -2147483648]],
      ["multiply", [65536, 123456789, -7, 46341], [65536, 987654321, 3, 46341], [
        0,
        -67153019,
        -21,
        -2147479015,
      ]],
      // Truncation toward zero; a zero divisor and -2^31 / -1 yield the dividend.
      ["divide", [7, -7, 7, -7, 5, -2147483648, 0, -5], [2, 2, -2, -2, 0, -1, 3, 0], [
        3,
        -3,
        -3,
        3,
        5,
        -2147483648,
        0,
        -5,
      ]],
    ];
    for (const [op, x, y, want] of cases) {
      using a = tensor(x, { dtype: "int32", device: dev });
      using b = tensor(y, { dtype: "int32", device: dev });
      const got = await call(`vm.op.${op}`, a, b);
      assertEquals(got.data, want, op);
      assertEquals(want, x.map((v, i) => REF_BINARY_INT[op](v, y[i])), `${op} reference`);
    }
  });

  test("float32 divide by zero and maximum/minimum with infinities", async (dev) => {
    using a = tensor([1, -1, 0, 3], { device: dev });
    using b = tensor([0, 0, 0, Infinity], { device: dev });
    assertResult(
      await call("vm.op.divide", a, b),
      { shape: [4], data: [Infinity, -Infinity, NaN, 0] },
      "float32",
      EXACT,
      "divide",
    );
    assertResult(
      await call("vm.op.maximum", a, b),
      { shape: [4], data: [1, 0, 0, Infinity] },
      "float32",
      EXACT,
      "max",
    );
    assertResult(
      await call("vm.op.minimum", a, b),
      { shape: [4], data: [0, -1, 0, 3] },
      "float32",
      EXACT,
      "min",
    );
  });

  // ----------------------------------------------------------------- unary

  const UNARY_SHAPES = [[], [1, 1], [67], [3, 5, 7], [4099]];
  /** Inputs within each operator's domain (and, for `tan`, away from its poles). */
  const UNARY_DOMAIN: Record<string, [number, number]> = {
    log: [0.01, 10],
    sqrt: [0.01, 10],
    asin: [-0.99, 0.99],
    acos: [-0.99, 0.99],
    atanh: [-0.99, 0.99],
    acosh: [1.01, 10],
    tan: [-1.2, 1.2],
  };
  for (const op of Object.keys(REF_UNARY)) {
    const [lo, hi] = UNARY_DOMAIN[op] ?? [-4, 4];
    test(`vm.op.${op} float32`, async (dev) => {
      for (const [i, dims] of UNARY_SHAPES.entries()) {
        const rx = randomRef(dims, 300 + i, lo, hi);
        using x = put(dev, rx);
        const got = await call(`vm.op.${op}`, x);
        assertResult(got, refUnary(rx, REF_UNARY[op]), "float32", FLOAT_TOL, `${op} ${fmt(dims)}`);
      }
    });
  }

  // More values than one chunk of the CPU's WebAssembly gelu (kernels/cpu/wasm/unary.ts, 65536)
  // and not a multiple of its four lanes; past ±4 too, where erf nears ±1.
  test("vm.op.gelu float32 over 70001 values in [-6, 6]", async (dev) => {
    const rx = randomRef([70001], 390, -6, 6);
    using x = put(dev, rx);
    assertResult(
      await call("vm.op.gelu", x),
      refUnary(rx, REF_UNARY.gelu),
      "float32",
      FLOAT_TOL,
      "gelu",
    );
  });

  test("unary operators at extreme inputs", async (dev) => {
    const cases: [string, number[], number[]][] = [
      ["exp", [-200, 0, 100], [0, 1, Infinity]],
      ["log", [0, 1, -1], [-Infinity, 0, NaN]],
      ["sqrt", [0, 4, -1], [0, 2, NaN]],
      ["tanh", [-30, 0, 30], [-1, 0, 1]],
      ["sigmoid", [-100, 0, 100], [0, 0.5, 1]],
      ["relu", [-2, 0, 3.5], [0, 0, 3.5]],
      ["gelu", [-10, 0, 10, Infinity, NaN], [0, 0, 10, Infinity, NaN]],
      ["negative", [1.5, 0, -2], [-1.5, -0, 2]],
    ];
    for (const [op, x, want] of cases) {
      using t = tensor(x, { device: dev });
      assertResult(
        await call(`vm.op.${op}`, t),
        { shape: [x.length], data: want },
        "float32",
        FLOAT_TOL,
        op,
      );
    }
  });

  test("vm.op.negative and vm.op.relu on int32", async (dev) => {
    const rx = randomIntRef([5, 13], 400);
    using x = put(dev, rx, "int32");
    assertResult(
      await call("vm.op.negative", x),
      refUnary(rx, REF_UNARY.negative),
      "int32",
      EXACT,
      "negative",
    );
    assertResult(await call("vm.op.relu", x), refUnary(rx, REF_UNARY.relu), "int32", EXACT, "relu");
    using edge = tensor([-2147483648, 2147483647, 0], { dtype: "int32", device: dev });
    assertEquals((await call("vm.op.negative", edge)).data, [-2147483648, -2147483647, 0]);
  });

  // ---------------------------------------------------------------- matmul

  const MATMUL_CASES: [number[], number[]][] = [
    [[2, 3], [3, 4]],
    [[5, 7], [7, 3]],
    [[67, 45], [45, 33]],
    [[1, 9], [9, 6]],
    [[9], [9, 6]],
    [[6, 9], [9]],
    [[9], [9]],
    [[2, 5, 6], [2, 6, 7]],
    [[3, 1, 4, 5], [2, 5, 6]],
    [[4, 9, 8], [8, 5]],
    [[8, 5], [4, 5, 8]],
    [[130, 70], [70, 129]],
    [[2, 0], [0, 3]],
    [[0, 3], [3, 4]],
    [[1, 1], [1, 1]],
    // Attention shapes: [B, H, T, D] × [B, H, D, S], a shared weight, a broadcast batch.
    [[2, 3, 5, 8], [2, 3, 8, 6]],
    [[2, 3, 1, 8], [2, 3, 8, 7]],
    [[3, 5, 8], [8, 6]],
    [[6, 1, 16], [16, 12]],
    [[1, 5, 8], [4, 8, 6]],
    [[2, 1, 5, 8], [1, 3, 8, 4]],
    [[2, 3, 4, 8], [8]],
    [[8], [2, 3, 8, 4]],
    [[2, 0, 4, 8], [1, 8, 4]],
    // One-row products (matrix-vector on the GPU's vec4 path), batches folded into rows.
    [[1, 64], [64, 136]],
    [[3, 8], [8, 260]],
    [[2, 3, 1, 64], [2, 3, 64, 64]],
    [[6, 1, 64], [64, 256]],
    [[2, 2, 1, 8], [1, 1, 8, 12]],
    [[5, 3, 16], [1, 16, 8]],
    [[2, 70, 8], [8, 4]],
    // One column (a convolution's last time step): dot products of A's rows with the vector, in
    // TypeScript below the WebAssembly size and by dot_rows above it; K of 1, batches shared or not.
    [[67, 45], [45, 1]],
    [[5, 1], [1, 1]],
    [[1, 7], [7, 1]],
    [[3, 5, 201], [201, 1]],
    [[2, 130, 300], [2, 300, 1]],
    [[258, 256], [256, 1]],
  ];
  test("vm.op.matmul 2-D, 1-D and batched with broadcasting", async (dev) => {
    for (const [i, [sa, sb]] of MATMUL_CASES.entries()) {
      const ra = randomRef(sa, 500 + i), rb = randomRef(sb, 600 + i);
      using a = put(dev, ra);
      using b = put(dev, rb);
      const got = await call("vm.op.matmul", a, b);
      // Each output sums K products of values in [-1, 1): allow float32 accumulation.
      const K = sa[sa.length - 1];
      const tol = { rtol: 1e-4, atol: 1e-6 * (K + 1) };
      assertResult(got, refMatmul(ra, rb), "float32", tol, `matmul ${fmt(sa)} ${fmt(sb)}`);
    }
  });

  // ---------------------------------------------------------------- linear

  const LINEAR_CASES: [number[], number[], boolean][] = [
    // [x shape, weight shape [N, K], bias]
    [[2, 3], [4, 3], true],
    [[1, 64], [136, 64], true], // a decode step: one row, vec4 along K
    [[1, 9], [7, 9], false], // K not a multiple of 4: scalar loads
    [[3, 8], [260, 8], true],
    [[9], [5, 9], true], // a bare vector
    [[2, 3, 16], [6, 16], false], // leading axes are rows
    [[67, 45], [33, 45], true], // packed 4×4 tiles and edges on the CPU
    [[64, 128], [384, 128], true], // a prefill's projection
    [[16, 40], [37, 40], true], // a batch of 16 decodes: 16×16 blocks on WebGPU, column edges
    [[16, 7], [33, 7], true], // the same blocks with scalar loads
    [[48, 12], [130, 12], false], // 16×16 blocks, three of rows
    [[19, 12], [9, 12], true], // 16-row blocks would pad to 32: 8×8 blocks
    [[5, 130], [3, 130], true],
    [[0, 8], [4, 8], true],
    [[3, 0], [4, 0], true], // K = 0: the bias alone
    [[4, 8], [0, 8], false],
  ];
  test("vm.op.linear is x @ wᵀ + bias for a weight stored [out, in]", async (dev) => {
    for (const [i, [sx, sw, hasBias]] of LINEAR_CASES.entries()) {
      const rx = randomRef(sx, 3500 + i), rw = randomRef(sw, 3600 + i);
      const rb = hasBias ? randomRef([sw[0]], 3700 + i) : null;
      using x = put(dev, rx);
      using w = put(dev, rw);
      using b = rb === null ? null : put(dev, rb);
      const got = await call("vm.op.linear", x, w, ...(b === null ? [] : [b]));
      const tol = { rtol: 1e-4, atol: 1e-6 * (sw[1] + 1) };
      assertResult(
        got,
        refLinear(rx, rw, rb),
        "float32",
        tol,
        `linear ${fmt(sx)} ${fmt(sw)}${hasBias ? " + bias" : ""}`,
      );
    }
  });

  test("vm.op.linear reads tensors at offsets and leaves a null bias out", async (dev) => {
    // Views into one storage (as alloc_tensor places them): x and w at odd element offsets.
    const rx = randomRef([2, 12], 3800), rw = randomRef([5, 12], 3801);
    using all = put(dev, { shape: [1 + 24 + 3 + 60], data: [0, ...rx.data, 0, 0, 0, ...rw.data] });
    const view = (at: number, dims: number[]) => new NDArray(all.storage, at * 4, dims, "float32");
    using x = view(1, [2, 12]);
    using w = view(28, [5, 12]);
    const got = await call("vm.op.linear", x, w, null);
    assertResult(got, refLinear(rx, rw, null), "float32", FLOAT_TOL, "linear at offsets");
  });

  // ------------------------------------------------------- argmax, sampling

  const ARGMAX_CASES: [number[], number | null, boolean][] = [
    [[1, 512], -1, false], // one row of logits
    [[3, 4096], 1, false],
    [[2, 3, 5], 1, true],
    [[4, 7], 0, false],
    [[5], null, false],
    [[2, 3], null, true],
    [[300, 3], -1, false],
  ];
  test("vm.op.argmax picks the first maximal element along an axis", async (dev) => {
    for (const [i, [dims, axis, keepdims]] of ARGMAX_CASES.entries()) {
      // Few distinct values, so ties are common and the first one must win.
      const rx = randomRef(dims, 3900 + i, -4, 4);
      rx.data = rx.data.map(Math.round);
      using x = put(dev, rx);
      const got = await call("vm.op.argmax", x, axis, keepdims ? 1 : 0);
      const norm = axis === null ? null : axis < 0 ? axis + dims.length : axis;
      assertResult(got, refArgmax(rx, norm, keepdims), "int32", EXACT, `argmax ${fmt(dims)}`);
    }
    for (const dt of ["int32", "float32"]) {
      const r: Ref = { shape: [2, 5], data: [3, 9, 9, -1, 2, -7, -7, -7, -8, -9] };
      using x = put(dev, r, dt);
      assertEquals((await call("vm.op.argmax", x, 1)).data, [1, 0], dt);
    }
    // NaN is the largest (NumPy), the first NaN wins.
    const nan: Ref = { shape: [3, 4], data: [1, NaN, 5, NaN, NaN, 2, 3, 4, 1, 2, 3, 4] };
    using xn = put(dev, nan);
    assertEquals((await call("vm.op.argmax", xn, -1)).data, [1, 0, 3]);
  });

  test("vm.op.sample_top_p follows TVM's top-p rule, greedy below temperature 1e-6", async (dev) => {
    // Rows whose uniform samples sit halfway between two cumulative boundaries, so float32
    // sums in any order choose the same token.
    const V = 300, rows: number[][] = [], us: number[] = [], want: number[] = [];
    const settings: [number, number][] = [[1, 1], [0.7, 0.9], [1.5, 0.5], [0.3, 0.95]];
    for (const [s, [temperature, topP]] of settings.entries()) {
      for (let r = 0; r < 4; r++) {
        const logits = randomValues(V, 4000 + 10 * s + r, -3, 3);
        const { cums, order, probs } = refNucleusOrder(logits, temperature);
        let k = 0;
        while (k < order.length - 1 && cums[k] < topP) k++;
        // A token inside the nucleus, r-th of four spread over it, past TVM's shortcut.
        const j = Math.min(k, Math.floor(((r + 1) * k) / 4));
        const lower = Math.max(j === 0 ? 0 : cums[j - 1], probs[order[0]] / topP * cums[k]);
        const u = Math.fround(((lower + cums[j]) / 2) / cums[k]);
        rows.push(logits);
        us.push(u);
        want.push(refSampleTopP(logits, u, temperature, topP));
      }
    }
    for (const [s, [temperature, topP]] of settings.entries()) {
      const block = rows.slice(4 * s, 4 * s + 4);
      using logits = put(dev, { shape: [4, V], data: block.flat() });
      using u = put(dev, { shape: [4], data: us.slice(4 * s, 4 * s + 4) });
      const got = await call("vm.op.sample_top_p", logits, u, temperature, topP);
      assertEquals(got.shape, [4]);
      assertEquals(got.dtype, "int32");
      assertEquals(
        got.data,
        want.slice(4 * s, 4 * s + 4),
        `temperature ${temperature}, top_p ${topP}`,
      );
    }
    // Greedy: the first maximal logit, whatever the uniform.
    const tie: Ref = { shape: [1, 6], data: [0, 5, 1, 5, NaN, 2] };
    using lt = put(dev, tie);
    using u9 = put(dev, { shape: [1, 1], data: [0.99] });
    assertEquals((await call("vm.op.sample_top_p", lt, u9, 0, 0.9)).data, [1]);
    // TVM's shortcut: u < p_max / top_p takes the most probable token; NaN is never chosen.
    using u0 = put(dev, { shape: [1], data: [0.01] });
    assertEquals((await call("vm.op.sample_top_p", lt, u0, 1, 0.9)).data, [1]);
    // Two tied weights 1 and smaller ones: top_p 0.5 keeps both ties, u = 0.9 takes the second.
    using ties = put(dev, { shape: [1, 4], data: [1, 3, 2, 3] });
    using u90 = put(dev, { shape: [1], data: [0.9] });
    assertEquals((await call("vm.op.sample_top_p", ties, u90, 1, 0.5)).data, [3]);
    // A row of NaN gives 0.
    using nan = put(dev, { shape: [2, 3], data: [NaN, NaN, NaN, 1, 2, 3] });
    using u2 = put(dev, { shape: [2], data: [0.5, 0.5] });
    assertEquals((await call("vm.op.sample_top_p", nan, u2, 1, 1)).data[0], 0);
  });

  test("vm.op.sample_top_p draws tokens with their probabilities", async (dev) => {
    // 400 evenly spaced uniforms over one row: each token is drawn about p · 400 times.
    const logits = [2, 1, 0.5, 0, -1, -3];
    const n = 400;
    const us = Array.from({ length: n }, (_, i) => Math.fround((i + 0.5) / n));
    using x = put(dev, { shape: [n, logits.length], data: us.flatMap(() => logits) });
    using u = put(dev, { shape: [n], data: us });
    const got = (await call("vm.op.sample_top_p", x, u, 1, 1)).data;
    const { probs } = refNucleusOrder(logits, 1);
    for (let t = 0; t < logits.length; t++) {
      const count = got.filter((g) => g === t).length;
      assert(Math.abs(count - probs[t] * n) <= 2, `token ${t}: ${count} of ${n}, p ${probs[t]}`);
    }
  });

  // ------------------------------------------------------------ reductions

  const REDUCE_CASES: [number[], unknown[], number[], boolean][] = [
    // [x shape, extra arguments, normalized axes for the reference, keepdims]
    [[3, 4, 5], [], [], false],
    [[3, 4, 5], [shape()], [], false],
    [[3, 4, 5], [shape(0)], [0], false],
    [[3, 4, 5], [shape(1)], [1], false],
    [[3, 4, 5], [shape(-1)], [2], false],
    [[3, 4, 5], [shape(0, 2)], [0, 2], false],
    [[3, 4, 5], [[2, 0], 1], [0, 2], true],
    [[3, 4, 5], [null, 1], [], true],
    [[3, 4, 5], [shape(1), true], [1], true],
    [[], [], [], false],
    [[33, 65], [shape(0)], [0], false],
    [[33, 65], [shape(1), 0], [1], false],
    [[2, 1, 3], [shape(1)], [1], false],
    [[0, 3], [shape(0)], [0], false],
    [[4099], [], [], false],
  ];
  for (const op of ["sum", "max", "mean"]) {
    test(`vm.op.${op} float32 over axes, keepdims`, async (dev) => {
      for (const [i, [dims, extra, axes, keepdims]] of REDUCE_CASES.entries()) {
        if (op !== "sum" && sizeOf(dims) === 0) continue;
        const rx = randomRef(dims, 700 + i, -2, 2);
        using x = put(dev, rx);
        const got = await call(`vm.op.${op}`, x, ...extra);
        assertResult(
          got,
          refReduce(op, rx, axes, keepdims),
          "float32",
          FLOAT_TOL,
          `${op} ${fmt(dims)} case ${i}`,
        );
      }
    });
  }
  for (const op of ["sum", "max"]) {
    test(`vm.op.${op} int32`, async (dev) => {
      for (
        const [dims, axes] of [[[6, 7], [1]], [[6, 7], [0]], [[2, 3, 4], []]] as [
          number[],
          number[],
        ][]
      ) {
        const rx = randomIntRef(dims, 800);
        using x = put(dev, rx, "int32");
        const got = await call(`vm.op.${op}`, x, new ShapeTuple(axes));
        assertResult(got, refReduce(op, rx, axes, false), "int32", EXACT, `${op} ${fmt(dims)}`);
      }
    });
  }

  // --------------------------------------------------- softmax, layer_norm

  /** `rx` with every seventh value -Infinity and every eleventh -3.4e38. */
  const masked = (rx: Ref): Ref => ({
    shape: rx.shape,
    data: Array.from(rx.data, (v, i) => i % 7 === 3 ? -Infinity : i % 11 === 5 ? -3.4e38 : v),
  });

  test("vm.op.softmax over the last axis, numerically stable", async (dev) => {
    const refs: Ref[] = [
      randomRef([3, 5], 900, -3, 3),
      randomRef([4, 67], 901, -3, 3),
      randomRef([2, 1], 902),
      randomRef([], 903),
      randomRef([2, 2, 130], 904, -3, 3),
      { shape: [2, 3], data: [1000, 1001, 1002, -1000, -1001, -1002] },
      // More rows than one chunk of the CPU's WebAssembly path (65536 values), with masked
      // entries (-Infinity, -3.4e38, as attention masks write them) whose share must be 0.
      masked(randomRef([1200, 77], 905, -30, 30)),
    ];
    for (const rx of refs) {
      using x = put(dev, rx);
      assertResult(
        await call("vm.op.softmax", x),
        refSoftmax(rx),
        "float32",
        FLOAT_TOL,
        `softmax ${fmt(rx.shape)}`,
      );
    }
  });

  test("vm.op.layer_norm over the trailing axes of gamma", async (dev) => {
    const cases: [number[], number[], number | undefined][] = [
      [[2, 3, 8], [8], undefined],
      [[2, 3, 8], [3, 8], 1e-5],
      [[5, 67], [67], 1e-3],
      [[4], [4], undefined],
      [[3, 130], [130], 1e-5],
    ];
    for (const [i, [xs, gs, eps]] of cases.entries()) {
      const rx = randomRef(xs, 1000 + i, -2, 3), rg = randomRef(gs, 1100 + i, 0.5, 1.5);
      const rb = randomRef(gs, 1200 + i);
      using x = put(dev, rx);
      using g = put(dev, rg);
      using b = put(dev, rb);
      const got = await call("vm.op.layer_norm", x, g, b, ...(eps === undefined ? [] : [eps]));
      const want = refLayerNorm(rx, rg, rb, eps ?? 1e-5);
      assertResult(
        got,
        want,
        "float32",
        { rtol: 1e-4, atol: 1e-4 },
        `layer_norm ${fmt(xs)} ${fmt(gs)}`,
      );
    }
    // A constant row has zero variance: the output is beta.
    using x = tensor([[2, 2, 2]], { device: dev });
    using g = tensor([1, 2, 3], { device: dev });
    using b = tensor([0.5, -0.5, 1], { device: dev });
    assertResult(
      await call("vm.op.layer_norm", x, g, b),
      { shape: [1, 3], data: [0.5, -0.5, 1] },
      "float32",
      FLOAT_TOL,
      "constant row",
    );
  });

  // ------------------------------------------------------------- transpose

  test("vm.op.transpose with default, explicit and negative axes", async (dev) => {
    const cases: [number[], unknown[], number[], string][] = [
      [[2, 3], [], [1, 0], "float32"],
      [[2, 3, 4], [shape(0, 1, 2)], [0, 1, 2], "float32"],
      [[2, 3, 4], [shape(0, 2, 1)], [0, 2, 1], "float32"],
      [[2, 3, 4], [shape(1, 0, 2)], [1, 0, 2], "float32"],
      [[2, 3, 4], [shape(1, 2, 0)], [1, 2, 0], "float32"],
      [[2, 3, 4], [shape(2, 0, 1)], [2, 0, 1], "int32"],
      [[2, 3, 4], [[2, 1, 0]], [2, 1, 0], "float32"],
      [[2, 3, 4], [shape(-1, 0, 1)], [2, 0, 1], "float32"],
      [[1, 5, 1], [], [2, 1, 0], "float32"],
      [[], [], [], "float32"],
      [[37, 70], [null], [1, 0], "float32"],
      [[3, 4, 5, 6], [shape(0, 2, 3, 1)], [0, 2, 3, 1], "int32"],
    ];
    for (const [i, [dims, extra, perm, dt]] of cases.entries()) {
      const rx = dt === "int32" ? randomIntRef(dims, 1300 + i) : randomRef(dims, 1300 + i);
      using x = put(dev, rx, dt);
      const got = await call("vm.op.transpose", x, ...extra);
      assertResult(got, refTranspose(rx, perm), dt, EXACT, `transpose ${fmt(dims)} case ${i}`);
    }
  });

  // ------------------------------------------------------------------ cast

  const castCase = (name: string, pairs: [TensorDType, TensorDType, number[]][]) =>
    test(name, async (dev) => {
      for (const [from, to, values] of pairs) {
        using x = tensor(values, { dtype: from, device: dev });
        const stored = Array.from(await x.data() as ArrayLike<number>);
        for (const target of [to, dtype(to)]) {
          const got = await call("vm.op.cast", x, target);
          const want = {
            shape: [values.length],
            data: stored.map((v) => refCastValue(v, from, to)),
          };
          assertResult(got, want, to, EXACT, `cast ${from} → ${to}`);
        }
      }
    });
  castCase("vm.op.cast between float32 and int32", [
    ["float32", "int32", [1.5, -1.5, 2.7, -2.7, 0, 3e9, -3e9, NaN, Infinity]],
    ["int32", "float32", [1, -2, 16777217, -2147483648]],
    ["float32", "float32", [1.25, -0, NaN]],
    ["int32", "int32", [5, -5]],
  ]);
  castCase("vm.op.cast to narrow integers, unsigned and bool", [
    ["float32", "uint8", [-5, 300, 12.9, NaN]],
    ["int32", "int8", [127, 128, -129, 255]],
    ["int32", "uint32", [-1, 7]],
    ["float32", "uint32", [-1, 5e9, 7.9]],
    ["float32", "bool", [0, -0, 2, NaN]],
    ["bool", "float32", [0, 1]],
    ["uint8", "int32", [0, 255]],
  ]);
  castCase("vm.op.cast to and from float64", [
    ["float32", "float64", [0.1, -3]],
    ["float64", "float32", [0.1, 1e300]],
    ["float64", "int32", [-2.5, 1e12]],
  ]);
  test("vm.op.cast of a 0-d tensor", async (dev) => {
    using x = tensor(3.75, { device: dev });
    const got = await call("vm.op.cast", x, "int32");
    assertResult(got, { shape: [], data: [3] }, "int32", EXACT, "cast 0-d");
  });

  // ------------------------------------------------------------------ take

  test("vm.op.take gathers rows along an axis (embedding lookup)", async (dev) => {
    const cases: [number[], number[], number[], number | undefined][] = [
      // [x shape, indices shape, index values, axis]
      [[7, 5], [3], [3, 0, 6], 0],
      [[7, 5], [2, 3], [1, -1, -7, 6, 0, 2], 0],
      [[7, 5], [], [4], 0], // a 0-d index removes the axis
      [[3, 4, 5], [2], [3, -4], 1],
      [[3, 4, 5], [4], [4, 0, -1, 2], -1],
      [[3, 4], [5], [11, 0, -12, 5, 7], undefined], // flattened
      [[6], [2, 2], [5, 0, -6, 3], 0],
      [[50, 64], [9], [49, 0, 7, 7, 13, 25, 48, 1, 30], 0], // whole-vec4 rows on the GPU
      [[7, 0], [3], [1, 2, 3], 0],
      [[0, 5], [0], [], 0],
      [[7, 5], [0, 2], [], 0],
    ];
    for (const [i, [xs, is, values, axis]] of cases.entries()) {
      const rx = randomRef(xs, 1400 + i);
      const ri: Ref = { shape: is, data: values };
      using x = put(dev, rx);
      for (const where of [dev, cpu()]) {
        for (const dt of ["int32", "int64"] as const) {
          using idx = tensor(values, { shape: is, dtype: dt, device: where });
          const got = await call("vm.op.take", x, idx, ...(axis === undefined ? [] : [axis]));
          assertResult(
            got,
            refTake(rx, ri, axis),
            "float32",
            EXACT,
            `take ${fmt(xs)} axis ${axis}, ${dt} indices on ${where.kind}`,
          );
          assertEquals(got.device, dev);
        }
      }
    }
  });

  test("vm.op.take of integer, 8-, 16- and 64-bit tensors, and a 0-d tensor flattened", async (dev) => {
    const rx = randomIntRef([5, 3], 1450);
    using x = put(dev, rx, "int32");
    using idx = tensor([4, 4, 0], { dtype: "int32", device: dev });
    const ri: Ref = { shape: [3], data: [4, 4, 0] };
    assertResult(await call("vm.op.take", x, idx, 0), refTake(rx, ri, 0), "int32", EXACT, "int32");
    const bytes: Ref = {
      shape: [5, 8],
      data: Array.from({ length: 40 }, (_, i) => (i * 37) % 256),
    };
    using b = put(dev, bytes, "uint8");
    assertResult(
      await call("vm.op.take", b, idx, 0),
      refTake(bytes, ri, 0),
      "uint8",
      EXACT,
      "uint8",
    );
    // 64-bit elements, and 16-bit ones in rows of whole 4-byte words.
    for (const dt of ["int64", "float64", "float16", "bfloat16"]) {
      const r: Ref = { shape: [5, 2], data: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] };
      using t = put(dev, r, dt);
      assertResult(await call("vm.op.take", t, idx, 0), refTake(r, ri, 0), dt, EXACT, dt);
    }
    using s = tensor(2.5, { device: dev });
    using zero = tensor([0, -1, 0], { dtype: "int32", device: dev });
    const got = await call("vm.op.take", s, zero);
    assertResult(got, { shape: [3], data: [2.5, 2.5, 2.5] }, "float32", EXACT, "0-d");
  });

  test("vm.op.take clip and wrap modes map out-of-range indices", async (dev) => {
    const rx = randomRef([4, 3], 1460);
    const values = [-9, -5, -1, 0, 3, 4, 7, 2147483647, -2147483648];
    const ri: Ref = { shape: [values.length], data: values };
    using x = put(dev, rx);
    for (const mode of ["clip", "wrap"]) {
      for (const where of [dev, cpu()]) {
        for (const dt of ["int32", "int64"] as const) {
          using idx = tensor(values, { dtype: dt, device: where });
          assertResult(
            await call("vm.op.take", x, idx, 0, mode),
            refTake(rx, ri, 0, mode),
            "float32",
            EXACT,
            `take mode ${mode}, ${dt} indices on ${where.kind}`,
          );
        }
      }
    }
    // int64 indices in CPU memory map exactly, far outside the int32 range too.
    const wide = [2 ** 40, -(2 ** 40) - 1, 2 ** 53 - 1, -5];
    using wideIdx = tensor(wide, { dtype: "int64" });
    for (const mode of ["clip", "wrap"]) {
      assertResult(
        await call("vm.op.take", x, wideIdx, 0, mode),
        refTake(rx, { shape: [4], data: wide }, 0, mode),
        "float32",
        EXACT,
        `take mode ${mode}, wide int64 indices`,
      );
    }
    // null skips the axis: x is read flattened.
    using idx = tensor([13, -13], { dtype: "int32", device: dev });
    assertResult(
      await call("vm.op.take", x, idx, null, "wrap"),
      refTake(rx, { shape: [2], data: [13, -13] }, undefined, "wrap"),
      "float32",
      EXACT,
      "wrap flattened",
    );
  });

  // --------------------------------------------------------- strided_slice

  test("vm.op.strided_slice with NumPy bounds, negative indices and strides", async (dev) => {
    const big = 2 ** 40;
    const cases: [number[], number[], number[], number[], number[] | undefined][] = [
      // [x shape, axes, begin, end, strides]
      [[2, 3, 4], [0], [1], [2], undefined],
      [[2, 3, 4], [1, 2], [0, 1], [2, 3], undefined],
      [[2, 3, 4], [-1], [-3], [big], undefined],
      [[2, 3, 4], [2, 0], [-big, 0], [-1, 5], [1, 1]],
      [[2, 3, 4], [2], [0], [4], [2]],
      [[2, 3, 4], [2], [3], [-big], [-1]], // reversed
      [[2, 3, 4], [1, 2], [-1, 3], [-5, 0], [-2, -2]],
      [[2, 3, 4], [0, 1, 2], [0, 0, 0], [big, big, big], [1, 1, 1]], // a full copy
      [[2, 3, 4], [1], [2], [1], undefined], // empty
      [[2, 3, 4], [1], [5], [9], undefined], // begin past the end: empty
      [[2, 3, 4], [2], [-1], [-1], [-1]], // empty, backwards
      [[2, 3, 4], [], [], [], undefined],
      [[1, 2, 10, 8], [2], [0], [5], undefined], // a KV cache's filled rows
      [[1, 2, 10, 8], [2], [9], [10], undefined], // the newest row
      [[5, 70], [1], [3], [68], [3]],
      [[0, 4], [1], [1], [3], undefined],
      [[], [], [], [], undefined],
    ];
    for (const [i, [xs, axes, begin, end, strides]] of cases.entries()) {
      for (const dt of ["float32", "int32"]) {
        const rx = dt === "int32" ? randomIntRef(xs, 1500 + i) : randomRef(xs, 1500 + i);
        using x = put(dev, rx, dt);
        const extra = strides === undefined ? [] : [shape(...strides)];
        const got = await call(
          "vm.op.strided_slice",
          x,
          shape(...axes),
          shape(...begin),
          shape(...end),
          ...extra,
        );
        assertResult(
          got,
          refStridedSlice(rx, axes, begin, end, strides),
          dt,
          EXACT,
          `strided_slice ${fmt(xs)} case ${i} ${dt}`,
        );
      }
    }
  });

  test("vm.op.strided_slice known results and 8-, 16- and 64-bit dtypes", async (dev) => {
    using x = tensor([[1, 2, 3, 4], [5, 6, 7, 8]], { device: dev });
    // x[:, ::-2], x[-1:, 1:3], arrays as well as ShapeTuples.
    assertEquals((await call("vm.op.strided_slice", x, [1], [-1], [-5], [-2])).data, [4, 2, 8, 6]);
    assertEquals((await call("vm.op.strided_slice", x, [0, 1], [-1, 1], [2, 3])).data, [6, 7]);
    assertEquals(
      (await call("vm.op.strided_slice", x, shape(1), shape(1), shape(3), null)).shape,
      [2, 2],
    );
    for (const dt of ["uint8", "int16", "float16", "bfloat16", "float64", "int64", "bool"]) {
      const values = [1, 0, 3, 4, 5, 0, 7, 8, 9, 10, 11, 12].map((
        v,
      ) => (dt === "bool" ? v % 2 : v));
      const rx: Ref = { shape: [3, 4], data: values };
      using t = put(dev, rx, dt);
      const got = await call("vm.op.strided_slice", t, [1, 0], [3, -1], [0, 0], [-1, -2]);
      assertResult(
        got,
        refStridedSlice(rx, [1, 0], [3, -1], [0, 0], [-1, -2]),
        dt,
        EXACT,
        `strided_slice ${dt}`,
      );
    }
  });

  // ---------------------------------------------------------- broadcast_to

  test("vm.op.broadcast_to: leading axes added, axes of 1 repeated, 32- and 64-bit dtypes", async (dev) => {
    for (const dt of ["float32", "int32", "int64", "uint8"]) {
      using row = put(dev, { shape: [1, 3], data: [1, 2, 3] }, dt);
      // An ONNX Expand of position ids [1, T] to [B, T], the target a ShapeTuple.
      const got = await call("vm.op.broadcast_to", row, shape(2, 3));
      assertEquals([got.shape, got.dtype, got.data], [[2, 3], dt, [1, 2, 3, 1, 2, 3]], dt);
      using col = put(dev, { shape: [2, 1, 1], data: [4, 5] }, dt);
      const mask = await call("vm.op.broadcast_to", col, [3, 2, 1, 2]);
      assertEquals(mask.shape, [3, 2, 1, 2]);
      assertEquals(mask.data, [4, 4, 5, 5, 4, 4, 5, 5, 4, 4, 5, 5], dt);
    }
    using x = put(dev, { shape: [2, 3], data: [1, 2, 3, 4, 5, 6] });
    assertEquals((await call("vm.op.broadcast_to", x, [2, 3])).data, [1, 2, 3, 4, 5, 6]);
    assertThrows(() => getGlobalFunc("vm.op.broadcast_to")!(x, [4, 3]), RangeError, "[2, 3]");
    assertThrows(() => getGlobalFunc("vm.op.broadcast_to")!(x, [3]), RangeError, "broadcast");
  });

  // ---------------------------------------------------------------- concat

  test("vm.op.concat along any axis, from a tuple or an array", async (dev) => {
    const cases: [number[][], number][] = [
      [[[2, 3], [2, 5]], 1],
      [[[2, 3], [4, 3], [1, 3]], 0],
      [[[2, 3, 4], [2, 1, 4], [2, 2, 4]], -2],
      [[[1, 2, 5, 8], [1, 2, 1, 8]], 2], // a KV cache growing by one token
      [[[3, 4]], 1],
      [[[2, 0], [2, 3], [2, 0]], 1],
      [[[0, 3], [0, 3]], 1],
      [[[5], [7]], 0],
      [[[2, 3, 6], [2, 3, 10]], -1],
    ];
    for (const [i, [shapes, axis]] of cases.entries()) {
      for (const dt of ["float32", "int32"]) {
        const refs = shapes.map((s, k) =>
          dt === "int32" ? randomIntRef(s, 1600 + 10 * i + k) : randomRef(s, 1600 + 10 * i + k)
        );
        const xs = refs.map((r) => put(dev, r, dt));
        try {
          const want = refConcat(refs, axis);
          const what = `concat ${shapes.map(fmt).join(" ")} axis ${axis} ${dt}`;
          assertResult(await call("vm.op.concat", xs, axis), want, dt, EXACT, what);
          const tuple = new Tuple(xs);
          try {
            assertResult(await call("vm.op.concat", tuple, axis), want, dt, EXACT, `${what} tuple`);
          } finally {
            tuple.releaseIfUnowned();
          }
        } finally {
          for (const x of xs) x.dispose();
        }
      }
    }
    // The axis defaults to 0.
    using a = tensor([[1, 2]], { device: dev });
    using b = tensor([[3, 4], [5, 6]], { device: dev });
    assertEquals((await call("vm.op.concat", [a, b])).data, [1, 2, 3, 4, 5, 6]);
  });

  test("vm.op.concat of 8-, 16- and 64-bit rows", async (dev) => {
    for (const dt of ["uint8", "int16", "float16", "bfloat16", "float64", "int64"]) {
      const ra: Ref = { shape: [3, 3], data: [1, 2, 3, 4, 5, 6, 7, 8, 9] };
      const rb: Ref = { shape: [3, 2], data: [10, 11, 12, 13, 14, 15] };
      using a = put(dev, ra, dt);
      using b = put(dev, rb, dt);
      assertResult(
        await call("vm.op.concat", [a, b, a], 1),
        refConcat([ra, rb, ra], 1),
        dt,
        EXACT,
        `concat ${dt}`,
      );
    }
  });

  // --------------------------------------------------- causal_mask, attention

  test("vm.op.causal_mask hides keys after each query's position", async (dev) => {
    const cases: [number[], number | undefined][] = [
      [[3, 3], undefined],
      [[2, 3, 5], undefined], // default offset n - m = 2
      [[4, 4], 0],
      [[4, 4], -1],
      [[2, 5], 10],
      [[3, 5], -10],
      [[2, 1, 4], undefined], // decode: one query sees every key
      [[2, 2, 67, 67], undefined],
      [[0, 3], undefined],
    ];
    for (const [i, [xs, offset]] of cases.entries()) {
      const rx = randomRef(xs, 1700 + i);
      using x = put(dev, rx);
      const m = xs[xs.length - 2], n = xs[xs.length - 1];
      const got = await call("vm.op.causal_mask", x, ...(offset === undefined ? [] : [offset]));
      assertResult(
        got,
        refCausalMask(rx, offset ?? n - m),
        "float32",
        EXACT,
        `causal_mask ${fmt(xs)} offset ${offset}`,
      );
    }
  });

  /** Attention cases: q, k, v shapes, the `causal` argument, the scale, and the reference's offset. */
  const ATTENTION_CASES: [number[], number[], number[], unknown, number | undefined][] = [
    [[2, 3, 5, 8], [2, 3, 5, 8], [2, 3, 5, 8], undefined, undefined],
    [[2, 3, 5, 8], [2, 3, 5, 8], [2, 3, 5, 8], 1, undefined],
    [[1, 6, 1, 64], [1, 6, 1, 64], [1, 6, 1, 64], 1, undefined], // first decode step, Tk = 1
    [[1, 6, 1, 64], [1, 6, 37, 64], [1, 6, 37, 64], 1, undefined], // decode
    [[4, 9, 8], [4, 9, 8], [4, 9, 8], true, undefined], // [H, T, D]
    [[4, 9, 8], [4, 13, 8], [4, 13, 8], "BottomRight", 0.5],
    [[6, 8], [9, 8], [9, 8], "TopLeft", undefined], // [T, D]
    [[2, 5, 4], [2, 3, 4], [2, 3, 4], "TopLeft", undefined], // more queries than keys
    [[3, 2, 5, 6], [3, 2, 7, 6], [3, 2, 7, 3], 0, undefined], // D = 6 (no vec4), Dv = 3
    [[2, 3, 7, 128], [2, 3, 7, 128], [2, 3, 7, 128], 1, undefined],
    [[2, 3, 160], [2, 70, 160], [2, 70, 136], 1, undefined], // head sizes above 128
    [[1, 2, 3, 64], [1, 2, 1500, 64], [1, 2, 1500, 64], 1, undefined], // two chunks on the GPU
    [[1, 2, 2, 12], [1, 2, 2100, 12], [1, 2, 2100, 20], false, 0.3], // three chunks
    [[2, 0, 8], [2, 4, 8], [2, 4, 8], 1, undefined], // no queries
    [[0, 3, 8], [0, 5, 8], [0, 5, 8], undefined, undefined], // no heads
    [[2, 3, 8], [2, 5, 8], [2, 5, 0], undefined, undefined], // Dv = 0
    [[2, 3, 0], [2, 5, 0], [2, 5, 4], undefined, undefined], // D = 0: uniform weights
  ];

  test("vm.op.attention matches softmax(q kᵀ · scale) v, causal or not", async (dev) => {
    for (const [i, [qs, ks, vs, causal, scale]] of ATTENTION_CASES.entries()) {
      const rq = randomRef(qs, 1800 + i, -2, 2), rk = randomRef(ks, 1900 + i, -2, 2);
      const rv = randomRef(vs, 2000 + i);
      using q = put(dev, rq);
      using k = put(dev, rk);
      using v = put(dev, rv);
      const D = qs[qs.length - 1], Tq = qs[qs.length - 2], Tk = ks[ks.length - 2];
      const offset = causal === "TopLeft"
        ? 0
        : causal === 1 || causal === true || causal === "BottomRight"
        ? Tk - Tq
        : null;
      const args = scale === undefined ? (causal === undefined ? [] : [causal]) : [causal, scale];
      const got = await call("vm.op.attention", q, k, v, ...args);
      assertResult(
        got,
        refAttention(rq, rk, rv, scale ?? (D === 0 ? 1 : 1 / Math.sqrt(D)), offset),
        "float32",
        { rtol: 1e-4, atol: 1e-5 },
        `attention q ${fmt(qs)} k ${fmt(ks)} v ${fmt(vs)} causal ${causal}`,
      );
    }
  });

  const BSHD_CASES: [number[], number[], number[], unknown][] = [
    // [q, k, v] as [..., tokens, heads, head size]
    [[1, 4, 16], [9, 4, 16], [9, 4, 16], 1], // a decode step against a KV cache's rows
    [[7, 4, 16], [7, 4, 16], [7, 4, 16], 1], // a causal prefill
    [[5, 3, 8], [12, 3, 8], [12, 3, 6], 1], // Dv ≠ D, a prefill after cached tokens
    [[2, 3, 2, 12], [2, 5, 2, 12], [2, 5, 2, 12], undefined], // batches
    [[3, 2, 5], [4, 2, 5], [4, 2, 3], "TopLeft"], // D not a multiple of 4
    [[64, 6, 64], [64, 6, 64], [64, 6, 64], 1],
  ];
  test('vm.op.attention with layout "BSHD" equals "BHSD" on transposed operands', async (dev) => {
    for (const [i, [qs, ks, vs, causal]] of BSHD_CASES.entries()) {
      const rq = randomRef(qs, 2300 + i, -2, 2), rk = randomRef(ks, 2400 + i, -2, 2);
      const rv = randomRef(vs, 2500 + i);
      using q = put(dev, rq);
      using k = put(dev, rk);
      using v = put(dev, rv);
      // The reference attends over [..., heads, tokens, size]: swap the token and head axes.
      const swap = (r: Ref) => refTranspose(r, swapLast(r.shape.length));
      const rank = qs.length, Tq = qs[rank - 3], Tk = ks[rank - 3];
      const offset = causal === 1 ? Tk - Tq : causal === "TopLeft" ? 0 : null;
      const D = qs[rank - 1];
      const expected = swap(
        refAttention(swap(rq), swap(rk), swap(rv), 1 / Math.sqrt(D), offset),
      );
      const got = await call("vm.op.attention", q, k, v, causal ?? 0, null, "BSHD");
      assertResult(
        got,
        expected,
        "float32",
        { rtol: 1e-4, atol: 1e-5 },
        `attention BSHD q ${fmt(qs)} k ${fmt(ks)} v ${fmt(vs)} causal ${causal}`,
      );
    }
  });

  test("vm.op.attention stays finite for large scores", async (dev) => {
    const rq: Ref = { shape: [1, 2, 4], data: [30, 30, 30, 30, -30, 30, -30, 30] };
    const rk: Ref = {
      shape: [1, 3, 4],
      data: [30, 30, 30, 30, 30, -30, 30, -30, -30, 30, -30, 30],
    };
    const rv: Ref = { shape: [1, 3, 2], data: [1, 2, 3, 4, 5, 6] };
    using q = put(dev, rq);
    using k = put(dev, rk);
    using v = put(dev, rv);
    // Scores reach ±3600 · scale: exp would overflow without the max subtraction.
    const got = await call("vm.op.attention", q, k, v, 0, 1);
    assertResult(got, refAttention(rq, rk, rv, 1, null), "float32", FLOAT_TOL, "large scores");
    assert(got.data.every(Number.isFinite), `${got.data}`);
  });

  test("vm.op.attention equals the unfused matmul, causal_mask, softmax, matmul path", async (dev) => {
    const [H, Tq, Tk, D] = [3, 4, 11, 16];
    const rq = randomRef([1, H, Tq, D], 2100), rk = randomRef([1, H, Tk, D], 2101);
    const rv = randomRef([1, H, Tk, D], 2102);
    using q = put(dev, rq);
    using k = put(dev, rk);
    using v = put(dev, rv);
    const op = (name: string, ...args: unknown[]) => getGlobalFunc(name)!(...args) as NDArray;
    using kt = op("vm.op.transpose", k, shape(0, 1, 3, 2));
    using scores = op("vm.op.matmul", q, kt);
    using scale = tensor(1 / Math.sqrt(D), { device: dev });
    using scaled = op("vm.op.multiply", scores, scale);
    using masked = op("vm.op.causal_mask", scaled);
    using p = op("vm.op.softmax", masked);
    const unfused = await call("vm.op.matmul", p, v);
    const fused = await call("vm.op.attention", q, k, v, 1);
    assertResult(
      fused,
      { shape: unfused.shape, data: unfused.data },
      "float32",
      FLOAT_TOL,
      "fused",
    );
  });

  test("the new operators run inside a VM program, outputs counted by memory_stats", async (dev) => {
    // A decode step's plumbing: embed a token, grow a cache by concat, slice it, attend.
    const ib = new ExecBuilder();
    ib.function("step", { num_inputs: 3 }, () => {
      ib.emit_call("vm.op.take", [ib.r(0), ib.r(1), ib.imm(0)], { dst: ib.r(3) }); // [1, 4]
      ib.emit_call("vm.builtin.make_tuple", [ib.r(2), ib.r(3)], { dst: ib.r(4) });
      ib.emit_call("vm.op.concat", [ib.r(4), ib.imm(0)], { dst: ib.r(5) }); // [3, 4]
      ib.emit_call("vm.op.strided_slice", [ib.r(5), [0], [-2], [1000]], { dst: ib.r(6) });
      ib.emit_call("vm.op.attention", [ib.r(3), ib.r(6), ib.r(6), ib.imm(1)], { dst: ib.r(7) });
      ib.emit_ret(ib.r(7));
    });
    const vm = new VirtualMachine(ib.get(), dev);
    const rt = randomRef([5, 4], 2200), rc = randomRef([2, 4], 2201);
    using table = put(dev, rt);
    using cache = put(dev, rc);
    using token = tensor([3], { dtype: "int32" });
    using out = await vm.invoke("step", table, token, cache) as NDArray;
    const q = refTake(rt, { shape: [1], data: [3] }, 0);
    const kv = refStridedSlice(refConcat([rc, q], 0), [0], [-2], [1000]);
    assertResult(
      {
        shape: [...out.shape],
        dtype: out.dtype,
        device: out.device,
        data: Array.from(await out.data() as Float32Array),
      },
      refAttention(q, kv, kv, 0.5, 1),
      "float32",
      FLOAT_TOL,
      "step",
    );
    const stats = vm.memory_stats(dev);
    assert(stats.peakBytes >= (4 + 12 + 8 + 4) * 4, JSON.stringify(stats));
    assert(stats.liveBytes >= out.nbytes, JSON.stringify(stats));
  });

  // ---------------------------------------------------------------- errors

  /** Asserts that calling `name` throws `ErrorClass` with every one of `parts` in the message. */
  const assertOpThrows = (
    ErrorClass: new (...args: never[]) => Error,
    parts: string[],
    name: string,
    ...args: unknown[]
  ) => {
    const e = assertThrows(() => getGlobalFunc(name)!(...args), ErrorClass);
    for (const p of [name, ...parts]) {
      assert((e as Error).message.includes(p), `message "${(e as Error).message}" lacks "${p}"`);
    }
  };

  test("bad operands throw errors naming the operator, shapes and dtypes", (dev) => {
    using a23 = tensor([[1, 2, 3], [4, 5, 6]], { device: dev });
    using a4 = tensor([1, 2, 3, 4], { device: dev });
    using i4 = tensor([1, 2, 3, 4], { dtype: "int32", device: dev });
    using m45 = tensor(new Float32Array(20), { shape: [4, 5], device: dev });
    using s = tensor(1, { device: dev });
    using f64 = tensor([1, 2], { dtype: "float64", device: dev });
    assertOpThrows(RangeError, ["shapes [2, 3] and [4] do not broadcast"], "vm.op.add", a23, a4);
    assertOpThrows(RangeError, ["[2, 3]", "[4]"], "vm.op.maximum", a23, a4);
    assertOpThrows(TypeError, ["float32", "int32"], "vm.op.multiply", a4, i4);
    assertOpThrows(TypeError, ["float64"], "vm.op.subtract", f64, f64);
    assertOpThrows(TypeError, ["int32"], "vm.op.exp", i4);
    assertOpThrows(TypeError, ["int32"], "vm.op.gelu", i4);
    assertOpThrows(TypeError, ["int32"], "vm.op.mean", i4);
    assertOpThrows(TypeError, ["int32"], "vm.op.matmul", i4, i4);
    assertOpThrows(RangeError, ["[2, 3]", "[4, 5]", "3", "4"], "vm.op.matmul", a23, m45);
    assertOpThrows(RangeError, ["[]"], "vm.op.matmul", s, a4);
    assertOpThrows(TypeError, ["int32"], "vm.op.linear", i4, m45);
    assertOpThrows(RangeError, ["[2, 3]", "[4, 5]", "in-features (5)"], "vm.op.linear", a23, m45);
    assertOpThrows(RangeError, ["weight [N, K]", "[4]"], "vm.op.linear", a4, a4);
    assertOpThrows(RangeError, ["bias [4]", "must be [2]"], "vm.op.linear", a23, a23, a4);
    assertOpThrows(TypeError, ["expected 2 to 3 arguments, got 1"], "vm.op.linear", a4);
    assertOpThrows(RangeError, ["axis 2", "[2, 3]"], "vm.op.argmax", a23, 2);
    assertOpThrows(TypeError, ["float64"], "vm.op.argmax", f64);
    assertOpThrows(RangeError, ["top_p", "number 0"], "vm.op.sample_top_p", a23, a4, 1, 0);
    assertOpThrows(RangeError, ["temperature", "number -1"], "vm.op.sample_top_p", a23, a4, -1, 1);
    assertOpThrows(
      RangeError,
      ["2 rows", "2 uniform samples", "[4]"],
      "vm.op.sample_top_p",
      a23,
      a4,
      1,
      1,
    );
    assertOpThrows(TypeError, ["expected 2 arguments, got 1"], "vm.op.add", a4);
    assertOpThrows(TypeError, ["expected 1 argument, got 2"], "vm.op.exp", a4, a4);
    assertOpThrows(TypeError, ["argument 1", "NDArray", "number 3"], "vm.op.add", a4, 3);
    assertOpThrows(TypeError, ["argument 0"], "vm.op.softmax", "x");
  });

  test("bad axes, keepdims, eps and dtypes throw errors naming the operator", (dev) => {
    using a23 = tensor([[1, 2, 3], [4, 5, 6]], { device: dev });
    using g3 = tensor([1, 1, 1], { device: dev });
    using g2 = tensor([1, 1], { device: dev });
    using empty = tensor(new Float32Array(0), { shape: [0, 3], device: dev });
    assertOpThrows(RangeError, ["axis 2", "[2, 3]"], "vm.op.sum", a23, shape(2));
    assertOpThrows(RangeError, ["axis -3", "[2, 3]"], "vm.op.max", a23, shape(-3));
    assertOpThrows(RangeError, ["repeat", "[2, 3]"], "vm.op.sum", a23, shape(1, -1));
    assertOpThrows(TypeError, ["keepdims"], "vm.op.sum", a23, shape(0), 2);
    assertOpThrows(TypeError, ["axes"], "vm.op.mean", a23, "0");
    assertOpThrows(RangeError, ["zero elements", "[0, 3]"], "vm.op.max", empty, shape(0));
    assertOpThrows(RangeError, ["permutation", "[2, 3]"], "vm.op.transpose", a23, shape(0, 0));
    assertOpThrows(RangeError, ["permutation", "[2, 3]"], "vm.op.transpose", a23, shape(0));
    assertOpThrows(RangeError, ["axis 5"], "vm.op.transpose", a23, shape(5, 0));
    assertOpThrows(RangeError, ["gamma [2]", "[2, 3]"], "vm.op.layer_norm", a23, g2, g2);
    assertOpThrows(RangeError, ["beta [2]"], "vm.op.layer_norm", a23, g3, g2);
    assertOpThrows(TypeError, ["eps", "string"], "vm.op.layer_norm", a23, g3, g3, "1e-5");
    assertOpThrows(TypeError, ["float17"], "vm.op.cast", a23, "float17");
    assertOpThrows(TypeError, ["dtype", "number 5"], "vm.op.cast", a23, 5);
  });

  test("bad take, strided_slice and concat arguments throw errors naming the operator", (dev) => {
    using x = tensor([[0, 1], [10, 11], [20, 21]], { device: dev });
    using i32 = tensor([[1, 2, 3], [4, 5, 6]], { dtype: "int32", device: dev });
    using idx = tensor([0, 2], { dtype: "int32", device: dev });
    using far = tensor([0, 3], { dtype: "int32" });
    using below = tensor([-4], { dtype: "int32" });
    using six = tensor([6], { dtype: "int32" });
    using fidx = tensor([0, 1], { device: dev });
    using f33 = tensor(new Float32Array(9), { shape: [3, 3], device: dev });
    using empty = tensor(new Float32Array(0), { shape: [0, 2], device: dev });
    using s = tensor(1, { device: dev });
    assertOpThrows(TypeError, ["expected 2 to 4 arguments, got 1"], "vm.op.take", x);
    assertOpThrows(TypeError, ["argument 0 (x)", "NDArray"], "vm.op.take", "x", idx);
    assertOpThrows(TypeError, ["indices", "float32", "int32 or int64"], "vm.op.take", x, fidx, 0);
    assertOpThrows(RangeError, ["axis 2", "[3, 2]"], "vm.op.take", x, idx, 2);
    assertOpThrows(RangeError, ["axis -3"], "vm.op.take", x, idx, -3);
    assertOpThrows(TypeError, ["axis", "number 0.5"], "vm.op.take", x, idx, 0.5);
    assertOpThrows(TypeError, ["axis", 'string "0"'], "vm.op.take", x, idx, "0");
    assertOpThrows(TypeError, ["mode", '"nan"'], "vm.op.take", x, idx, 0, "nan");
    // Indices in CPU memory are checked, whatever device x is on.
    assertOpThrows(RangeError, ["index 3", "axis 0", "length 3"], "vm.op.take", x, far, 0);
    assertOpThrows(RangeError, ["index -4", "-3 to 2"], "vm.op.take", x, below, 0);
    assertOpThrows(RangeError, ["index 6", "length 6"], "vm.op.take", x, six); // flattened
    assertOpThrows(RangeError, ["axis 0 of length 0", "[0, 2]"], "vm.op.take", empty, idx, 0);

    const SS = "vm.op.strided_slice";
    assertOpThrows(TypeError, ["expected 4 to 5 arguments, got 3"], SS, x, [0], [0]);
    assertOpThrows(RangeError, ["lengths 1, 2, 1 and 1"], SS, x, [0], [0, 1], [1]);
    assertOpThrows(RangeError, ["lengths 1, 1, 1 and 2"], SS, x, [0], [0], [1], [1, 1]);
    assertOpThrows(RangeError, ["stride 0 on axis 1"], SS, x, [1], [0], [1], [0]);
    assertOpThrows(RangeError, ["repeat", "[3, 2]"], SS, x, [1, -1], [0, 0], [1, 1]);
    assertOpThrows(RangeError, ["axis 2", "[3, 2]"], SS, x, [2], [0], [1]);
    assertOpThrows(TypeError, ["axes", 'string "0"'], SS, x, "0", [0], [1]);
    assertOpThrows(TypeError, ["begin", "1.5"], SS, x, [0], [1.5], [2]);
    assertOpThrows(TypeError, ["end"], SS, x, [0], [0], null);
    assertOpThrows(TypeError, ["strides"], SS, x, [0], [0], [1], 2);

    const C = "vm.op.concat";
    assertOpThrows(TypeError, ["expected 1 to 2 arguments, got 0"], C);
    assertOpThrows(TypeError, ["tuple", "NDArray(float32, [3, 2]"], C, x, 0);
    assertOpThrows(RangeError, ["at least one tensor"], C, [], 0);
    assertOpThrows(TypeError, ["tensor 1 of the tuple", "NDArray", "number 3"], C, [x, 3], 0);
    assertOpThrows(TypeError, ["float32", "int32"], C, [x, i32], 0);
    assertOpThrows(RangeError, ["[3, 2]", "[3, 3]", "outside axis 0"], C, [x, f33], 0);
    assertOpThrows(RangeError, ["[3, 2]", "[2]", "outside axis 1"], C, [x, fidx], 1);
    assertOpThrows(RangeError, ["0-d"], C, [s, s], 0);
    assertOpThrows(RangeError, ["axis 2", "[3, 2]"], C, [x, x], 2);
    assertOpThrows(TypeError, ["axis", "number 0.5"], C, [x, x], 0.5);
  });

  test("bad causal_mask and attention arguments throw errors naming the operator", (dev) => {
    using q = tensor(new Float32Array(2 * 5 * 4), { shape: [2, 5, 4], device: dev });
    using k = tensor(new Float32Array(2 * 3 * 4), { shape: [2, 3, 4], device: dev });
    using k8 = tensor(new Float32Array(2 * 3 * 8), { shape: [2, 3, 8], device: dev });
    using k0 = tensor(new Float32Array(0), { shape: [2, 0, 4], device: dev });
    using h3 = tensor(new Float32Array(3 * 3 * 4), { shape: [3, 3, 4], device: dev });
    using v4 = tensor(new Float32Array(2 * 4 * 4), { shape: [2, 4, 4], device: dev });
    using rank4 = tensor(new Float32Array(2 * 3 * 4), { shape: [1, 2, 3, 4], device: dev });
    using iq = tensor(new Int32Array(2 * 5 * 4), { shape: [2, 5, 4], dtype: "int32", device: dev });
    using row = tensor([1, 2, 3], { device: dev });
    const CM = "vm.op.causal_mask", A = "vm.op.attention";
    assertOpThrows(TypeError, ["expected 1 to 2 arguments, got 0"], CM);
    assertOpThrows(RangeError, ["at least 2 dimensions", "[3]"], CM, row);
    assertOpThrows(TypeError, ["scores", "int32"], CM, iq);
    assertOpThrows(TypeError, ["offset", "number 0.5"], CM, q, 0.5);
    assertOpThrows(TypeError, ["expected 3 to 6 arguments, got 2"], A, q, k);
    assertOpThrows(TypeError, ["layout", 'string "BHDS"'], A, q, k, k, 0, null, "BHDS");
    assertOpThrows(RangeError, ["at least 3", "[3]"], A, row, row, row, 0, null, "BSHD");
    assertOpThrows(RangeError, ["head axes", "[2, 3, 8]"], A, q, k8, k8, 0, null, "BSHD");
    assertOpThrows(TypeError, ["argument 2 (v)", "NDArray"], A, q, k, "v");
    assertOpThrows(TypeError, ["q", "int32"], A, iq, k, k);
    assertOpThrows(RangeError, ["one rank", "[3]"], A, row, row, row);
    assertOpThrows(RangeError, ["one rank", "[1, 2, 3, 4]"], A, q, rank4, k);
    assertOpThrows(RangeError, ["leading axes", "[3, 3, 4]"], A, q, h3, h3);
    assertOpThrows(RangeError, ["head size", "[2, 3, 8]"], A, q, k8, k);
    assertOpThrows(RangeError, ["number of keys", "[2, 4, 4]"], A, q, k, v4);
    assertOpThrows(RangeError, ["at least one key", "[2, 0, 4]"], A, q, k0, k0);
    assertOpThrows(RangeError, ["bottom-right", "Tq 5 and Tk 3"], A, q, k, k, 1);
    assertOpThrows(RangeError, ["bottom-right"], A, q, k, k, "BottomRight");
    assertOpThrows(TypeError, ["causal", "number 2"], A, q, k, k, 2);
    assertOpThrows(TypeError, ["causal", '"topleft"'], A, q, k, k, "topleft");
    assertOpThrows(TypeError, ["scale", "NaN"], A, q, k, k, 0, NaN);
    assertOpThrows(TypeError, ["scale", 'string "1"'], A, q, k, k, 0, "1");
  });

  test("operands on different devices are rejected, naming both", (dev) => {
    const other = dev.kind === "cpu" && dev.id === 0 ? cpu(1) : cpu(0);
    using a = tensor([1, 2], { device: dev });
    using b = tensor([1, 2], { device: other });
    assertOpThrows(TypeError, ["different devices", String(dev), String(other)], "vm.op.add", a, b);
    assertOpThrows(TypeError, ["different devices"], "vm.op.matmul", a, b);
    assertOpThrows(TypeError, ["different devices"], "vm.op.concat", [a, b]);
    assertOpThrows(TypeError, ["different devices"], "vm.op.attention", a, a, b);
    if (dev.kind !== "cpu") {
      // take reads indices from CPU memory (checked, then uploaded), never from another GPU
      // tensor's device into a CPU x.
      using idx = tensor([0], { dtype: "int32", device: dev });
      assertOpThrows(TypeError, ["different devices"], "vm.op.take", b, idx);
    }
  });
}
