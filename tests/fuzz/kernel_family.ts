/**
 * Fuzz family "kernels": random kernel calls under random limits (issue 27,
 * finding 4). Each case runs one `vm.op.*` kernel (attention in both
 * layouts and every causal form, matmul with broadcast batches, linear,
 * layer norm, softmax, sum, mean, max) on random shapes (extents of 0 and
 * 1, rows that are no multiple of a tile) in a VM with a random memory
 * limit, under random `fuel`, `timeoutMs` and `AbortSignal`, in a random
 * CPU kernel mode (WebAssembly, TypeScript, or "auto"). A few cases in a
 * hundred are long kernels (attention over `[1, T, 1]`, square matmuls)
 * under a short limit.
 *
 * Bugs: an error that is not a `VMError`; a hang; a limit that stopped the
 * call later than twice its bound (plus `SLACK_MS` for the timer itself),
 * twice in a row (the case is run again before a late stop counts);
 * memory left in the VM; a result off a float64 reference by more than a
 * float32 tolerance.
 *
 * @module
 */

import { ExecBuilder, type Executable, NDArray, VirtualMachine, VMError } from "../../mod.ts";
import { type CpuKernelMode, setCpuKernelMode } from "../../kernels/cpu/wasm/runtime.ts";
import { Random } from "./random.ts";
import { caseSeeds, emptyReport, type FamilyReport, recordBug, settle } from "./report.ts";

/** A case slower than this counts as a hang. */
const HANG_MS = 5000;
/** Lateness allowed beyond twice a time bound: a timer's own latency on a loaded machine. */
const SLACK_MS = 25;

/** One kernel call: the program's op, its inputs, and its float64 reference. */
interface KernelCase {
  op: string;
  constants: (number | string)[];
  inputs: { shape: number[]; data: Float32Array }[];
  reference: (() => Float64Array) | null;
}

const programs = new Map<string, Executable>();

/** `main(inputs...)`: `op(inputs..., constants...)`, cached per op and constants. */
function programFor(c: KernelCase): Executable {
  const key = `${c.op}/${c.inputs.length}/${JSON.stringify(c.constants)}`;
  let ex = programs.get(key);
  if (ex === undefined) {
    const ib = new ExecBuilder();
    ib.function("main", { num_inputs: c.inputs.length }, () => {
      const args = c.inputs.map((_, i) => ib.r(i));
      const consts = c.constants.map((v) => ib.convert_constant(v));
      ib.emit_call(c.op, [...args, ...consts], { dst: ib.r(c.inputs.length) });
      ib.emit_ret(ib.r(c.inputs.length));
    });
    ex = ib.get();
    programs.set(key, ex);
  }
  return ex;
}

function values(rand: Random, n: number): Float32Array {
  const v = new Float32Array(n);
  for (let i = 0; i < n; i++) v[i] = rand.next() * 2 - 1;
  return v;
}

/** An extent: mostly small, sometimes 0 or 1, sometimes past a tile of 4 or 8. */
function extent(rand: Random, max = 24): number {
  return rand.pick([0, 1, 1, 2, 3, 4, 5, 7, 8, 9, 13, 17, rand.between(1, max)]);
}

function attentionCase(rand: Random): KernelCase {
  const B = rand.between(1, 2), H = rand.between(1, 3);
  const Tq = extent(rand), Tk = extent(rand), D = extent(rand, 12), Dv = extent(rand, 12);
  const layout = rand.pick(["BHSD", "BSHD"] as const);
  const causal = rand.pick([0, 1, "TopLeft"] as const);
  const scale = rand.pick([0.5, 1, 0.125]);
  const shape = (T: number, d: number) => layout === "BHSD" ? [B, H, T, d] : [B, T, H, d];
  const q = values(rand, B * H * Tq * D), k = values(rand, B * H * Tk * D);
  const v = values(rand, B * H * Tk * Dv);
  const at = (b: number, h: number, t: number, T: number, d: number, w: number) =>
    layout === "BHSD" ? ((b * H + h) * T + t) * w + d : ((b * T + t) * H + h) * w + d;
  const offset = causal === 0 ? null : causal === "TopLeft" ? 0 : Tk - Tq;
  return {
    op: "vm.op.attention",
    constants: [causal, scale, layout],
    inputs: [
      { shape: shape(Tq, D), data: q },
      { shape: shape(Tk, D), data: k },
      { shape: shape(Tk, Dv), data: v },
    ],
    reference: () => {
      const out = new Float64Array(B * H * Tq * Dv);
      for (let b = 0; b < B; b++) {
        for (let h = 0; h < H; h++) {
          for (let i = 0; i < Tq; i++) {
            const keys = offset === null ? Tk : Math.min(Tk, i + offset + 1);
            const s: number[] = [];
            for (let j = 0; j < keys; j++) {
              let dot = 0;
              for (let d = 0; d < D; d++) {
                dot += q[at(b, h, i, Tq, d, D)] * k[at(b, h, j, Tk, d, D)];
              }
              s.push(dot * scale);
            }
            const max = Math.max(...s);
            const p = s.map((x) => Math.exp(x - max));
            const sum = p.reduce((a, b) => a + b, 0);
            for (let d = 0; d < Dv; d++) {
              let acc = 0;
              for (let j = 0; j < keys; j++) acc += p[j] * v[at(b, h, j, Tk, d, Dv)];
              out[at(b, h, i, Tq, d, Dv)] = acc / sum;
            }
          }
        }
      }
      return out;
    },
  };
}

function matmulCase(rand: Random): KernelCase {
  const B = rand.between(1, 3), M = extent(rand), K = extent(rand), N = extent(rand);
  const Ba = rand.pick([1, B]), Bb = rand.pick([1, B]);
  const Bo = Math.max(Ba, Bb);
  const a = values(rand, Ba * M * K), b = values(rand, Bb * K * N);
  return {
    op: "vm.op.matmul",
    constants: [],
    inputs: [{ shape: [Ba, M, K], data: a }, { shape: [Bb, K, N], data: b }],
    reference: () => {
      const out = new Float64Array(Bo * M * N);
      for (let z = 0; z < Bo; z++) {
        const ao = (Ba === 1 ? 0 : z) * M * K, bo = (Bb === 1 ? 0 : z) * K * N;
        for (let i = 0; i < M; i++) {
          for (let j = 0; j < N; j++) {
            let acc = 0;
            for (let p = 0; p < K; p++) acc += a[ao + i * K + p] * b[bo + p * N + j];
            out[(z * M + i) * N + j] = acc;
          }
        }
      }
      return out;
    },
  };
}

function linearCase(rand: Random): KernelCase {
  const R = extent(rand, 40), K = extent(rand, 40), N = extent(rand, 40);
  const x = values(rand, R * K), w = values(rand, N * K), bias = values(rand, N);
  return {
    op: "vm.op.linear",
    constants: [],
    inputs: [{ shape: [R, K], data: x }, { shape: [N, K], data: w }, {
      shape: [N],
      data: bias,
    }],
    reference: () => {
      const out = new Float64Array(R * N);
      for (let i = 0; i < R; i++) {
        for (let j = 0; j < N; j++) {
          let acc = bias[j];
          for (let p = 0; p < K; p++) acc += x[i * K + p] * w[j * K + p];
          out[i * N + j] = acc;
        }
      }
      return out;
    },
  };
}

/** Rows of `n`: layer norm, softmax, or a whole-tensor sum, mean or max. */
function rowsCase(rand: Random): KernelCase {
  const R = extent(rand, 300), n = extent(rand, 300);
  const x = values(rand, R * n);
  const op = rand.pick(["layer_norm", "softmax", "sum", "mean", "max"] as const);
  if (op === "layer_norm") {
    const g = values(rand, n), b = values(rand, n);
    return {
      op: "vm.op.layer_norm",
      constants: [],
      inputs: [{ shape: [R, n], data: x }, { shape: [n], data: g }, { shape: [n], data: b }],
      reference: () => {
        const out = new Float64Array(R * n);
        for (let r = 0; r < R; r++) {
          let mean = 0;
          for (let i = 0; i < n; i++) mean += x[r * n + i] / n;
          let v = 0;
          for (let i = 0; i < n; i++) v += (x[r * n + i] - mean) ** 2 / n;
          for (let i = 0; i < n; i++) {
            out[r * n + i] = (x[r * n + i] - mean) / Math.sqrt(v + 1e-5) * g[i] + b[i];
          }
        }
        return out;
      },
    };
  }
  if (op === "softmax") {
    return {
      op: "vm.op.softmax",
      constants: [],
      inputs: [{ shape: [R, n], data: x }],
      reference: () => {
        const out = new Float64Array(R * n);
        for (let r = 0; r < R; r++) {
          const row = [...x.subarray(r * n, (r + 1) * n)];
          const max = Math.max(...row);
          const e = row.map((y) => Math.exp(y - max));
          const s = e.reduce((a, b) => a + b, 0);
          e.forEach((y, i) => out[r * n + i] = y / s);
        }
        return out;
      },
    };
  }
  return {
    op: `vm.op.${op}`,
    constants: [],
    inputs: [{ shape: [R, n], data: x }],
    reference: () => {
      let acc = op === "max" ? -Infinity : 0;
      for (const y of x) acc = op === "max" ? Math.max(acc, y) : acc + y;
      return Float64Array.of(op === "mean" ? acc / x.length : acc);
    },
  };
}

/** A long kernel: attention over `[1, T, 1]` or a square matmul, with no reference. */
function longCase(rand: Random): KernelCase {
  if (rand.chance(0.5)) {
    const T = rand.between(1500, 4000);
    const x = { shape: [1, T, 1], data: values(rand, T) };
    return { op: "vm.op.attention", constants: [], inputs: [x, x, x], reference: null };
  }
  const n = rand.between(400, 900);
  const x = { shape: [n, n], data: values(rand, n * n) };
  return { op: "vm.op.matmul", constants: [], inputs: [x, x], reference: null };
}

/** The largest error of `got` against `want`, relative to float32 tolerances. */
function misfit(got: Float32Array, want: Float64Array, depth: number): number {
  let worst = 0;
  const tol = 2e-5 * Math.sqrt(depth + 1) + 1e-6;
  for (let i = 0; i < want.length; i++) {
    const w = want[i], g = got[i];
    if (Number.isNaN(w) && Number.isNaN(g)) continue;
    const err = Math.abs(g - w) / (tol * (1 + Math.abs(w)));
    worst = Math.max(worst, Number.isNaN(err) ? Infinity : err);
  }
  return worst;
}

const MODES: readonly CpuKernelMode[] = ["auto", "auto", "wasm", "typescript"];

/** Runs `cases` kernel cases from `rand`'s sequence. */
export async function kernelFamily(rand: Random, cases: number): Promise<FamilyReport> {
  const report = emptyReport("kernels");
  // The WebAssembly kernels compile on their first call (tens of ms, once a process): not a
  // kernel's length, so it happens before the first case's clock starts.
  await warmUp();
  try {
    for (const [i, seed] of caseSeeds(rand, cases)) {
      report.tried++;
      // A stop past its bound is checked once more before it counts: on a shared 2-core machine
      // the process can lose the CPU for tens of milliseconds at any time (a load spike does not
      // strike twice; a kernel that cannot stop does).
      if (await oneCase(report, new Random(seed), `case ${i}`, false) === "late") {
        await oneCase(report, new Random(seed), `case ${i} (again)`, true);
      }
    }
  } finally {
    setCpuKernelMode("auto");
  }
  return report;
}

async function warmUp(): Promise<void> {
  for (const mode of ["wasm", "typescript"] as const) {
    setCpuKernelMode(mode);
    const x = { shape: [1, 64, 4], data: new Float32Array(256) };
    for (const op of ["vm.op.attention", "vm.op.matmul", "vm.op.softmax", "vm.op.layer_norm"]) {
      const c: KernelCase = op === "vm.op.layer_norm"
        ? {
          op,
          constants: [],
          inputs: [x, { shape: [4], data: new Float32Array(4) }, {
            shape: [4],
            data: new Float32Array(4),
          }],
          reference: null,
        }
        : {
          op,
          constants: [],
          inputs: op === "vm.op.matmul"
            ? [x, { shape: [4, 64], data: new Float32Array(256) }]
            : op === "vm.op.softmax"
            ? [x]
            : [x, x, x],
          reference: null,
        };
      using vm = new VirtualMachine(programFor(c));
      const made = c.inputs.map(({ shape, data }) => {
        const t = NDArray.empty(shape, "float32");
        (t.cpuView() as Float32Array).set(data);
        return t;
      });
      (await vm.invoke("main", ...made) as NDArray).dispose();
    }
  }
  setCpuKernelMode("auto");
}

/**
 * Runs one case, recording its bugs; returns "late" instead of recording a
 * stop past its bound unless `final`.
 */
async function oneCase(
  report: FamilyReport,
  r: Random,
  where: string,
  final: boolean,
): Promise<"late" | void> {
  let late = false;
  const overrun = (description: string) => {
    if (final) recordBug(report, "hangs", description);
    else late = true;
  };
  const long = r.chance(0.03);
  const c = long ? longCase(r) : r.pick([attentionCase, matmulCase, linearCase, rowsCase])(r);
  const mode = r.pick(MODES);
  setCpuKernelMode(mode);
  const bound = r.pick([10, 25, 50, 100]);
  const limit = long
    ? r.pick(["timeout", "abort", "fuel"] as const)
    : r.pick(["none", "none", "timeout", "abort", "fuel", "aborted"] as const);
  const controller = new AbortController();
  const limits = {
    fuel: limit === "fuel" ? r.pick([0, 10, 1000, 100_000]) : undefined,
    timeoutMs: limit === "timeout" ? bound : undefined,
    signal: limit === "abort" || limit === "aborted" ? controller.signal : undefined,
  };
  if (limit === "aborted") controller.abort("stop");
  const maxMemoryBytes = r.pick([2 ** 12, 2 ** 16, 2 ** 20, 2 ** 26]);
  const vm = new VirtualMachine(programFor(c), undefined, { maxMemoryBytes });
  const inputs: NDArray[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    for (const { shape, data } of c.inputs) {
      const t = NDArray.empty(shape, "float32");
      (t.cpuView() as Float32Array).set(data);
      inputs.push(t);
    }
    const start = performance.now();
    if (limit === "abort") timer = setTimeout(() => controller.abort("late"), bound);
    const outcome = await settle(vm.with(limits).invoke("main", ...inputs), HANG_MS);
    const ms = performance.now() - start;
    const what = `${c.op} ${
      c.inputs.map((x) => `[${x.shape}]`).join(" ")
    } under ${limit} ${bound} ms, ${mode}`;
    if (outcome === "hang") {
      recordBug(report, "hangs", `${where}: ${what} did not end in ${HANG_MS} ms`);
    } else if ("error" in outcome) {
      if (!(outcome.error instanceof VMError)) {
        recordBug(report, "otherExceptions", `${where}: ${what}: ${String(outcome.error)}`);
      } else {
        report.rejected++;
        if ((limit === "timeout" || limit === "abort") && ms > 2 * bound + SLACK_MS) {
          overrun(`${where}: ${what} stopped after ${ms.toFixed(0)} ms`);
        }
      }
    } else {
      report.loaded++;
      const out = outcome.value as NDArray;
      if (long && limit !== "fuel" && ms > 2 * bound + SLACK_MS) {
        overrun(`${where}: ${what} ran ${ms.toFixed(0)} ms past its bound`);
      }
      if (long && limit === "fuel" && (limits.fuel ?? 0) < 1e6) {
        recordBug(report, "wrong", `${where}: ${what} ran past its fuel ${limits.fuel}`);
      }
      if (c.reference !== null) {
        const want = c.reference();
        const got = out.dataSync() as Float32Array;
        const depth = Math.max(...c.inputs.map((x) => x.shape[x.shape.length - 1] ?? 1));
        const bad = got.length !== want.length ? Infinity : misfit(got, want, depth);
        if (bad > 1) recordBug(report, "wrong", `${where}: ${what} off by ${bad.toFixed(1)}x`);
      }
      out.dispose();
    }
  } catch (e) {
    recordBug(report, "otherExceptions", `${where}: ${String(e).slice(0, 200)}`);
  } finally {
    clearTimeout(timer);
    for (const t of inputs) if (!t.disposed) t.dispose();
    const live = vm.memory_stats().liveBytes;
    if (live !== 0) recordBug(report, "leaks", `${where}: ${live} bytes left in the VM`);
    vm.dispose();
  }
  return late ? "late" : undefined;
}
