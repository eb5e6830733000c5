/**
 * relaxvm's CPU kernels (WebAssembly SIMD on every core, and the TypeScript
 * fallback) against the WebAssembly and native peers, in one process,
 * interleaved, medians: issue 21's table.
 *
 * ```sh
 * deno run -A bench/cpu_wasm_bench.ts           # 9 rounds
 * deno run -A bench/cpu_wasm_bench.ts --quick   # 5 rounds, no batched case
 * ```
 *
 * Cases: matmul f32 n = 256 and 1024, a batched `[8, 256, 512] @ [512,
 * 512]`, and the decode-shaped GEMV (`linear` of `[1, 4096]` by `[4096,
 * 4096]`, the weight sealed as a loaded model's is; the peers compute
 * `[1, 4096] @ [4096, 4096]`, the same 64 MiB of weights read once). relaxvm runs each through a one-instruction VM
 * function and reads the result (`dataSync()`); the peers run the same
 * product and read theirs. The copy-traffic floor is a 128 MiB
 * `TypedArray.set` in the same process, counted as read + write.
 *
 * Peers and their quirks in one Deno process (issue 21):
 * - @jax-js/jax 0.1.25 on its `wasm` device (its workers, both cores), a
 *   `jit`-compiled matmul. Started first, before onnxruntime-web replaces
 *   the global `Worker`; it keeps the process alive, hence `Deno.exit`.
 * - onnxruntime-web 1.30.0, WebAssembly, one thread (two are no faster in
 *   Deno); Deno's `Worker` is put back after its session is created.
 * - onnxruntime-node 1.30.0, native, two intra-op threads; its pool spins
 *   about 40 ms after each run, so every timed call of every side waits
 *   60 ms first.
 * relaxvm's own worker pool stops after `POOL_IDLE_MS` (300 ms) without
 * work (so scripts exit), and the calls of the other sides between two of
 * relaxvm's outlast that; each relaxvm timed call is preceded by an untimed
 * `await cpuThreadsReady()`, which restarts it, as the peers' pools are
 * never stopped. (Until round 3 of issue 21 that await was inside the timed
 * call: each relaxvm figure included starting its workers.)
 *
 * relaxvm runs on its default threads (`cpu()`'s: both cores here) and,
 * as "relaxvm 1t", on one, as onnxruntime-web does: on a machine shared
 * with other sessions, where Linux's autogroup scheduling gives a
 * session's process the same share of the cores whatever its thread count,
 * a second thread adds little, and the one-thread ratio is the kernels'
 * own.
 *
 * A peer that cannot be loaded is reported as such and left out.
 *
 * @module
 */

import { cpu, ExecBuilder, type NDArray, tensor, VirtualMachine } from "../mod.ts";
import { cpuThreadSetting } from "../devices/cpu_device.ts";
import { cpuKernelInfo, cpuThreadsReady, setCpuKernelMode } from "../kernels/cpu/wasm/runtime.ts";
import { matmulModel } from "./_onnx_matmul.ts";
import { copyFloor } from "./_copy_floor.ts";
import { randomValues } from "./_random.ts";
import { peer } from "./_peer.ts";
import { median } from "./_stats.ts";

const quick = Deno.args.includes("--quick");
const ROUNDS = quick ? 5 : 9;

/** One way of computing a case: set up once, then `run` per timed call. */
interface Side {
  name: string;
  setup(c: CaseSpec): Promise<() => Promise<void>>;
  /** Awaited before each timed call, untimed. */
  prepare?(): Promise<unknown>;
}

interface CaseSpec {
  name: string;
  aDims: number[];
  bDims: number[];
  /** relaxvm computes `linear(a, bᵀ)` with the weight stored `[N, K]`. */
  linear: boolean;
  flops: number;
  /** Weight bytes read (GEMV): the figure is GB/s of these. */
  weightBytes?: number;
}

const size = (d: number[]) => d.reduce((x, y) => x * y, 1);
/** The shared benchmark inputs, typed as the peers' APIs want them (an unshared buffer). */
const values = (n: number, seed: number) => randomValues(n, seed) as Float32Array<ArrayBuffer>;

function vmFunction(op: string): VirtualMachine {
  const ib = new ExecBuilder();
  ib.function("main", { num_inputs: 2 }, () => {
    ib.emit_call(op, [ib.r(0), ib.r(1)], { dst: ib.r(2) });
    ib.emit_ret(ib.r(2));
  });
  return new VirtualMachine(ib.get(), cpu());
}

/** relaxvm's default thread count (`cpu()`'s), before any side changes it. */
const defaultThreads = cpuThreadSetting();

function relaxvmSide(mode: "auto" | "typescript", name: string, threads = defaultThreads): Side {
  return {
    name,
    // The pool stops after POOL_IDLE_MS without work (so that scripts exit), and the other sides'
    // calls (60 ms pauses, the TypeScript side's seconds) outlast that: restart it untimed, as
    // the peers' pools are never stopped. A change of thread count restarts it too.
    prepare: () => {
      cpu(0, { threads });
      return cpuThreadsReady();
    },
    setup(c) {
      const a = tensor(values(size(c.aDims), 1), { shape: c.aDims });
      // The weight of `linear` is stored [N, K]: the same values, transposed layout.
      const bDims = c.linear ? [c.bDims[1], c.bDims[0]] : c.bDims;
      const b = tensor(values(size(bDims), 2), { shape: bDims });
      // A linear's weight is sealed, as a tensor cache loads a model's: its packed copy in
      // the kernels' memory is kept (kernels/cpu/wasm/resident.ts), as the peers keep theirs.
      if (c.linear) b.seal();
      const vm = vmFunction(c.linear ? "vm.op.linear" : "vm.op.matmul");
      return Promise.resolve(async () => {
        setCpuKernelMode(mode);
        const out = await vm.invoke("main", a, b) as NDArray;
        out.dataSync();
        out.dispose();
        setCpuKernelMode("auto");
      });
    },
  };
}

async function jaxSide(): Promise<Side> {
  const jax = await peer("npm:@jax-js/jax@0.1.25");
  await jax.init("wasm");
  jax.defaultDevice("wasm");
  const np = jax.numpy;
  // deno-lint-ignore no-explicit-any
  const mm = jax.jit((x: any, y: any) => np.matmul(x, y));
  return {
    name: "jax-js wasm",
    setup(c) {
      const a = np.array(values(size(c.aDims), 1)).reshape(c.aDims);
      const b = np.array(values(size(c.bDims), 2)).reshape(c.bDims);
      return Promise.resolve(async () => {
        const out = mm(a.ref, b.ref);
        await out.data();
      });
    },
  };
}

async function ortWebSide(): Promise<Side> {
  const ort = await peer("npm:onnxruntime-web@1.30.0");
  ort.env.wasm.numThreads = 1;
  return {
    name: "ort-web 1t",
    async setup(c) {
      const worker = globalThis.Worker;
      const s = await ort.InferenceSession.create(matmulModel(c.aDims, c.bDims), {
        executionProviders: ["wasm"],
      });
      globalThis.Worker = worker;
      return ortMatmulRun(ort, s, c);
    },
  };
}

/** One onnxruntime (web or node) matmul call on `c`'s operands, its result read back. */
// deno-lint-ignore no-explicit-any -- the peers are untyped (bench/_peer.ts)
function ortMatmulRun(ort: any, session: any, c: { aDims: number[]; bDims: number[] }) {
  const a = new ort.Tensor("float32", values(size(c.aDims), 1), c.aDims);
  const b = new ort.Tensor("float32", values(size(c.bDims), 2), c.bDims);
  return async () => {
    const r = await session.run({ A: a, B: b });
    await r.C.getData();
  };
}

async function ortNodeSide(): Promise<Side> {
  const ort = await peer("npm:onnxruntime-node@1.30.0");
  return {
    name: "ort-node 2t",
    async setup(c) {
      const s = await ort.InferenceSession.create(matmulModel(c.aDims, c.bDims), {
        intraOpNumThreads: 2,
        interOpNumThreads: 1,
      });
      return ortMatmulRun(ort, s, c);
    },
  };
}

const settle = () => new Promise((r) => setTimeout(r, 60));

async function main(): Promise<void> {
  const sides: Side[] = [];
  const missing: string[] = [];
  // jax-js first: its workers must start before onnxruntime-web replaces `Worker`.
  for (const [name, load] of [["jax-js", jaxSide], ["onnxruntime-web", ortWebSide]] as const) {
    try {
      sides.push(await load());
    } catch (e) {
      missing.push(`${name}: ${e instanceof Error ? e.message : e}`);
    }
  }
  try {
    sides.push(await ortNodeSide());
  } catch (e) {
    missing.push(`onnxruntime-node: ${e instanceof Error ? e.message : e}`);
  }
  sides.unshift(
    relaxvmSide("auto", "relaxvm"),
    // One thread, as onnxruntime-web runs: where the machine is shared, the kernel alone.
    relaxvmSide("auto", "relaxvm 1t", 1),
    relaxvmSide("typescript", "relaxvm TS"),
  );

  const cases: CaseSpec[] = [
    {
      name: "matmul 256",
      aDims: [256, 256],
      bDims: [256, 256],
      linear: false,
      flops: 2 * 256 ** 3,
    },
    {
      name: "matmul 1024",
      aDims: [1024, 1024],
      bDims: [1024, 1024],
      linear: false,
      flops: 2 * 1024 ** 3,
    },
    ...(quick ? [] : [{
      name: "batched [8,256,512]@[512,512]",
      aDims: [8, 256, 512],
      bDims: [512, 512],
      linear: false,
      flops: 2 * 8 * 256 * 512 * 512,
    }]),
    {
      name: "GEMV [1,4096]·[4096,4096]",
      aDims: [1, 4096],
      bDims: [4096, 4096],
      linear: true,
      flops: 2 * 4096 * 4096,
      weightBytes: 4096 * 4096 * 4,
    },
  ];

  const info = await cpuThreadsReady().then(() => cpuKernelInfo());
  const floor = copyFloor();
  const header = [
    "case",
    ...sides.map((s) => s.name),
    "vs jax-js",
    "vs ort-web",
    "vs ort-node",
    "1t vs ort-web",
  ];
  const rows: string[][] = [];
  for (const c of cases) {
    const runs: (() => Promise<void>)[] = [];
    for (const s of sides) {
      const run = await s.setup(c);
      await run(); // warm: compiled, pools filled
      runs.push(run);
    }
    const times: number[][] = sides.map(() => []);
    for (let r = 0; r < ROUNDS; r++) {
      // Each round starts with a different side, so none always follows the same neighbour.
      for (let j = 0; j < sides.length; j++) {
        const i = (r + j) % sides.length;
        await settle();
        await sides[i].prepare?.();
        const t0 = performance.now();
        await runs[i]();
        times[i].push(performance.now() - t0);
      }
    }
    const ms = times.map(median);
    const fig = (t: number) =>
      c.weightBytes !== undefined
        ? `${(c.weightBytes / t / 1e6).toFixed(1)} GB/s`
        : `${(c.flops / t / 1e6).toFixed(1)} GFLOP/s`;
    const ratio = (name: string, of = "relaxvm") => {
      const i = sides.findIndex((s) => s.name.startsWith(name));
      const j = sides.findIndex((s) => s.name === of);
      return i < 0 ? "n/a" : `${(ms[i] / ms[j]).toFixed(2)}×`;
    };
    rows.push([
      c.name,
      ...ms.map(fig),
      ratio("jax-js"),
      ratio("ort-web"),
      ratio("ort-node"),
      ratio("ort-web", "relaxvm 1t"),
    ]);
    if (c.weightBytes !== undefined) {
      const gbs = c.weightBytes / ms[0] / 1e6;
      rows.push([
        "… GEMV vs copy floor",
        `${(100 * gbs / floor).toFixed(0)}% of ${floor.toFixed(1)} GB/s`,
        ...header.slice(2).map(() => ""),
      ]);
    }
    console.error(`measured ${c.name}`);
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    `| ${
      cells.map((s, i) => (i === 0 ? s.padEnd(widths[i]) : s.padStart(widths[i]))).join(" | ")
    } |`;
  console.log(line(header));
  console.log(`|${widths.map((w, i) => "-".repeat(w + 1) + (i === 0 ? "-" : ":")).join("|")}|`);
  for (const r of rows) console.log(line(r));
  console.log(
    `\nrelaxvm: ${info.simd ?? "TypeScript"} kernels, ${info.threads} thread(s)${
      info.threadsReason === null ? "" : ` (${info.threadsReason})`
    }; through a VM call, result read. Medians of ${ROUNDS} interleaved rounds (each starting with another side), each call after a\n` +
      `60 ms pause. "vs X" = X's time / relaxvm's (above 1: relaxvm is faster); "1t vs ort-web" = onnxruntime-web's time / relaxvm's on one thread.`,
  );
  for (const m of missing) console.log(`not measured: ${m}`);
}

if (import.meta.main) {
  await main();
  Deno.exit(0); // jax-js's workers keep the process alive
}
