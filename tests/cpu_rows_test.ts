/**
 * The float32 row operators of the CPU's WebAssembly path (layer norm,
 * softmax, and sum / mean / max over trailing axes: kernels/cpu/wasm/rows.ts)
 * on both paths, `"wasm"` (every size) and `"typescript"`, each compared with
 * the plain-JS references of tests/_operator_reference.ts (NumPy semantics):
 * lengths that are not multiples of four (the masked last vector), rows
 * holding NaN, ±Infinity or only -Infinity, more rows than one chunk, rows
 * longer than one, rows whose mean is large beside their spread, and empty
 * tensors. The operator suite runs the ordinary cases on both paths too.
 *
 * @module
 */

import { assert, assertEquals, assertThrows } from "@std/assert";
import { installBuiltins } from "../builtins/install.ts";
import { getGlobalFunc } from "../ground/registry.ts";
import { tensor } from "../devices/tensor.ts";
import type { NDArray } from "../devices/ndarray.ts";
import { shape } from "../ground/shape_tuple.ts";
import {
  type CpuKernelMode,
  setCpuKernelMode,
  wasmKernelsFor,
} from "../kernels/cpu/wasm/runtime.ts";
import {
  type Ref,
  REF_BINARY_FLOAT,
  refAttention,
  refBinary,
  refLayerNorm,
  refReduce,
  refSoftmax,
  sizeOf,
} from "./_operator_reference.ts";

installBuiltins();

/** Deterministic values in [lo, hi) (a linear congruential generator). */
function values(n: number, seed: number, lo = -3, hi = 3): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return lo + (hi - lo) * (s / 2 ** 32);
  });
}

function ref(dims: number[], seed: number, lo?: number, hi?: number): Ref {
  return { shape: dims, data: values(sizeOf(dims), seed, lo, hi).map(Math.fround) };
}

/** `got` within `rtol · |want| + atol` of `want` everywhere; NaN where `want` is, infinities equal. */
function assertClose(got: Float32Array, want: Ref, rtol: number, atol: number, what: string) {
  assertEquals(got.length, want.data.length, `${what}: length`);
  for (let i = 0; i < got.length; i++) {
    const g = got[i], w = want.data[i];
    if (Number.isNaN(w)) assert(Number.isNaN(g), `${what}[${i}]: ${g}, want NaN`);
    else if (!Number.isFinite(w)) assertEquals(g, w, `${what}[${i}]`);
    else assert(Math.abs(g - w) <= rtol * Math.abs(w) + atol, `${what}[${i}]: ${g}, want ${w}`);
  }
}

async function run(name: string, ...args: unknown[]): Promise<Float32Array> {
  using out = getGlobalFunc(name)!(...args) as NDArray;
  return await out.data() as Float32Array;
}

const MODES: CpuKernelMode[] = ["wasm", "typescript"];

function modeTest(name: string, fn: () => Promise<void>) {
  for (const mode of MODES) {
    Deno.test(`${name} (${mode} kernels)`, async () => {
      setCpuKernelMode(mode);
      try {
        await fn();
      } finally {
        setCpuKernelMode("auto");
      }
    });
  }
}

/** Row `r` of `x` (rows of `n`) replaced by `row`. */
function withRow(x: Ref, n: number, r: number, row: number[]): Ref {
  const data = [...x.data];
  data.splice(r * n, n, ...row);
  return { shape: x.shape, data };
}

modeTest("softmax rows: odd lengths, NaN, ±Infinity, all -Infinity, long rows", async () => {
  let x = ref([6, 7], 1);
  x = withRow(x, 7, 1, [1, 2, NaN, 0, 1, 2, 3]);
  x = withRow(x, 7, 2, Array(7).fill(-Infinity));
  x = withRow(x, 7, 3, [0, Infinity, 1, 2, 3, 4, 5]);
  x = withRow(x, 7, 4, [-Infinity, 0, -Infinity, 1, -Infinity, 2, -1e30]);
  const cases: Ref[] = [
    x,
    ref([5, 1], 2),
    ref([3, 2], 3),
    ref([9, 3], 4),
    ref([2, 384], 5, -20, 20),
    ref([700, 101], 6, -10, 10), // more rows than one chunk
    ref([2, 70001], 7, -10, 10), // rows longer than one chunk
  ];
  for (const rx of cases) {
    using t = tensor(Float32Array.from(rx.data), { shape: rx.shape });
    assertClose(await run("vm.op.softmax", t), refSoftmax(rx), 1e-5, 1e-7, `softmax [${rx.shape}]`);
  }
  using empty = tensor(new Float32Array(0), { shape: [3, 0] });
  assertEquals((await run("vm.op.softmax", empty)).length, 0);
});

modeTest("layer_norm rows: odd lengths, large means, NaN rows, many rows", async () => {
  const cases: [number[], number[], number, number][] = [
    // x shape, gamma shape, x offset (a mean far from 0), eps
    [[4, 5], [5], 0, 1e-5],
    [[3, 384], [384], 0, 1e-12],
    [[2, 3, 7], [3, 7], 0, 1e-5],
    [[300, 385], [385], 0, 1e-5], // more rows than one chunk
    [[16, 1536], [1536], 1000, 1e-5], // E[x²] - E[x]² would cancel here
    [[1, 70001], [70001], 0, 1e-5], // one row longer than a chunk
    [[5, 1], [1], 0, 1e-5],
  ];
  for (const [i, [xs, gs, offset, eps]] of cases.entries()) {
    const rx = ref(xs, 20 + i);
    rx.data = rx.data.map((v) => Math.fround(v + offset));
    const rg = ref(gs, 40 + i, 0.5, 1.5), rb = ref(gs, 60 + i);
    using x = tensor(Float32Array.from(rx.data), { shape: xs });
    using g = tensor(Float32Array.from(rg.data), { shape: gs });
    using b = tensor(Float32Array.from(rb.data), { shape: gs });
    const want = refLayerNorm(rx, rg, rb, eps);
    assertClose(await run("vm.op.layer_norm", x, g, b, eps), want, 1e-4, 1e-4, `layer_norm ${xs}`);
  }
  // A row with NaN is NaN; the rows beside it are not disturbed.
  let rx = ref([3, 6], 80);
  rx = withRow(rx, 6, 1, [0, 1, NaN, 2, 3, 4]);
  const rg = ref([6], 81, 0.5, 1.5), rb = ref([6], 82);
  using x = tensor(Float32Array.from(rx.data), { shape: [3, 6] });
  using g = tensor(Float32Array.from(rg.data), { shape: [6] });
  using b = tensor(Float32Array.from(rb.data), { shape: [6] });
  const got = await run("vm.op.layer_norm", x, g, b);
  assertClose(got, refLayerNorm(rx, rg, rb, 1e-5), 1e-4, 1e-4, "layer_norm NaN row");
  using empty = tensor(new Float32Array(0), { shape: [0, 6] });
  assertEquals((await run("vm.op.layer_norm", empty, g, b)).length, 0);
});

modeTest(
  "sum, mean and max over trailing axes: odd lengths, NaN, infinities, long rows",
  async () => {
    let x = ref([5, 9], 100);
    x = withRow(x, 9, 1, [1, NaN, 2, 3, 4, 5, 6, 7, 8]);
    x = withRow(x, 9, 2, Array(9).fill(-Infinity));
    x = withRow(x, 9, 3, [0, 1, 2, Infinity, 3, 4, 5, 6, -1]);
    const cases: [Ref, number[]][] = [
      [x, [1]],
      [ref([4, 3], 101), [1]],
      [ref([2, 3, 5], 102), [1, 2]], // two trailing axes collapse into one row
      [ref([7], 103), [0]],
      [ref([1, 2 ** 22 + 3], 104, 0, 1), [1]], // 4M values in one row: float64 sums
      [ref([300, 301], 105), [1]], // more rows than one chunk
      [ref([3, 4, 5], 106), [0]], // not trailing: the TypeScript walk
    ];
    for (const [rx, axes] of cases) {
      using t = tensor(Float32Array.from(rx.data), { shape: rx.shape });
      for (const op of ["sum", "mean", "max"]) {
        const got = await run(`vm.op.${op}`, t, shape(...axes));
        const want = refReduce(op, rx, axes, false);
        // Sums in float64 on both paths: float32 rounding of the result only.
        assertClose(got, want, 2e-6, 1e-6, `${op} [${rx.shape}] over ${axes}`);
      }
    }
    using empty = tensor(new Float32Array(0), { shape: [3, 0] });
    assertEquals(Array.from(await run("vm.op.sum", empty, shape(1))), [0, 0, 0]);
    assertEquals(Array.from(await run("vm.op.mean", empty, shape(1))), [NaN, NaN, NaN]);
    assertThrows(() => getGlobalFunc("vm.op.max")!(empty, shape(1)), RangeError, "zero elements");
  },
);

modeTest(
  "add, subtract, multiply, divide: same shapes and row broadcasts, odd lengths",
  async () => {
    const special = [NaN, Infinity, -Infinity, 0, -0, 1e-40, 3.4e38];
    const cases: [number[], number[]][] = [
      [[5, 7], [5, 7]],
      [[5, 7], [7]], // a bias add
      [[7], [3, 7]], // the left operand broadcast
      [[2, 3, 385], [385]],
      [[300, 301], [300, 301]], // more than one chunk
      [[200, 333], [1, 333]],
      [[70001], [70001]],
      [[4, 5], [4, 1]], // a column broadcast: the TypeScript walk
    ];
    for (const [i, [as, bs]] of cases.entries()) {
      const ra = ref(as, 200 + i), rb = ref(bs, 300 + i);
      // Special values at the start and the end of each operand (the last, partial vector).
      special.forEach((v, k) => {
        if (k < ra.data.length) ra.data[ra.data.length - 1 - k] = ra.data[k] = v;
        if (k < rb.data.length) {
          rb.data[(k * 3) % rb.data.length] = special[(k + 2) % special.length];
        }
      });
      ra.data = ra.data.map(Math.fround);
      rb.data = rb.data.map(Math.fround);
      using a = tensor(Float32Array.from(ra.data), { shape: as });
      using b = tensor(Float32Array.from(rb.data), { shape: bs });
      for (const [op, fn] of Object.entries(REF_BINARY_FLOAT)) {
        if (!["add", "subtract", "multiply", "divide"].includes(op)) continue;
        // float32 + - * / are correctly rounded: both paths equal the double result rounded once.
        const want = refBinary(ra, rb, (x, y) => Math.fround(fn(x, y)));
        assertClose(await run(`vm.op.${op}`, a, b), want, 0, 0, `${op} [${as}] [${bs}]`);
      }
    }
  },
);

modeTest("cast float32 → int32 truncates, saturates and maps NaN to 0", async () => {
  const xs = [0.5, -0.5, 1.9, -1.9, 2 ** 31, -(2 ** 31) - 512, 3e9, -3e9, NaN, Infinity, -Infinity];
  const data = [...xs, ...values(1001, 400, -1e4, 1e4)];
  using x = tensor(Float32Array.from(data), { shape: [data.length] });
  using out = getGlobalFunc("vm.op.cast")!(x, "int32") as NDArray;
  const got = await out.data() as Int32Array;
  const want = Array.from(
    Float32Array.from(data),
    (v) => Number.isNaN(v) ? 0 : Math.max(-(2 ** 31), Math.min(2 ** 31 - 1, Math.trunc(v))) + 0,
  );
  assertEquals(Array.from(got), want);
});

modeTest(
  "attention: more queries than keys, NaN queries, odd head sizes, prefill-sized heads",
  async () => {
    const cases: [number[], number[], number[], unknown, number | null][] = [
      // q, k, v shapes; causal argument; the reference's offset
      [[1, 2, 9, 4], [1, 2, 5, 4], [1, 2, 5, 4], "TopLeft", 0], // more queries than keys
      [[2, 128, 64], [2, 128, 64], [2, 128, 64], 1, 0], // a causal prefill
      [[3, 33, 5], [3, 41, 5], [3, 41, 7], null, null], // odd head sizes, keys not a multiple of 4
      [[1, 19, 32], [1, 38, 32], [1, 38, 32], "BottomRight", 19],
    ];
    for (const [i, [qs, ks, vs, causal, offset]] of cases.entries()) {
      const rq = ref(qs, 500 + i, -2, 2), rk = ref(ks, 600 + i, -2, 2), rv = ref(vs, 700 + i);
      if (i === 2) rq.data[5 * 5 + 2] = NaN; // query row 5 of head 0 is NaN
      using q = tensor(Float32Array.from(rq.data), { shape: qs });
      using k = tensor(Float32Array.from(rk.data), { shape: ks });
      using v = tensor(Float32Array.from(rv.data), { shape: vs });
      const scale = 1 / Math.sqrt(qs[qs.length - 1]);
      const got = await run("vm.op.attention", q, k, v, ...(causal === null ? [] : [causal]));
      const want = refAttention(rq, rk, rv, scale, offset);
      assertClose(got, want, 1e-4, 1e-5, `attention ${qs} ${ks} ${vs} ${causal}`);
    }
  },
);

modeTest("add with a row per batch: MiniLM's attention mask over its scores", async () => {
  for (
    const [as, bs] of [[[3, 4, 5, 5], [3, 1, 1, 5]], [[2, 1, 7], [2, 6, 7]], [[2, 3, 9], [2, 3, 9]]]
  ) {
    const ra = ref(as, 800), rb = ref(bs, 801);
    using a = tensor(Float32Array.from(ra.data), { shape: as });
    using b = tensor(Float32Array.from(rb.data), { shape: bs });
    for (const op of ["add", "subtract"]) {
      const want = refBinary(ra, rb, (x, y) => Math.fround(REF_BINARY_FLOAT[op](x, y)));
      assertClose(await run(`vm.op.${op}`, a, b), want, 0, 0, `${op} [${as}] [${bs}]`);
    }
  }
});

Deno.test("where the kernels' memory cannot grow, the row operators run in TypeScript", async () => {
  setCpuKernelMode("wasm");
  const k = wasmKernelsFor(1, 0);
  if (k === null) throw new Error("no WebAssembly kernels");
  const memory = k.local.memory as WebAssembly.Memory & { grow: unknown };
  let refused = 0;
  memory.grow = () => {
    refused++;
    throw new RangeError("WebAssembly.Memory.grow(): Maximum memory size exceeded");
  };
  try {
    const n = 2 ** 21 + 3; // more scratch than any earlier test asked for
    const rx = ref([1, n], 900), rg = ref([n], 901, 0.5, 1.5), rb = ref([n], 902);
    using x = tensor(Float32Array.from(rx.data), { shape: [1, n] });
    using g = tensor(Float32Array.from(rg.data), { shape: [n] });
    using b = tensor(Float32Array.from(rb.data), { shape: [n] });
    const got = await run("vm.op.layer_norm", x, g, b);
    assert(refused > 0, "the scratch had to grow");
    assertClose(got, refLayerNorm(rx, rg, rb, 1e-5), 1e-4, 1e-4, "layer_norm");
  } finally {
    delete (memory as { grow?: unknown }).grow; // the prototype's again
    setCpuKernelMode("auto");
  }
});
