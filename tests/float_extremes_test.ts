/**
 * Issue 27, finding 9 (second half): in `"auto"` mode a row's result
 * depended on the tensor's size, because the WebAssembly kernels compute in
 * float32 and the TypeScript ones in float64. A layer-norm row holding 1e20
 * normalized to finite values alone and to zeros among 256 rows (1e20
 * squared is past float32's range); an attention score past float32's range
 * gave a finite value on one path and NaN on the other. Both paths now
 * follow one semantics: float32 values with stable formulations (layer norm
 * scales a row of huge magnitude before squaring; attention scores are
 * float32 on both paths, and an infinite maximum takes the softmax's limit).
 * Each case runs on both paths, forced, and in `"auto"` alone and among 256
 * rows.
 */

import { assert, assertEquals } from "@std/assert";
import { getGlobalFunc, NDArray } from "../mod.ts";
import { type CpuKernelMode, setCpuKernelMode } from "../kernels/cpu/wasm/runtime.ts";

const EXTREME_ROWS: number[][] = [
  [1e20, 0, -1e20, 5, 1, 2, 3, 4],
  [-1e20, -1e20, 1e20, 1e20, 0, 0, 0, 0],
  [3e38, -3e38, 3e38, 1, 0, 0, 0, 0],
  [3e38, 3e38, 3e38, 3e38, 3e38, 3e38, 3e38, 3e38],
  [1e-40, -1e-40, 2e-45, 0, 1e-39, 0, 0, -1e-38],
  [Infinity, 1, 2, 3, 4, 5, 6, 7],
  [-Infinity, 1, 2, 3, 4, 5, 6, 7],
  [NaN, 1, 2, 3, 4, 5, 6, 7],
  [1e20, 1e20, 1e20, 1e20, 1e20, 1e20, 1e20, 1.0000001e20],
];
const N = 8;

function tensorOf(shape: number[], values: ArrayLike<number>): NDArray {
  const t = NDArray.empty(shape, "float32");
  (t.cpuView() as Float32Array).set(values);
  return t;
}

/** Runs `fn` with the CPU kernels in `mode`, then back in "auto". */
function inMode<T>(mode: CpuKernelMode, fn: () => T): T {
  setCpuKernelMode(mode);
  try {
    return fn();
  } finally {
    setCpuKernelMode("auto");
  }
}

/**
 * Both results alike: NaN where the other is NaN, infinite alike, else
 * within float32 tolerance of `scale` (a sum's: the magnitude of its terms).
 */
function assertAlike(a: Float32Array, b: Float32Array, what: string, scale = 0): void {
  assertEquals(a.length, b.length, what);
  for (let i = 0; i < a.length; i++) {
    const x = a[i], y = b[i];
    if (Number.isNaN(x) || Number.isNaN(y)) {
      assert(Number.isNaN(x) && Number.isNaN(y), `${what}[${i}]: ${x} and ${y}`);
    } else if (!Number.isFinite(x) || !Number.isFinite(y)) {
      assertEquals(x, y, `${what}[${i}]`);
    } else {
      const tolerance = 1e-5 * (1 + Math.abs(x)) + 1e-6 * scale;
      assert(Math.abs(x - y) <= tolerance, `${what}[${i}]: ${x} and ${y}`);
    }
  }
}

/** The first row of `op` over `row` alone and among 255 ordinary rows, in `mode`. */
function firstRow(
  mode: CpuKernelMode,
  row: number[],
  rows: number,
  op: (x: NDArray) => NDArray,
): Float32Array {
  const values = new Float32Array(rows * N);
  for (let i = N; i < values.length; i++) values[i] = Math.sin(i);
  values.set(row);
  const out = inMode(mode, () => op(tensorOf([rows, N], values)));
  return (out.dataSync() as Float32Array).slice(0, N);
}

/**
 * For each extreme row: the WebAssembly and TypeScript paths agree, alone and
 * among 256 rows, and (for an op of one row at a time, `rowwise`) "auto"
 * among 256 rows agrees with the row alone.
 */
function checkRows(
  name: string,
  op: (x: NDArray) => NDArray,
  finite: (row: number[]) => boolean,
  { rowwise = true, scaled = false } = {},
) {
  for (const row of EXTREME_ROWS) {
    const what = `${name} [${row}]`;
    const scale = scaled ? row.reduce((a, x) => Number.isFinite(x) ? a + Math.abs(x) : a, 0) : 0;
    const ts = firstRow("typescript", row, 1, op);
    assertAlike(firstRow("wasm", row, 1, op), ts, `${what}: WebAssembly against TypeScript`, scale);
    const ts256 = firstRow("typescript", row, 256, op);
    assertAlike(firstRow("wasm", row, 256, op), ts256, `${what}: both among 256 rows`, scale);
    if (rowwise) {
      assertAlike(
        firstRow("auto", row, 256, op),
        ts,
        `${what}: auto among 256 against alone`,
        scale,
      );
    }
    if (finite(row)) assert(ts.every(Number.isFinite), `${what} is finite: ${ts}`);
  }
}

const allFinite = (row: number[]) => row.every(Number.isFinite);

Deno.test("finding 9: layer norm agrees on both paths at 1e20, 3e38, denormals, inf and NaN", () => {
  const layerNorm = getGlobalFunc("vm.op.layer_norm")!;
  const gamma = tensorOf([N], new Array(N).fill(1)), beta = tensorOf([N], new Array(N).fill(0));
  checkRows("layer_norm", (x) => layerNorm(x, gamma, beta) as NDArray, allFinite);
  // The case: normalized, the row holding ±1e20 is about ±1.5, not 0.
  const alone = firstRow("auto", EXTREME_ROWS[0], 1, (x) => layerNorm(x, gamma, beta) as NDArray);
  const among = firstRow("auto", EXTREME_ROWS[0], 256, (x) => layerNorm(x, gamma, beta) as NDArray);
  assert(alone[0] > 1.5 && among[0] > 1.5, `1e20 normalizes to ${alone[0]} and ${among[0]}`);
});

Deno.test("finding 9: softmax and the reductions agree on both paths at the extremes", () => {
  const softmax = getGlobalFunc("vm.op.softmax")!;
  checkRows("softmax", (x) => softmax(x) as NDArray, allFinite);
  for (const name of ["sum", "mean", "max"]) {
    const reduce = getGlobalFunc(`vm.op.${name}`)!;
    // Over the last axis, keeping it: one value a row.
    const rowsOf = (x: NDArray) => {
      const r = reduce(x, [1], true) as NDArray;
      // firstRow reads N values: repeat the row's value.
      const v = r.dataSync() as Float32Array;
      return tensorOf([v.length, N], Array.from(v).flatMap((y) => new Array(N).fill(y)));
    };
    checkRows(name, rowsOf, () => false, { scaled: true });
  }
});

Deno.test("finding 9: attention agrees on both paths when scores pass float32's range", () => {
  const attention = getGlobalFunc("vm.op.attention")!;
  // q = k = the row as 8 tokens of head size 1: scores up to 1e40 and 9e76 (past float32);
  // v = 1..8. Among 256 rows the head is 256 tokens long.
  const op = (x: NDArray) => {
    const tokens = x.size;
    const v = tensorOf([1, tokens, 1], Array.from({ length: tokens }, (_, i) => (i % N) + 1));
    const q = tensorOf([1, tokens, 1], x.dataSync() as Float32Array);
    const out = attention(q, q, v, 0, 1) as NDArray;
    return tensorOf([tokens / N, N], out.dataSync() as Float32Array);
  };
  // Among 256 rows the row's tokens attend to other keys too: compare the paths, not the sizes.
  checkRows("attention", op, (row) => row.every(Number.isFinite), { rowwise: false });
  // A score of 1e40 on one path was 1e40, on the other Infinity - Infinity = NaN: now the
  // key with that score takes the whole weight on both.
  const ts = firstRow("typescript", EXTREME_ROWS[0], 1, op);
  assertEquals(ts[0], 1, "query 1e20 attends to key 1e20, whose value is 1");
});
