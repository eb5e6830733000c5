/**
 * The CPU's non-matrix float32 operators on their two paths, at the shapes
 * MiniLM and GPT-small give them: the TypeScript kernels
 * (`setCpuKernelMode("typescript")`), the WebAssembly SIMD kernels with their
 * copies in and out (`"wasm"`: kernels/cpu/wasm/rows.ts, unary.ts), and a
 * plain JS loop writing a fresh Float32Array (what a user would write).
 * Every case is called through `vm.op.*` (argument checks, allocation of the
 * result, the kernel) and rounds are interleaved, so drift on a shared
 * machine hits the three alike; figures are medians in µs per call.
 *
 * For the memory-bound operators (add, cast) a fourth column gives the copy
 * floor: the copies a WebAssembly kernel needs (each operand in, the result
 * out, as `TypedArray.set` between ordinary arrays), without the kernel.
 * Where that floor alone is slower than the TypeScript kernel, WebAssembly
 * cannot win and the operator stays in TypeScript.
 *
 * ```sh
 * deno run -A bench/cpu_rows_bench.ts           # the table
 * deno run -A bench/cpu_rows_bench.ts --quick   # fewer rounds
 * ```
 *
 * @module
 */

import { installBuiltins } from "../builtins/install.ts";
import { getGlobalFunc } from "../ground/registry.ts";
import { tensor } from "../devices/tensor.ts";
import type { NDArray } from "../devices/ndarray.ts";
import { shape } from "../ground/shape_tuple.ts";
import { setCpuKernelMode } from "../kernels/cpu/wasm/runtime.ts";
import { randomValues } from "./_random.ts";
import { median } from "./_stats.ts";

installBuiltins();

const quick = Deno.args.includes("--quick");
const ROUNDS = quick ? 5 : 11;
/** Target time per timed sample, ms. */
const SAMPLE_MS = quick ? 20 : 40;

interface Case {
  name: string;
  /** The op through `vm.op.*` on the current kernel path. */
  op: () => void;
  /** The plain JS loop, if one is written for the case. */
  plain?: () => void;
  /** For memory-bound ops: the copies a WebAssembly kernel needs, without the kernel. */
  copyFloor?: () => void;
  /** No WebAssembly kernel exists for the op (its copy floor says why): no WebAssembly column. */
  copyFloorOnly?: boolean;
}

const f32 = (dims: number[], seed: number) =>
  tensor(randomValues(dims.reduce((a, b) => a * b, 1), seed), { shape: dims });

function opCall(name: string, ...args: unknown[]): () => void {
  const f = getGlobalFunc(name)!;
  return () => (f(...args) as NDArray).dispose();
}

function layerNormCase(rows: number, n: number): Case {
  const x = f32([rows, n], 1), g = f32([n], 2), b = f32([n], 3);
  const xv = x.cpuView() as Float32Array, gv = g.cpuView() as Float32Array;
  const bv = b.cpuView() as Float32Array;
  return {
    name: `layer_norm [${rows}, ${n}]`,
    op: opCall("vm.op.layer_norm", x, g, b),
    plain: () => {
      const o = new Float32Array(xv.length);
      for (let r = 0; r < xv.length; r += n) {
        let s = 0;
        for (let i = 0; i < n; i++) s += xv[r + i];
        const mean = s / n;
        let q = 0;
        for (let i = 0; i < n; i++) q += (xv[r + i] - mean) ** 2;
        const sc = 1 / Math.sqrt(q / n + 1e-5);
        for (let i = 0; i < n; i++) o[r + i] = (xv[r + i] - mean) * sc * gv[i] + bv[i];
      }
    },
  };
}

function softmaxCase(rows: number, n: number): Case {
  const x = f32([rows, n], 4), xv = x.cpuView() as Float32Array;
  return {
    name: `softmax [${rows}, ${n}]`,
    op: opCall("vm.op.softmax", x),
    plain: () => {
      const o = new Float32Array(xv.length);
      for (let r = 0; r < xv.length; r += n) {
        let m = -Infinity;
        for (let i = 0; i < n; i++) m = Math.max(m, xv[r + i]);
        let s = 0;
        for (let i = 0; i < n; i++) s += o[r + i] = Math.exp(xv[r + i] - m);
        for (let i = 0; i < n; i++) o[r + i] /= s;
      }
    },
  };
}

function reduceCase(op: "sum" | "max", rows: number, n: number): Case {
  const x = f32([rows, n], 5), xv = x.cpuView() as Float32Array;
  return {
    name: `${op} last axis [${rows}, ${n}]`,
    op: opCall(`vm.op.${op}`, x, shape(1)),
    plain: () => {
      const o = new Float32Array(rows);
      for (let r = 0; r < rows; r++) {
        let s = op === "max" ? -Infinity : 0;
        for (let i = r * n; i < (r + 1) * n; i++) s = op === "max" ? Math.max(s, xv[i]) : s + xv[i];
        o[r] = s;
      }
    },
  };
}

function geluCase(rows: number, n: number): Case {
  const x = f32([rows, n], 6), xv = x.cpuView() as Float32Array;
  return {
    name: `gelu [${rows}, ${n}]`,
    op: opCall("vm.op.gelu", x),
    plain: () => {
      const o = new Float32Array(xv.length);
      for (let i = 0; i < xv.length; i++) {
        const v = xv[i], z = Math.abs(v) * Math.SQRT1_2, t = 1 / (1 + 0.3275911 * z);
        const p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 +
                  t * (-1.453152027 + t * 1.061405429))));
        const erf = 1 - p * Math.exp(-z * z);
        o[i] = 0.5 * v * (1 + (v < 0 ? -erf : erf));
      }
    },
  };
}

function attentionCase(qs: number[], ks: number[], causal: boolean, layout = "BHSD"): Case {
  const q = f32(qs, 10), k = f32(ks, 11), v = f32(ks, 12);
  const qv = q.cpuView() as Float32Array, kv = k.cpuView() as Float32Array;
  const vv = v.cpuView() as Float32Array;
  // The plain loop is written for BHSD, [heads, T, D], only.
  const D = qs[qs.length - 1], Tq = qs[qs.length - 2], Tk = ks[ks.length - 2];
  const heads = qv.length / (Tq * D), scale = 1 / Math.sqrt(D);
  return {
    name: `attention${causal ? " causal" : ""} q [${qs}] k, v [${ks}]${
      layout === "BHSD" ? "" : ` ${layout}`
    }`,
    op: opCall("vm.op.attention", q, k, v, causal ? 1 : 0, null, layout),
    plain: layout !== "BHSD" ? undefined : () => {
      const o = new Float32Array(heads * Tq * D), s = new Float64Array(Tk);
      for (let h = 0; h < heads; h++) {
        for (let i = 0; i < Tq; i++) {
          const keys = causal ? Math.min(Tk, i + Tk - Tq + 1) : Tk, qo = (h * Tq + i) * D;
          let m = -Infinity;
          for (let j = 0; j < keys; j++) {
            let t = 0;
            for (let d = 0; d < D; d++) t += qv[qo + d] * kv[(h * Tk + j) * D + d];
            s[j] = t * scale;
            m = Math.max(m, s[j]);
          }
          let sum = 0;
          for (let j = 0; j < keys; j++) sum += s[j] = Math.exp(s[j] - m);
          for (let d = 0; d < D; d++) {
            let t = 0;
            for (let j = 0; j < keys; j++) t += s[j] * vv[(h * Tk + j) * D + d];
            o[(h * Tq + i) * D + d] = t / sum;
          }
        }
      }
    },
  };
}

/** Scratch standing in for the kernels' memory in the copy floors. */
let scratch = new Float32Array(0);
function copies(...arrays: Float32Array[]): void {
  const need = arrays.reduce((a, x) => a + x.length, 0);
  if (scratch.length < need) scratch = new Float32Array(need);
  let at = 0;
  for (const x of arrays.slice(0, -1)) {
    scratch.set(x, at);
    at += x.length;
  }
  const out = arrays[arrays.length - 1];
  out.set(scratch.subarray(0, out.length)); // the result out
}

/** MiniLM's attention bias: scores [B, H, S, S] plus a mask row [B, 1, 1, S] per sentence. */
function maskAddCase(B: number, H: number, S: number): Case {
  const a = f32([B, H, S, S], 13), b = f32([B, 1, 1, S], 14);
  const av = a.cpuView() as Float32Array, bv = b.cpuView() as Float32Array;
  return {
    name: `add [${B}, ${H}, ${S}, ${S}] + [${B}, 1, 1, ${S}]`,
    op: opCall("vm.op.add", a, b),
    plain: () => {
      const o = new Float32Array(av.length);
      for (let r = 0; r < av.length / S; r++) {
        const bo = Math.floor(r / (H * S)) * S;
        for (let i = 0; i < S; i++) o[r * S + i] = av[r * S + i] + bv[bo + i];
      }
    },
  };
}

function addCase(rows: number, n: number, rowBroadcast: boolean): Case {
  const a = f32([rows, n], 7), b = rowBroadcast ? f32([n], 8) : f32([rows, n], 8);
  const av = a.cpuView() as Float32Array, bv = b.cpuView() as Float32Array;
  return {
    name: `add [${rows}, ${n}] + [${rowBroadcast ? n : `${rows}, ${n}`}]`,
    op: opCall("vm.op.add", a, b),
    plain: () => {
      const o = new Float32Array(av.length);
      if (rowBroadcast) {
        for (let r = 0; r < av.length; r += n) {
          for (let i = 0; i < n; i++) o[r + i] = av[r + i] + bv[i];
        }
      } else {
        for (let i = 0; i < av.length; i++) o[i] = av[i] + bv[i];
      }
    },
    copyFloor: () => copies(av, bv, new Float32Array(av.length)),
  };
}

function castCase(n: number): Case {
  const x = f32([n], 9), xv = x.cpuView() as Float32Array;
  return {
    name: `cast float32 → int32 [${n}]`,
    op: opCall("vm.op.cast", x, "int32"),
    plain: () => {
      const o = new Int32Array(n);
      for (let i = 0; i < n; i++) o[i] = xv[i];
    },
    copyFloor: () => copies(xv, new Float32Array(n)),
    copyFloorOnly: true, // no WebAssembly cast: the floor alone is slower than TypeScript
  };
}

const M = 2 ** 22;
const cases: Case[] = [
  layerNormCase(16, 384),
  layerNormCase(128, 384),
  layerNormCase(128, 1536),
  layerNormCase(M / 1024, 1024),
  softmaxCase(12 * 16, 16),
  softmaxCase(12 * 128, 128),
  softmaxCase(16, 1536),
  softmaxCase(M / 1024, 1024),
  reduceCase("sum", 128, 384),
  reduceCase("max", 128, 384),
  reduceCase("sum", 1, M),
  geluCase(16, 1536),
  geluCase(128, 1536),
  addCase(128, 384, false),
  addCase(128, 384, true),
  addCase(1, M, false),
  maskAddCase(1, 12, 38),
  maskAddCase(32, 12, 38),
  attentionCase([12, 38, 32], [12, 38, 32], false),
  attentionCase([12, 128, 64], [12, 128, 64], true),
  attentionCase([1, 128, 12, 64], [1, 128, 12, 64], true, "BSHD"),
  attentionCase([12, 16, 64], [12, 16, 64], true),
  attentionCase([12, 1, 64], [12, 128, 64], true),
  attentionCase([1, 1, 12, 64], [1, 128, 12, 64], true, "BSHD"),
  attentionCase([1, 1, 12, 64], [1, 1024, 12, 64], true, "BSHD"),
  castCase(M),
];

/** µs per call of `f`, over as many calls as fill about SAMPLE_MS. */
function time(f: () => void, reps: number): number {
  const t0 = performance.now();
  for (let r = 0; r < reps; r++) f();
  return (performance.now() - t0) * 1000 / reps;
}

function repsFor(f: () => void): number {
  const t0 = performance.now();
  f();
  const ms = Math.max(performance.now() - t0, 0.001);
  return Math.max(1, Math.min(10000, Math.round(SAMPLE_MS / ms)));
}

const fmt = (us: number) => us >= 100 ? us.toFixed(0) : us.toPrecision(3);

console.log(
  `CPU row operators, float32, µs per call (medians of ${ROUNDS} interleaved rounds; shared machine: noisy)`,
);
console.log(
  "| op | TypeScript | WebAssembly (copies included) | plain JS | copy floor | TS / WASM |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
for (const c of cases) {
  const wasmSide = () => {
    setCpuKernelMode("wasm");
    try {
      c.op();
    } finally {
      setCpuKernelMode("typescript");
    }
  };
  const sides = [
    c.op,
    c.copyFloorOnly ? () => {} : wasmSide,
    c.plain ?? (() => {}),
    ...(c.copyFloor ? [c.copyFloor] : []),
  ];
  setCpuKernelMode("typescript");
  const reps = sides.map(repsFor);
  const samples: number[][] = sides.map(() => []);
  for (let r = 0; r < ROUNDS; r++) sides.forEach((f, i) => samples[i].push(time(f, reps[i])));
  setCpuKernelMode("auto");
  const [t, w, p, floor] = samples.map(median);
  const floorCell = floor === undefined ? "" : fmt(floor);
  console.log(
    `| ${c.name} | ${fmt(t)} | ${c.copyFloorOnly ? "—" : fmt(w)} | ${
      c.plain ? fmt(p) : "—"
    } | ${floorCell} | ${c.copyFloorOnly ? "—" : `${(t / w).toFixed(2)}×`} |`,
  );
}
