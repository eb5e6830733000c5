// A Llama-architecture model compiled by TVM for WebGPU (tools/tvm/llama_module.py, committed in
// testdata/tvm_webgpu/llama) running in relaxvm through TVM's paged KV cache, the attention done by
// the package's own kernels, replaying TVM's CPU build of the same model and weights driven
// through the same scenario (tools/tvm/llama_trace.py, testdata/kv_state/tvm_llama.json).
import { assert, assertEquals, assertRejects, assertThrows } from "@std/assert";
import {
  Engine,
  getGlobalFunc,
  loadTVMPackage,
  NDArray,
  PagedKVCache,
  shape,
  tensor,
} from "../../mod.ts";
import { TVMLanguageModel } from "../../models.ts";
import type { WebGPUDevice } from "../../devices/webgpu/webgpu_device.ts";
import type { TVMPackage } from "../../tvm/load_package.ts";
import { maxRelativeDifference, PACKAGES_DIR } from "../_tvm_packages.ts";
import { gpuTest } from "./suite_registry.ts";

/** One step of the trace: the operation and what TVM's CPU build gave after it. */
interface TraceStep {
  op: [string, ...unknown[]];
  /** Full logits per sequence (the scenario). */
  logits?: number[][];
  /** Per sequence [argmax, largest, second largest, sum] of the logits (the random run). */
  summary?: number[][];
  argmax?: number[];
  tokens?: number[][];
  freePages: number;
  totalLength: number;
}

interface Trace {
  cache: number[];
  steps: TraceStep[];
}

const TRACE = new URL("../../testdata/kv_state/tvm_llama.json", import.meta.url);
const BOUND = 1e-4;
const f = (name: string) => getGlobalFunc(`vm.builtin.${name}`)!;

function argmax(row: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

/** Runs the package through the trace's steps; one line per step, and the failures. */
async function replay(gpu: WebGPUDevice, pkg: TVMPackage, trace: Trace, quiet = false) {
  const vm = pkg.createVM();
  const params = pkg.params("embed");
  const kv = await vm.invoke(
    "create_paged_kv_cache",
    ...trace.cache.map((v) => shape(v)),
  ) as PagedKVCache;
  const D = 32;
  const embed = async (ids: number[], dims: number[]) => {
    using x = tensor(Int32Array.from(ids), { device: gpu });
    using e = await vm.invokeTensor("embed", x, params);
    return new NDArray(e.storage, e.byteOffset, dims, "float32").handToUser();
  };
  const forward = async (
    fn: string,
    ids: number[],
    lengths: number[],
    embeds: NDArray,
    extra: unknown[] = [],
  ) => {
    f("kv_state_begin_forward")(kv, shape(...ids), shape(...lengths));
    const out = await vm.invoke(fn, embeds, ...extra, kv, params) as unknown[];
    f("kv_state_end_forward")(kv);
    embeds.dispose();
    const logits = out[0] as NDArray;
    const data = await logits.data() as Float32Array;
    logits.dispose();
    const V = data.length / ids.length;
    return ids.map((_, i) => data.subarray(i * V, (i + 1) * V));
  };
  const lines: string[] = [];
  const failures: string[] = [];
  let worst = 0;
  for (const [n, step] of trace.steps.entries()) {
    const [kind, ...a] = step.op;
    let rows: Float32Array[] | null = null;
    let generated: number[][] | null = null;
    if (kind === "add") f("kv_state_add_sequence")(kv, a[0]);
    else if (kind === "remove") f("kv_state_remove_sequence")(kv, a[0]);
    else if (kind === "fork") f("kv_state_fork_sequence")(kv, a[0], a[1], a[2]);
    else if (kind === "popn") f("kv_state_popn")(kv, a[0], a[1]);
    else if (kind === "prefill") {
      const toks = a[1] as number[];
      rows = await forward(
        "prefill",
        [a[0] as number],
        [toks.length],
        await embed(toks, [1, toks.length, D]),
      );
    } else if (kind === "batch_prefill") {
      const ids = a[0] as number[], lists = a[1] as number[][];
      const flat = lists.flat();
      let end = -1;
      const ends = lists.map((l) => (end += l.length));
      using positions = tensor(Int32Array.from(ends), { device: gpu });
      rows = await forward(
        "batch_prefill",
        ids,
        lists.map((l) => l.length),
        await embed(flat, [1, flat.length, D]),
        [positions],
      );
    } else if (kind === "batch_decode") {
      const ids = a[0] as number[];
      rows = await forward(
        "batch_decode",
        ids,
        ids.map(() => 1),
        await embed(a[1] as number[], [ids.length, 1, D]),
      );
    } else if (kind === "greedy") {
      const ids = a[0] as number[];
      let last = a[1] as number[];
      generated = [];
      for (let s = 0; s < (a[2] as number); s++) {
        rows = await forward(
          "batch_decode",
          ids,
          ids.map(() => 1),
          await embed(last, [ids.length, 1, D]),
        );
        last = rows.map(argmax);
        generated.push(last);
      }
    } else if (kind === "forward") {
      const ids = a[0] as number[], lists = a[1] as number[][];
      const flat = lists.flat();
      if (lists.every((l) => l.length === 1)) {
        rows = await forward(
          "batch_decode",
          ids,
          ids.map(() => 1),
          await embed(flat, [ids.length, 1, D]),
        );
      } else {
        let end = -1;
        using positions = tensor(Int32Array.from(lists, (l) => (end += l.length)), { device: gpu });
        rows = await forward(
          "batch_prefill",
          ids,
          lists.map((l) => l.length),
          await embed(flat, [1, flat.length, D]),
          [positions],
        );
      }
    } else throw new Error(`unknown step ${kind}`);
    const problems: string[] = [];
    if (step.summary !== undefined) {
      // [argmax, largest, second largest, sum] of each row, TVM's.
      if (rows === null) throw new Error("no logits");
      rows.forEach((row, i) => {
        const [best, top, second, sum] = step.summary![i];
        const sorted = Float32Array.from(row).sort();
        const scale = Math.abs(top);
        const got = [sorted.at(-1)!, sorted.at(-2)!, row.reduce((x, y) => x + y, 0)];
        const rel = Math.max(
          Math.abs(got[0] - top) / scale,
          Math.abs(got[1] - second) / scale,
          Math.abs(got[2] - sum) / (scale * row.length),
        );
        worst = Math.max(worst, rel);
        if (!(rel <= BOUND)) {
          problems.push(
            `sequence ${(a[0] as number[])[i]}: logits differ by ${rel.toExponential(2)}`,
          );
        }
        if (argmax(row) !== best) {
          problems.push(`sequence ${(a[0] as number[])[i]}: argmax ${argmax(row)} not ${best}`);
        }
      });
    }
    let rel = 0;
    if (step.logits !== undefined) {
      if (rows === null) throw new Error("no logits");
      rows.forEach((row, i) => (rel = Math.max(rel, maxRelativeDifference(row, step.logits![i]))));
      worst = Math.max(worst, rel);
      if (!(rel <= BOUND)) problems.push(`logits differ by ${rel.toExponential(2)} relative`);
      const got = rows.map(argmax);
      if (got.join() !== step.argmax!.join()) problems.push(`argmax ${got} not ${step.argmax}`);
    }
    if (step.tokens !== undefined && JSON.stringify(generated) !== JSON.stringify(step.tokens)) {
      problems.push(
        `greedy tokens ${JSON.stringify(generated)} not ${JSON.stringify(step.tokens)}`,
      );
    }
    if (kv.numAvailablePages !== step.freePages) {
      problems.push(`${kv.numAvailablePages} free pages, TVM ${step.freePages}`);
    }
    if (kv.totalSequenceLength !== step.totalLength) {
      problems.push(`total length ${kv.totalSequenceLength}, TVM ${step.totalLength}`);
    }
    const label = `${n} ${kind}(${JSON.stringify(a).slice(1, 40)}…)`;
    if (quiet && problems.length === 0) continue;
    lines.push(
      `${label}: ${step.logits ? `max rel ${rel.toExponential(2)}, ` : ""}${
        problems.length ? problems.join("; ") : "ok"
      }`,
    );
    for (const p of problems) failures.push(`${label}: ${p}`);
  }
  kv.dispose();
  return { lines, failures, worst };
}

const RANDOM = new URL("../../testdata/kv_state/tvm_llama_random.json", import.meta.url);

gpuTest(
  "TVM-compiled Llama on WebGPU: a seeded run of 1,000 random operations, pages near exhaustion, matches TVM's CPU build",
  async (gpu) => {
    const trace = JSON.parse(await Deno.readTextFile(RANDOM)) as Trace;
    using pkg = await loadTVMPackage(new URL("llama", PACKAGES_DIR), { device: gpu });
    const { lines, failures, worst } = await replay(gpu, pkg, trace, true);
    for (const line of lines.slice(0, 20)) console.log(line);
    const forwards = trace.steps.filter((s) => s.op[0] === "forward").length;
    console.log(
      `${trace.steps.length} operations, ${forwards} forwards: worst ${worst.toExponential(2)}`,
    );
    assertEquals(failures, []);
    assert(trace.steps.length >= 1000);
    assert(trace.steps.filter((s) => s.freePages === 0).length > 50, "the pool runs empty");
  },
);

gpuTest(
  "TVM-compiled Llama on WebGPU with TVM's paged KV cache matches TVM's CPU build step by step",
  async (gpu) => {
    const trace = JSON.parse(await Deno.readTextFile(TRACE)) as Trace;
    using pkg = await loadTVMPackage(new URL("llama", PACKAGES_DIR), { device: gpu });
    const { lines, failures, worst } = await replay(gpu, pkg, trace);
    for (const line of lines) console.log(line);
    assertEquals(failures, []);
    assert(worst <= BOUND, `max relative difference ${worst}`);
    // The scenario reached what it claims: 24 greedy tokens of three sequences.
    assertEquals(trace.steps.at(-1)!.tokens!.length, 24);
  },
);

gpuTest(
  "paged KV cache on WebGPU: attention without the executable's kernels is a RangeError naming the kernel, and the cache stays usable",
  (gpu) => {
    using kv = PagedKVCache.create({
      pageSize: 4,
      maxTotalSequenceLength: 16,
      numLayers: 1,
      numQoHeads: 2,
      numKvHeads: 1,
      headDim: 4,
      device: gpu,
    });
    f("kv_state_add_sequence")(kv, 0);
    f("kv_state_begin_forward")(kv, shape(0), shape(3));
    using qkv = tensor(new Float32Array(3 * 4 * 4), { shape: [3, 4, 4], device: gpu });
    using out = tensor(new Float32Array(3 * 2 * 4), { shape: [3, 2, 4], device: gpu });
    const attend = f("attention_kv_cache_attention_with_fused_qkv");
    assertThrows(() => attend(kv, 0, 0.5, qkv, out), RangeError, "no split-rotary kernel");
    using small = tensor(new Float32Array(2 * 4 * 4), { shape: [2, 4, 4], device: gpu });
    assertThrows(() => attend(kv, 0, 0.5, small, out), RangeError, "not [3, 4, 4]");
    f("kv_state_end_forward")(kv);
    f("kv_state_add_sequence")(kv, 1);
    assertEquals(kv.totalSequenceLength, 3);
    assertEquals(kv.numAvailablePages, 4);
  },
);

gpuTest(
  "engine serving the TVM-compiled Llama on WebGPU: TVM's first tokens, concurrent requests as alone, pages all free",
  async (gpu) => {
    const trace = JSON.parse(await Deno.readTextFile(TRACE)) as Trace;
    // One character per id of the 64-token vocabulary.
    const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";
    const tokenizer = {
      encode: (text: string) => [...text].map((c) => letters.indexOf(c)),
      decode: (ids: readonly number[]) => ids.map((i) => letters[i]).join(""),
    };
    const model = await TVMLanguageModel.load(new URL("llama", PACKAGES_DIR), {
      device: gpu,
      tokenizer,
      maxTotalSequenceLength: 256,
      maxBatchSize: 4,
      prefillChunkSize: 32,
    });
    try {
      assertEquals([model.vocabSize, model.hiddenSize, model.totalPages], [64, 32, 17]);
      const engine = new Engine(model);
      // The prompts of the trace's prefill and batched prefill: TVM's argmax is the first token.
      const prefill = trace.steps[1], batch = trace.steps[4];
      const prompts = [prefill.op[2] as number[], ...(batch.op[2] as number[][])];
      const first = [...prefill.argmax!, ...batch.argmax!];
      const requests = prompts.map((p) => ({
        prompt: tokenizer.decode(p),
        max_tokens: 6,
        temperature: 0,
      }));
      const alone = [];
      for (const r of requests) alone.push((await engine.completions.create(r)).choices[0].text);
      assertEquals(alone.map((t) => letters.indexOf(t[0])), first);
      const together = await Promise.all(requests.map((r) => engine.completions.create(r)));
      assertEquals(together.map((c) => c.choices[0].text), alone);
      assertEquals(engine.stats().freePages, engine.stats().totalPages);
    } finally {
      model.dispose();
    }
  },
);

gpuTest(
  "TVMLanguageModel: a package without MLC's functions is a TypeError naming them",
  async (gpu) => {
    const tokenizer = { encode: () => [0], decode: () => "" };
    await assertRejects(
      () => TVMLanguageModel.load(new URL("mlp", PACKAGES_DIR), { device: gpu, tokenizer }),
      TypeError,
      "the package has no embed, batch_prefill, batch_decode, create_paged_kv_cache",
    );
  },
);

gpuTest(
  "engine serving the TVM-compiled Llama on WebGPU: pages run out (queueing, preemption), a cancelled stream frees its pages at once",
  async (gpu) => {
    const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";
    const tokenizer = {
      encode: (text: string) => [...text].map((c) => letters.indexOf(c)),
      decode: (ids: readonly number[]) => ids.map((i) => letters[i]).join(""),
    };
    // 5 pages of 16 tokens: each request needs 3 by its end, so at most one more fits beside one.
    const model = await TVMLanguageModel.load(new URL("llama", PACKAGES_DIR), {
      device: gpu,
      tokenizer,
      maxTotalSequenceLength: 64,
      maxBatchSize: 4,
      prefillChunkSize: 32,
    });
    try {
      const engine = new Engine(model);
      assertEquals(engine.stats().totalPages, 5);
      const requests = Array.from({ length: 5 }, (_, i) => ({
        prompt: `request${i}abcd`,
        max_tokens: 24,
        temperature: 0.8,
        seed: 100 + i,
      }));
      const alone = [];
      for (const r of requests) alone.push((await engine.completions.create(r)).choices[0].text);
      const together = await Promise.all(requests.map((r) => engine.completions.create(r)));
      assertEquals(together.map((c) => c.choices[0].text), alone);
      assert(together.every((c) => c.usage!.completion_tokens === 24));
      const stats = engine.stats();
      assert(stats.preemptions > 0, "some request was preempted and recomputed");
      assertEquals(stats.freePages, 5);
      // Cancelled mid-stream: its pages are free before the next step.
      const controller = new AbortController();
      const stream = await engine.completions.create({
        prompt: "aLongPromptOfTwentyTwoT",
        max_tokens: 30,
        stream: true,
        temperature: 0,
        signal: controller.signal,
      });
      for (let i = 0; i < 3; i++) await stream.next();
      assertEquals(engine.stats().freePages, 3, "the stream holds 2 pages");
      controller.abort();
      assertEquals(engine.stats().freePages, 5);
      await assertRejects(() => stream.next(), DOMException);
      assertEquals(engine.stats().running, 0);
    } finally {
      model.dispose();
    }
  },
);
