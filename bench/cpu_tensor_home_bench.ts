/**
 * Where CPU tensors live (issue 32): the decode GEMV `[1, 4096]·[4096,
 * 4096]` (64 MiB of float32 weight, read once per call) with the weight as
 * an ordinary `tensor()` passed to every call, sealed from a tensor cache,
 * and as tfjs-backend-wasm would hold it: already in the kernels'
 * WebAssembly memory, row-major. Against onnxruntime-web and jax-js in the
 * same process, interleaved, medians. The decision and the figures are in
 * docs/performance.md ("Where CPU tensors live").
 *
 * ```sh
 * deno run --lock=deno.lock -A bench/cpu_tensor_home_bench.ts            # 9 rounds
 * deno run --lock=deno.lock -A bench/cpu_tensor_home_bench.ts --quick    # 5 rounds
 * ```
 *
 * Sides, each timed call reading its result:
 * - **tensor()**: the weight made by `tensor()`, not sealed, through a
 *   one-instruction VM function (`vm.op.linear`): the kernel copies it into
 *   its memory a cache-sized chunk at a time on every call.
 * - **sealed**: the same values written with `dumpTensorCache` and loaded
 *   with `loadTensorCache` (so sealed, as a model's weights are): its copy
 *   in the kernels' memory is made on the first call (before timing) and
 *   read from then on.
 * - **in wasm memory**: the prototype of tfjs-backend-wasm's design. The
 *   weight is written once, row-major, into a memory of the kernels (where
 *   such a tensor would live from its creation), and each
 *   call copies x in, runs `dot_rows` over the weight in place and copies
 *   the outputs out: what a call would cost if every CPU tensor lived in
 *   that memory. One thread (it runs on the calling thread's memory).
 * - **copy in**: the part of a call such a design saves, alone: the 64 MiB
 *   weight `TypedArray.set` into the kernels' memory (and what it would
 *   cost once, when such a tensor is made from a JavaScript array).
 * - jax-js (its `wasm` device) and onnxruntime-web (WebAssembly, one
 *   thread), `[1, 4096] @ [4096, 4096]`, as bench/cpu_wasm_bench.ts runs them.
 *
 * relaxvm's sides run on its default threads and, marked "1t", on one.
 *
 * @module
 */

import {
  cpu,
  dumpTensorCache,
  ExecBuilder,
  getGlobalFunc,
  loadTensorCache,
  type NDArray,
  tensor,
  VirtualMachine,
} from "../mod.ts";
import { cpuThreadSetting } from "../devices/cpu_device.ts";
import {
  cpuKernelInfo,
  cpuThreadsReady,
  type GemmExports,
  wasmKernelsFor,
} from "../kernels/cpu/wasm/runtime.ts";
import { matmulModel } from "./_onnx_matmul.ts";
import { copyFloor } from "./_copy_floor.ts";
import { randomValues } from "./_random.ts";
import { peer } from "./_peer.ts";
import { median } from "./_stats.ts";

const ROUNDS = Deno.args.includes("--quick") ? 5 : 9;
const K = 4096, N = 4096;
const WEIGHT_BYTES = N * K * 4;
const x = randomValues(K, 1) as Float32Array<ArrayBuffer>;
/** The weight stored `[N, K]` (relaxvm's `linear`); the peers take its transpose `[K, N]`. */
const w = randomValues(N * K, 2) as Float32Array<ArrayBuffer>;
const defaultThreads = cpuThreadSetting();

interface Side {
  name: string;
  run(): Promise<Float32Array | null>;
  /** Awaited before each timed call, untimed. */
  prepare?(): Promise<unknown>;
}

const ib = new ExecBuilder();
ib.function("main", { num_inputs: 2 }, () => {
  ib.emit_call("vm.op.linear", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
  ib.emit_ret(ib.r(2));
});
const vm = new VirtualMachine(ib.get(), cpu());
const xT = tensor(x, { shape: [1, K] });

function relaxvmSide(name: string, weight: NDArray, threads: number): Side {
  return {
    name,
    // Restarted untimed: the pool stops after 300 ms idle, as bench/cpu_wasm_bench.ts says.
    prepare: () => {
      cpu(0, { threads });
      return cpuThreadsReady();
    },
    async run() {
      const out = await vm.invoke("main", xT, weight) as NDArray;
      const v = out.dataSync() as Float32Array;
      out.dispose();
      return v;
    },
  };
}

/** The kernels compiled for an ordinary (unshared) memory, on a memory of their own. */
function ownInstance(bytes: number): { exports: GemmExports; memory: WebAssembly.Memory } {
  const k = wasmKernelsFor(Infinity, 0);
  if (k === null) throw new Error("no WebAssembly kernels here");
  const module = (k.local as { module?: WebAssembly.Module }).module ?? k.module;
  const memory = new WebAssembly.Memory({ initial: Math.ceil(bytes / 65536), maximum: 32768 });
  const exports = new WebAssembly.Instance(module, { env: { memory } })
    .exports as unknown as GemmExports;
  return { exports, memory };
}

/**
 * The prototype: the weight in a kernel memory from the start, row-major
 * (a memory of its own, so that the other sides' scratch cannot overwrite
 * it); a call copies x in and the outputs out.
 */
function inWasmSide(): Side {
  const xAt = 0, oAt = K * 4, wAt = oAt + N * 4;
  const { exports, memory } = ownInstance(wAt + WEIGHT_BYTES);
  new Float32Array(memory.buffer).set(w, wAt / 4); // once: the tensor's creation
  return {
    name: "in wasm memory 1t",
    run() {
      const view = new Float32Array(memory.buffer);
      view.set(x, xAt / 4);
      exports.dot_rows(xAt, wAt, oAt, N, K);
      return Promise.resolve(view.slice(oAt / 4, oAt / 4 + N));
    },
  };
}

/** The copy such a design saves per call: the weight into a kernel memory. */
function copyInSide(): Side {
  const { memory } = ownInstance(WEIGHT_BYTES);
  const view = new Float32Array(memory.buffer);
  return {
    name: "copy in (64 MiB set) 1t",
    run() {
      view.set(w);
      return Promise.resolve(null);
    },
  };
}

/** `w` as `[K, N]` (the peers' `x @ B`). */
function transposed(): Float32Array<ArrayBuffer> {
  const t = new Float32Array(N * K);
  for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) t[k * N + n] = w[n * K + k];
  return t;
}

async function jaxSide(bT: Float32Array<ArrayBuffer>): Promise<Side> {
  const jax = await peer("npm:@jax-js/jax@0.1.25");
  await jax.init("wasm");
  jax.defaultDevice("wasm");
  const np = jax.numpy;
  // deno-lint-ignore no-explicit-any
  const mm = jax.jit((a: any, b: any) => np.matmul(a, b));
  const a = np.array(x).reshape([1, K]);
  const b = np.array(bT).reshape([K, N]);
  return {
    name: "jax-js wasm",
    async run() {
      const out = mm(a.ref, b.ref);
      return await out.data() as Float32Array;
    },
  };
}

async function ortWebSide(bT: Float32Array<ArrayBuffer>): Promise<Side> {
  const ort = await peer("npm:onnxruntime-web@1.30.0");
  ort.env.wasm.numThreads = 1;
  const worker = globalThis.Worker;
  const s = await ort.InferenceSession.create(matmulModel([1, K], [K, N]), {
    executionProviders: ["wasm"],
  });
  globalThis.Worker = worker;
  const a = new ort.Tensor("float32", x, [1, K]);
  const b = new ort.Tensor("float32", bT, [K, N]);
  return {
    name: "ort-web 1t",
    async run() {
      const r = await s.run({ A: a, B: b });
      return await r.C.getData() as Float32Array;
    },
  };
}

const settle = () => new Promise((r) => setTimeout(r, 60));

async function main(): Promise<void> {
  const plain = tensor(w, { shape: [N, K] });
  const dir = await Deno.makeTempDir({ prefix: "relaxvm-home-" });
  await dumpTensorCache({ w: plain }, dir);
  await loadTensorCache(dir);
  const sealed = getGlobalFunc("vm.builtin.tensor_cache.get")!("w") as NDArray;
  if (!sealed.sealed) throw new Error("the loaded weight is not sealed");
  const bT = transposed();
  const sides: Side[] = [];
  const missing: string[] = [];
  // jax-js first: its workers must start before onnxruntime-web replaces `Worker`.
  for (const [name, load] of [["jax-js", jaxSide], ["onnxruntime-web", ortWebSide]] as const) {
    try {
      sides.push(await load(bT));
    } catch (e) {
      missing.push(`${name}: ${e instanceof Error ? e.message : e}`);
    }
  }
  sides.unshift(
    relaxvmSide("tensor()", plain, defaultThreads),
    relaxvmSide("sealed", sealed, defaultThreads),
    relaxvmSide("tensor() 1t", plain, 1),
    relaxvmSide("sealed 1t", sealed, 1),
    inWasmSide(),
    copyInSide(),
  );
  // Every side's result against the first's, before timing (and warm: copies made, compiled).
  const want = (await sides[0].run())!;
  for (const s of sides) {
    await s.prepare?.();
    const got = await s.run();
    if (got === null) continue;
    for (let j = 0; j < N; j++) {
      if (Math.abs(got[j] - want[j]) > 1e-3 * Math.max(1, Math.abs(want[j]))) {
        throw new Error(`${s.name}: [${j}] = ${got[j]}, tensor() gave ${want[j]}`);
      }
    }
  }
  const floor = copyFloor();
  const times: number[][] = sides.map(() => []);
  for (let r = 0; r < ROUNDS; r++) {
    for (let j = 0; j < sides.length; j++) {
      const i = (r + j) % sides.length;
      await settle();
      await sides[i].prepare?.();
      const t0 = performance.now();
      await sides[i].run();
      times[i].push(performance.now() - t0);
    }
  }
  const info = cpuKernelInfo();
  console.log(
    `GEMV [1, ${K}]·[${K}, ${N}] (64 MiB weight), relaxvm ${info.simd} on ${defaultThreads} thread(s); ` +
      `medians of ${ROUNDS} interleaved rounds; copy floor ${
        floor.toFixed(1)
      } GB/s (128 MiB set, read + write)`,
  );
  console.log("| side | ms | GB/s of weight | % of copy floor |");
  console.log("| --- | ---: | ---: | ---: |");
  for (const [i, s] of sides.entries()) {
    const ms = median(times[i]), gbs = WEIGHT_BYTES / ms / 1e6;
    console.log(
      `| ${s.name} | ${ms.toFixed(2)} | ${gbs.toFixed(1)} | ${(100 * gbs / floor).toFixed(0)}% |`,
    );
  }
  for (const m of missing) console.log(`not measured: ${m}`);
  getGlobalFunc("vm.builtin.tensor_cache.clear")!();
  await Deno.remove(dir, { recursive: true });
}

if (import.meta.main) {
  await main();
  Deno.exit(0); // jax-js's workers keep the process alive
}
