/**
 * The same TVM executable in TVM's own web runtime (tvmjs) and in relaxvm, one process,
 * interleaved (issue 29, item 5).
 *
 * tvmjs runs relax.build's output for `Target("webgpu", host=wasm32)`: the host code
 * compiled to WebAssembly and linked with TVM's C++ runtime (its VM, its paged KV cache),
 * the WGSL kernels inside. relaxvm runs the relaxvm package of the same module
 * (`tools/tvm/export_webgpu.py`, `Target("webgpu", host="llvm")`): TVM's bytecode in its own
 * VM, the same WGSL (checked here: every kernel's source identical), host code as launch plans.
 * Both get the package's weights and inputs; the outputs are compared with each other and with
 * TVM's CPU build (`reference.json`).
 *
 * - `mlp_bench` (256 → 1024 → 256, batch 64) and `encoder_bench` (d 256, 4 heads, MLP 1024,
 *   sequence 64): ms per call, from the call to its result read back;
 * - the tiny Llama of `testdata/tvm_webgpu/llama` (each runtime's own paged KV cache: TVM's C++
 *   one inside the wasm, relaxvm's TypeScript one): ms per decode step at 1, 4 and 16 sequences
 *   (embed, `batch_decode`, the logits read back), after a prefill of 8 tokens each.
 *
 * ```sh
 * bash tools/tvm/setup.sh && apt-get install -y emscripten   # once
 * bash tools/tvmjs/build.sh                                  # tvmjs into .tvmjs/ (minutes)
 * deno run -A bench/tvmjs_bench.ts [--quick] [--only=llama]  # exports the models on first run
 * ```
 *
 * Without `.tvmjs/` it says how to build it and exits.
 *
 * @module
 */

import { loadTVMPackage, tensor, webgpu } from "../mod.ts";
import { TVMLanguageModel } from "../models.ts";
import { float32s, maxRelativeDifference, type ReferenceCase } from "../tests/_tvm_packages.ts";
import { median } from "./_stats.ts";

const root = new URL("../", import.meta.url);
const TVMJS = new URL(".tvmjs/", root);
const python = new URL("tools/tvm/.venv/bin/python", root);
const quick = Deno.args.includes("--quick");
const ROUNDS = quick ? 3 : 6, PER_ROUND = quick ? 2 : 4, WARMUP = 2;
const only = Deno.args.find((a) => a.startsWith("--only="))?.slice(7).split(",");
/** Whether `--only=a,b` (mlp_bench, encoder_bench, llama) leaves model `name` in. */
const wanted = (name: string) => only === undefined || only.includes(name);
const exists = (u: URL) => Deno.stat(u).then(() => true, () => false);

// deno-lint-ignore no-explicit-any
type Any = any;

async function run(args: string[], env: Record<string, string> = {}): Promise<void> {
  const { code, stderr } = await new Deno.Command(python, {
    args,
    cwd: root,
    env,
    stdout: "null",
    stderr: "piped",
  }).output();
  if (code !== 0) throw new Error(new TextDecoder().decode(stderr));
}

/** The relaxvm package of `name` (bench/.tvm_packages/, exported on first use). */
async function relaxvmPackage(name: string): Promise<URL> {
  if (name === "llama") return new URL("testdata/tvm_webgpu/llama/", root);
  const dir = new URL(`bench/.tvm_packages/${name}/`, root);
  if (!await exists(new URL("package.json", dir))) {
    console.log(`exporting ${name} for relaxvm into ${dir.pathname} ...`);
    await run(["tools/tvm/export_webgpu.py", name, dir.pathname]);
  }
  return dir;
}

/** The tvmjs build of `name` (.tvmjs/models/, exported on first use). */
async function tvmjsModel(name: string): Promise<URL> {
  const dir = new URL(`models/${name}/`, TVMJS);
  if (!await exists(new URL("model.wasm", dir))) {
    console.log(`building ${name} for tvmjs into ${dir.pathname} ...`);
    await run(["tools/tvmjs/export_tvmjs.py", name, dir.pathname], {
      TVM_HOME: new URL("tvm/", TVMJS).pathname,
    });
  }
  return dir;
}

/** How many of the relaxvm package's kernels are, byte for byte, in the tvmjs build's WGSL. */
async function sameKernels(pkgDir: URL, wasmDir: URL): Promise<string> {
  const manifest = JSON.parse(await Deno.readTextFile(new URL("package.json", pkgDir)));
  const built = JSON.parse(await Deno.readTextFile(new URL("kernels.json", wasmDir)));
  const kernels = Object.entries(manifest.kernels as Record<string, { wgsl: string }>);
  const same = kernels.filter(([n, k]) => n in built.func_info && built.source.includes(k.wgsl));
  return `${same.length} of ${kernels.length} kernels identical (tvmjs build has ${
    Object.keys(built.func_info).length
  })`;
}

/** The package's weights as host arrays, in its cache's order. */
async function weights(
  pkgDir: URL,
): Promise<{ name: string; shape: number[]; data: Float32Array }[]> {
  const cache = JSON.parse(await Deno.readTextFile(new URL("params/ndarray-cache.json", pkgDir)));
  const out = [];
  for (const shard of cache.records) {
    const bytes = await Deno.readFile(new URL(`params/${shard.dataPath}`, pkgDir));
    for (const r of shard.records) {
      if (r.dtype !== "float32") throw new TypeError(`weight ${r.name} of dtype ${r.dtype}`);
      const data = new Float32Array(bytes.slice(r.byteOffset, r.byteOffset + r.nbytes).buffer);
      out.push({ name: r.name, shape: r.shape, data });
    }
  }
  return out;
}

/**
 * tvmjs's WASI polyfill (emscripten's glue). The glue takes any global `process` for Node.js and
 * then reads `__dirname` and `require("fs")`, which a Deno module has not; Deno defines
 * `process`, so it is hidden while the glue looks (it decides once, at construction).
 */
function polyfillWASI(tvmjs: Any): Any {
  const global = globalThis as Any, process = global.process;
  delete global.process;
  try {
    return tvmjs.createPolyfillWASI();
  } finally {
    global.process = process;
  }
}

/** A tvmjs instance running `wasm` on its own WebGPU device. */
async function tvmjsInstance(tvmjs: Any, wasm: URL): Promise<Any> {
  const tvm = await tvmjs.instantiate(
    (await Deno.readFile(wasm)).buffer,
    polyfillWASI(tvmjs),
    () => {},
  );
  const gpu = await tvmjs.detectGPUDevice();
  if (gpu === undefined) throw new Error("tvmjs: no WebGPU device");
  tvm.initWebGPU(gpu.device);
  return tvm;
}

/** tvmjs's VM of the instance, its kernels compiled. */
async function tvmjsVM(tvm: Any): Promise<Any> {
  tvm.beginScope();
  const vm = tvm.detachFromCurrentScope(tvm.createVirtualMachine(tvm.webgpu()));
  tvm.endScope();
  await tvm.asyncLoadWebGPUPipelines(vm.getInternalModule());
  return vm;
}

function gpuTensor(tvm: Any, shapeOf: number[], data: Float32Array | Int32Array): Any {
  const dtype = data instanceof Int32Array ? "int32" : "float32";
  return tvm.detachFromCurrentScope(tvm.empty(shapeOf, dtype, tvm.webgpu()).copyFrom(data));
}

/** A tvmjs tensor's values, read back from the GPU. */
async function readBack(tvm: Any, t: Any): Promise<Float32Array> {
  const host = tvm.empty(t.shape, t.dtype, tvm.cpu());
  host.copyFrom(t);
  await tvm.webgpu().sync();
  return host.toArray() as Float32Array;
}

async function forwardModels(tvmjs: Any, table: string[]): Promise<void> {
  const gpu = await webgpu();
  for (const name of ["mlp_bench", "encoder_bench"].filter(wanted)) {
    const pkgDir = await relaxvmPackage(name), wasmDir = await tvmjsModel(name);
    console.log(`${name}: ${await sameKernels(pkgDir, wasmDir)}`);
    const ref = (JSON.parse(await Deno.readTextFile(new URL("reference.json", pkgDir))) as {
      cases: ReferenceCase[];
    }).cases[0];
    const xData = float32s(ref.inputs[0].base64), want = float32s(ref.output.base64);

    const tOwn = performance.now();
    using pkg = await loadTVMPackage(pkgDir, { device: gpu });
    const ownLoadMs = performance.now() - tOwn;
    const ownVM = pkg.createVM();
    using x = tensor(xData, { shape: ref.inputs[0].shape, device: gpu });
    const ownArgs = [x, ...pkg.params()];
    const own = async () => {
      using y = await ownVM.invokeTensor("forward", ...ownArgs);
      return await y.data() as Float32Array;
    };

    const tload = performance.now();
    const tvm = await tvmjsInstance(tvmjs, new URL("model.wasm", wasmDir));
    const vm = await tvmjsVM(tvm);
    const loadMs = performance.now() - tload;
    tvm.beginScope();
    const forward = tvm.detachFromCurrentScope(vm.getFunction("forward"));
    const params = (await weights(pkgDir)).map((w) => gpuTensor(tvm, w.shape, w.data));
    const tx = gpuTensor(tvm, ref.inputs[0].shape, xData);
    tvm.endScope();
    const theirs = async () => {
      tvm.beginScope();
      try {
        return await readBack(tvm, forward(tx, ...params));
      } finally {
        tvm.endScope();
      }
    };

    const a = await theirs(), b = await own();
    console.log(
      `  loaded in ${loadMs.toFixed(0)} ms (tvmjs), ${
        ownLoadMs.toFixed(0)
      } ms (relaxvm); max rel diff vs TVM llvm: tvmjs ${
        maxRelativeDifference(a, want).toExponential(1)
      }, relaxvm ${maxRelativeDifference(b, want).toExponential(1)}; tvmjs vs relaxvm ${
        maxRelativeDifference(a, b).toExponential(1)
      }`,
    );
    const times = await interleave([theirs, own]);
    const [t, r] = times.map(median);
    table.push(
      `| ${name} | ${t.toFixed(2)} | ${r.toFixed(2)} | ${(t / r).toFixed(2)} | ${
        maxRelativeDifference(a, b).toExponential(1)
      } |`,
    );
    tvm.dispose();
  }
}

/** Runs each side WARMUP times, then ROUNDS rounds of PER_ROUND calls, alternating the order. */
async function interleave(sides: (() => Promise<unknown>)[]): Promise<number[][]> {
  for (let i = 0; i < WARMUP; i++) for (const f of sides) await f();
  const times: number[][] = sides.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? [0, 1] : [1, 0];
    for (const s of order) {
      for (let i = 0; i < PER_ROUND; i++) {
        const t0 = performance.now();
        await sides[s]();
        times[s].push(performance.now() - t0);
      }
    }
  }
  return times;
}

const PAGE = 16, PROMPT = 8;

/** MLC's host loop over tvmjs: one forward (embed, batch_prefill or batch_decode). */
class TvmjsLlama {
  readonly #tvm: Any;
  readonly #vm: Any;
  readonly #kv: Any;
  readonly #params: Any;
  readonly #f: Record<string, Any>;
  readonly hidden: number;
  readonly vocab: number;

  private constructor(tvm: Any, vm: Any, kv: Any, params: Any, hidden: number, vocab: number) {
    this.#tvm = tvm;
    this.#vm = vm;
    this.#kv = kv;
    this.#params = params;
    this.hidden = hidden;
    this.vocab = vocab;
    const g = (n: string) => tvm.detachFromCurrentScope(tvm.getGlobalFunc(`vm.builtin.${n}`));
    const v = (n: string) => tvm.detachFromCurrentScope(vm.getFunction(n));
    tvm.beginScope();
    this.#f = {
      add: g("kv_state_add_sequence"),
      begin: g("kv_state_begin_forward"),
      end: g("kv_state_end_forward"),
      embed: v("embed"),
      prefill: v("batch_prefill"),
      decode: v("batch_decode"),
    };
    tvm.endScope();
  }

  static async load(tvmjs: Any, wasm: URL, pkgDir: URL, maxBatch: number): Promise<TvmjsLlama> {
    const tvm = await tvmjsInstance(tvmjs, wasm);
    const vm = await tvmjsVM(tvm);
    const ws = await weights(pkgDir);
    tvm.beginScope();
    const params = tvm.detachFromCurrentScope(
      tvm.makeTVMArray(ws.map((w) => tvm.empty(w.shape, "float32", tvm.webgpu()).copyFrom(w.data))),
    );
    const s = (n: number) => tvm.makeShapeTuple([n]);
    const kv = tvm.detachFromCurrentScope(
      vm.getFunction("create_paged_kv_cache")(s(maxBatch), s(1024), s(128), s(PAGE), s(0)),
    );
    tvm.endScope();
    const embed = ws.find((w) => w.name.endsWith("embed_tokens.weight"))!;
    return new TvmjsLlama(tvm, vm, kv, params, embed.shape[1], embed.shape[0]);
  }

  addSequence(id: number): void {
    this.#tvm.beginScope();
    this.#f.add(this.#kv, this.#tvm.scalar(id, "int64"));
    this.#tvm.endScope();
  }

  async forward(entries: { seqId: number; tokens: number[] }[]): Promise<Float32Array[]> {
    const tvm = this.#tvm, f = this.#f, d = this.hidden;
    tvm.beginScope();
    try {
      const lengths = entries.map((e) => e.tokens.length);
      f.begin(
        this.#kv,
        tvm.makeShapeTuple(entries.map((e) => e.seqId)),
        tvm.makeShapeTuple(lengths),
      );
      const flat = Int32Array.from(entries.flatMap((e) => e.tokens));
      const ids = tvm.empty([flat.length], "int32", tvm.webgpu()).copyFrom(flat);
      const embeds = f.embed(ids, this.#params);
      let out: Any;
      if (lengths.every((n) => n === 1)) {
        out = f.decode(embeds.view([entries.length, 1, d]), this.#kv, this.#params);
      } else {
        let row = -1;
        const last = tvm.empty([entries.length], "int32", tvm.webgpu())
          .copyFrom(Int32Array.from(lengths, (n) => (row += n)));
        out = f.prefill(embeds.view([1, flat.length, d]), last, this.#kv, this.#params);
      }
      const all = await readBack(tvm, out.get(0));
      f.end(this.#kv);
      const V = this.vocab;
      return entries.map((_, i) => all.slice(i * V, (i + 1) * V));
    } finally {
      tvm.endScope();
    }
  }

  dispose(): void {
    this.#tvm.dispose();
  }
}

const prompt = (seq: number) =>
  Array.from({ length: PROMPT }, (_, i) => (7 * i + 13 * seq + 3) % 64);
const argmax = (a: Float32Array) => a.reduce((m, x, i) => (x > a[m] ? i : m), 0);

async function llama(tvmjs: Any, table: string[]): Promise<void> {
  const pkgDir = await relaxvmPackage("llama"), wasmDir = await tvmjsModel("llama");
  console.log(`llama: ${await sameKernels(pkgDir, wasmDir)}`);
  const tokenizer = { encode: () => [], decode: () => "" };
  for (const batch of [1, 4, 16]) {
    const tload = performance.now();
    const theirs = await TvmjsLlama.load(tvmjs, new URL("model.wasm", wasmDir), pkgDir, batch);
    const loadMs = performance.now() - tload;
    const tOwn = performance.now();
    const own = await TVMLanguageModel.load(pkgDir, { tokenizer, maxBatchSize: batch });
    const ownLoadMs = performance.now() - tOwn;
    try {
      const ids = Array.from({ length: batch }, (_, i) => i);
      for (const id of ids) {
        theirs.addSequence(id);
        own.addSequence(id);
      }
      // Prefill every sequence (one batch_prefill), then decode greedily, both runtimes fed the
      // same tokens (tvmjs's argmax); logits compared every step.
      const entries = ids.map((seqId) => ({ seqId, tokens: prompt(seqId) }));
      let worst = 0, argmaxAgree = true;
      const step = async (es: { seqId: number; tokens: number[] }[]) => {
        const [a, b] = [await theirs.forward(es), await own.forward(es)];
        for (let i = 0; i < a.length; i++) {
          worst = Math.max(worst, maxRelativeDifference(a[i], b[i]));
          argmaxAgree &&= argmax(a[i]) === argmax(b[i]);
        }
        return a.map(argmax);
      };
      let next = await step(entries);
      const steps = WARMUP + ROUNDS * PER_ROUND;
      for (let i = 0; i < 3; i++) {
        next = await step(ids.map((seqId, j) => ({ seqId, tokens: [next[j]] })));
      }
      // Timed: the decode steps alone, the two runtimes alternating, same tokens for both.
      const times: number[][] = [[], []];
      for (let i = 0; i < steps; i++) {
        const es = ids.map((seqId, j) => ({ seqId, tokens: [next[j]] }));
        const order = i % 2 === 0 ? [0, 1] : [1, 0];
        const got: Float32Array[][] = [[], []];
        for (const s of order) {
          const t0 = performance.now();
          got[s] = await (s === 0 ? theirs.forward(es) : own.forward(es));
          if (i >= WARMUP) times[s].push(performance.now() - t0);
        }
        for (let k = 0; k < batch; k++) {
          worst = Math.max(worst, maxRelativeDifference(got[0][k], got[1][k]));
          argmaxAgree &&= argmax(got[0][k]) === argmax(got[1][k]);
        }
        next = got[0].map(argmax);
      }
      const [t, r] = times.map(median);
      console.log(
        `  batch ${batch}: loaded in ${loadMs.toFixed(0)} ms (tvmjs), ${
          ownLoadMs.toFixed(0)
        } ms (relaxvm); ${steps + 4} forwards, logits max rel diff ${
          worst.toExponential(1)
        }, argmax ${argmaxAgree ? "identical" : "DIFFERS"}`,
      );
      table.push(
        `| llama decode, batch ${batch} | ${t.toFixed(2)} | ${r.toFixed(2)} | ${
          (t / r).toFixed(2)
        } | ${worst.toExponential(1)} |`,
      );
    } finally {
      theirs.dispose();
      own.dispose();
    }
  }
}

if (import.meta.main) {
  const bundle = new URL("tvmjs.js", TVMJS);
  if (!await exists(bundle)) {
    console.log(
      "tvmjs is not built: bash tools/tvmjs/build.sh (needs tools/tvm/.venv, from " +
        "bash tools/tvm/setup.sh, and Debian's emscripten: apt-get install -y emscripten)",
    );
    Deno.exit(0);
  }
  const tvmjs = await import(bundle.href);
  const adapter = await navigator.gpu.requestAdapter();
  console.log(`WebGPU adapter: ${adapter?.info?.description || adapter?.info?.vendor || "?"}`);
  console.log(`load average at start: ${Deno.loadavg().map((x) => x.toFixed(2)).join(" ")}`);
  const table = [
    "| model | tvmjs (ms) | relaxvm (ms) | tvmjs / relaxvm | max rel diff tvmjs vs relaxvm |",
    "| --- | ---: | ---: | ---: | ---: |",
  ];
  await forwardModels(tvmjs, table);
  if (wanted("llama")) await llama(tvmjs, table);
  console.log(table.join("\n"));
  console.log(`load average at end: ${Deno.loadavg().map((x) => x.toFixed(2)).join(" ")}`);
}
