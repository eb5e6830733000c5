/**
 * The paged KV cache's bookkeeping against TVM's own runtime: a seeded random run of
 * 1,500 operations recorded from TVM 0.27's `paged_kv_cache.cc` by
 * tools/tvm/kv_state_trace.py (testdata/kv_state/tvm_trace.json) is replayed on
 * relaxvm's cache through the same global functions, and after every operation
 * these must be TVM's: whether the call was refused, the free pages, the total
 * length, the partial pages a fork copied (source, target, length), the query
 * positions of a forward, and a hash of every sequence's page positions (which names
 * every page id: the free-page order is TVM's too).
 *
 * The data too: tools/tvm/kv_attention_trace.py builds TVM's CPU kernels of
 * `nn.llm.kv_cache` for `llvm`, runs a scenario of prefills, batched decodes, forks,
 * popn and deep prefixes through `attention_with_fused_qkv` with seeded inputs
 * (testdata/kv_state/tvm_attention.json), and relaxvm's CPU reference attention must
 * give TVM's outputs and cached K/V within 1e-5.
 *
 * The replays need no TVM. With TVM (tools/tvm/.venv) the trace is regenerated and must
 * equal the committed one (the attention trace within 1e-6), and a second run of another
 * seed is recorded and replayed;
 * without it those are ignored with a message, unless `RELAXVM_REQUIRE_TVM=1` (CI).
 */

import { assert, assertEquals } from "@std/assert";
import { getGlobalFunc, PagedKVCache, shape, tensor } from "../mod.ts";
import { PageTable } from "../builtins/kv_state/page_table.ts";
import { ignoreWithoutTvm, tvmPython } from "./tvm/tvm_python.ts";
import { kvCreateArgs } from "./_kv_state_args.ts";

interface TraceOp {
  op: [string, ...unknown[]];
  error: boolean;
  message?: string;
  /** TVM raised after changing part of its state (pages ran out mid-way); a `clear` follows. */
  partial?: boolean;
  freePages: number;
  totalLength: number;
  queryPositions?: number[];
  positionHash?: number;
  copies: [number, number, number][];
}

interface Trace {
  tvm: string;
  seed: number;
  config: {
    max_batch_size: number;
    max_total_seq_len: number;
    prefill_chunk_size: number;
    page_size: number;
    num_layers: number;
    num_qo_heads: number;
    num_kv_heads: number;
    head_dim: number;
  };
  numPages: number;
  ops: TraceOp[];
}

const TRACE = new URL("../testdata/kv_state/tvm_trace.json", import.meta.url);
const SCRIPT = new URL("../tools/tvm/kv_state_trace.py", import.meta.url).pathname;

/** FNV-1a over 32-bit integers, little-endian bytes (as the Python script). */
function fnv(values: Iterable<number>, h = 2166136261): number {
  for (const v of values) {
    const u = v >>> 0;
    for (const shift of [0, 8, 16, 24]) {
      h ^= (u >>> shift) & 0xff;
      h = Math.imul(h, 16777619) >>> 0;
    }
  }
  return h;
}

const f = (name: string) => getGlobalFunc(`vm.builtin.${name}`)!;

/** Replays `trace` on a cache made by the create builtin; the first difference, or null. */
function replay(trace: Trace): { mismatch: string | null; counts: Record<string, number> } {
  const c = trace.config;
  const kernel = () => {
    throw new Error("a kernel the bookkeeping should not call");
  };
  using zero = tensor([0], { shape: [], dtype: "float32" });
  using kv = f("paged_attention_kv_cache_create")(
    ...kvCreateArgs(
      {
        maxBatchSize: c.max_batch_size,
        maxTotalSeqLen: c.max_total_seq_len,
        prefillChunkSize: c.prefill_chunk_size,
        pageSize: c.page_size,
        numLayers: c.num_layers,
        numQoHeads: c.num_qo_heads,
        numKvHeads: c.num_kv_heads,
        headDim: c.head_dim,
        ropeMode: 0,
      },
      zero,
      kernel,
    ),
  ) as Disposable & { table: PageTable };
  // The same operations on a bare table, to see the pages a fork copies.
  const table = new PageTable({
    pageSize: c.page_size,
    numPages: trace.numPages,
    maxBatchSize: c.max_batch_size,
    prefillChunkSize: c.prefill_chunk_size,
  });
  let copies: [number, number, number][] = [];
  const copy = (src: number, dst: number, n: number) => void copies.push([src, dst, n]);
  const counts: Record<string, number> = {};
  for (let i = 0; i < trace.ops.length; i++) {
    const want = trace.ops[i];
    const [name, ...args] = want.op as [string, ...number[]];
    copies = [];
    const before = [
      f("attention_kv_cache_get_num_available_pages")(kv),
      f("attention_kv_cache_get_total_sequence_length")(kv),
    ];
    let error: unknown = null, tableError: unknown = null;
    let queryPositions: number[] | undefined;
    try {
      if (name === "add") f("kv_state_add_sequence")(kv, args[0]);
      else if (name === "remove") f("kv_state_remove_sequence")(kv, args[0]);
      else if (name === "fork") f("kv_state_fork_sequence")(kv, args[0], args[1], args[2]);
      else if (name === "popn") f("kv_state_popn")(kv, args[0], args[1]);
      else if (name === "clear") f("kv_state_clear")(kv);
      else if (name === "forward") {
        const [ids, lengths] = want.op.slice(1) as [number[], number[]];
        f("kv_state_begin_forward")(kv, shape(...ids), shape(...lengths));
        using q = f("attention_kv_cache_get_query_positions")(kv) as Disposable & {
          dataSync(): Int32Array;
        };
        queryPositions = [...q.dataSync()];
        f("kv_state_end_forward")(kv);
      }
    } catch (e) {
      error = e;
    }
    try {
      if (name === "add") table.addSequence(args[0]);
      else if (name === "remove") table.removeSequence(args[0]);
      else if (name === "fork") table.forkSequence(args[0], args[1], args[2], copy);
      else if (name === "popn") table.popN(args[0], args[1], copy);
      else if (name === "clear") table.clear();
      else if (name === "forward") {
        const [ids, lengths] = want.op.slice(1) as [number[], number[]];
        table.beginForward(ids, lengths);
      }
    } catch (e) {
      tableError = e;
    }
    const where = `op ${i} ${JSON.stringify(want.op)}`;
    const after = [
      f("attention_kv_cache_get_num_available_pages")(kv),
      f("attention_kv_cache_get_total_sequence_length")(kv),
    ];
    if (error !== null && JSON.stringify(after) !== JSON.stringify(before)) {
      return {
        mismatch: `${where}: refused, yet changed the cache: ${before} to ${after}`,
        counts,
      };
    }
    if (error !== null && !(error instanceof RangeError)) {
      return { mismatch: `${where}: not a RangeError: ${error}`, counts };
    }
    const key = `${name}${error === null ? "" : " refused"}`;
    counts[key] = (counts[key] ?? 0) + 1;
    const got: Partial<TraceOp> = {
      error: error !== null,
      freePages: f("attention_kv_cache_get_num_available_pages")(kv) as number,
      totalLength: f("attention_kv_cache_get_total_sequence_length")(kv) as number,
      copies,
    };
    const expected: Partial<TraceOp> = {
      error: want.error,
      freePages: want.freePages,
      totalLength: want.totalLength,
      copies: want.copies,
    };
    if (want.partial) {
      // TVM's figures are of its half-changed state; relaxvm's are those before the call.
      expected.freePages =
        got.freePages =
        expected.totalLength =
        got.totalLength =
          0;
      counts["refused where TVM changed part of its state"] =
        (counts["refused where TVM changed part of its state"] ?? 0) + 1;
    }
    if (want.queryPositions !== undefined) {
      got.queryPositions = queryPositions;
      expected.queryPositions = want.queryPositions;
    }
    if (want.positionHash !== undefined) {
      let h = 2166136261;
      for (const id of kv.table.sequenceIds.sort((a, b) => a - b)) {
        const map = kv.table.positionMap(id);
        h = fnv([id, map.length, ...map], h);
      }
      got.positionHash = h;
      expected.positionHash = want.positionHash;
    }
    const same = JSON.stringify(got) === JSON.stringify(expected) &&
      (tableError === null) === (error === null) &&
      table.numAvailablePages === after[0];
    if (!same) {
      return {
        mismatch: `${where}: TVM ${JSON.stringify(expected)}${
          want.message ? ` (${want.message})` : ""
        }, relaxvm ${JSON.stringify(got)}${error === null ? "" : ` (${error})`}`,
        counts,
      };
    }
  }
  return { mismatch: null, counts };
}

async function record(seed: number, ops: number): Promise<Trace> {
  const dir = await Deno.makeTempDir({ prefix: "relaxvm-kv-trace-" });
  try {
    const out = `${dir}/trace.json`;
    const { code, stderr } = await new Deno.Command(tvmPython(), {
      args: [SCRIPT, out, "--seed", String(seed), "--ops", String(ops)],
      stdout: "null",
      stderr: "piped",
    }).output();
    if (code !== 0) {
      throw new Error(`kv_state_trace.py failed (${code}): ${new TextDecoder().decode(stderr)}`);
    }
    return JSON.parse(await Deno.readTextFile(out));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("paged KV cache: TVM's recorded trace of 1,500 operations replays figure for figure", async () => {
  const trace = JSON.parse(await Deno.readTextFile(TRACE)) as Trace;
  assert(trace.ops.length >= 1000);
  const { mismatch, counts } = replay(trace);
  console.log(`replayed ${trace.ops.length} operations of TVM ${trace.tvm}:`, counts);
  assertEquals(mismatch, null);
  // The trace covers what it claims: refusals of each kind, pages run out, forks copying.
  assert(trace.ops.some((o) => o.error && o.message?.includes("KV cache is full")));
  assert(trace.ops.filter((o) => o.freePages === 0).length > 20);
  assert(trace.ops.filter((o) => o.op[0] === "fork" && o.copies.length > 0).length > 20);
  assert(trace.ops.filter((o) => o.op[0] === "popn" && o.copies.length > 0).length > 0);
  assert(counts["popn refused"] > 0 && counts["fork refused"] > 0 && counts["forward refused"] > 0);
});

Deno.test({
  name: "paged KV cache: TVM regenerates the committed trace, and a fresh seed replays too",
  ignore: ignoreWithoutTvm("paged KV cache differential"),
  async fn() {
    const committed = JSON.parse(await Deno.readTextFile(TRACE)) as Trace;
    const again = await record(committed.seed, committed.ops.length);
    assertEquals({ ...again, tvm: committed.tvm }, committed);
    const fresh = await record(7, 1200);
    assertEquals(replay(fresh).mismatch, null);
  },
});

// ------------------------------------------------------------ attention against TVM's kernels

interface AttentionTrace {
  tvm: string;
  seed: number;
  config: Trace["config"] & { rope_theta: number; rope_scale: number };
  scenario: [string, ...unknown[]][];
  outputs: number[][];
  cached: Record<string, { k: number[]; v: number[] }>;
  freePages: number;
}

const ATTENTION = new URL("../testdata/kv_state/tvm_attention.json", import.meta.url);
const ATTENTION_SCRIPT = new URL("../tools/tvm/kv_attention_trace.py", import.meta.url).pathname;

/** Numbers in [-1, 1): the generator of tools/tvm/kv_attention_trace.py. */
function lcg(seed: number): (n: number) => Float32Array {
  let s = seed >>> 0;
  return (n) =>
    new Float32Array(n).map(() => {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      return s / 2 ** 31 - 1;
    });
}

/**
 * Runs the trace's scenario on relaxvm's cache with its CPU reference attention; the
 * largest difference from TVM's outputs and cached K/V.
 */
function replayAttention(trace: AttentionTrace): { worst: number; values: number } {
  const c = trace.config;
  const H = c.num_qo_heads, KH = c.num_kv_heads, D = c.head_dim, L = c.num_layers;
  using kv = PagedKVCache.create({
    pageSize: c.page_size,
    maxTotalSequenceLength: c.max_total_seq_len,
    maxBatchSize: c.max_batch_size,
    prefillChunkSize: c.prefill_chunk_size,
    numLayers: L,
    numQoHeads: H,
    numKvHeads: KH,
    headDim: D,
    ropeMode: "normal",
    ropeTheta: c.rope_theta,
    ropeScale: c.rope_scale,
  });
  const take = lcg(trace.seed);
  let worst = 0, values = 0, output = 0;
  const compare = (got: ArrayLike<number>, want: readonly number[], what: string) => {
    assertEquals(got.length, want.length, what);
    for (let i = 0; i < want.length; i++) {
      worst = Math.max(worst, Math.abs(got[i] - want[i]));
      values++;
    }
  };
  const lengths = new Map<number, number>();
  for (const [name, ...args] of trace.scenario) {
    const [a, b, pos] = args as number[];
    if (name === "add") {
      f("kv_state_add_sequence")(kv, a);
      lengths.set(a, 0);
    } else if (name === "remove") {
      f("kv_state_remove_sequence")(kv, a);
      lengths.delete(a);
    } else if (name === "fork") {
      f("kv_state_fork_sequence")(kv, a, b, pos);
      lengths.set(b, pos === -1 ? lengths.get(a)! : pos);
    } else if (name === "popn") {
      f("kv_state_popn")(kv, a, b);
      lengths.set(a, lengths.get(a)! - b);
    } else {
      const [ids, lens] = args as [number[], number[]];
      f("kv_state_begin_forward")(kv, shape(...ids), shape(...lens));
      const T = lens.reduce((x, y) => x + y, 0);
      for (let layer = 0; layer < L; layer++) {
        using qkv = tensor(take(T * (H + 2 * KH) * D), { shape: [T, H + 2 * KH, D] });
        using out = tensor(new Float32Array(T * H * D), { shape: [T, H, D] });
        f("attention_kv_cache_attention_with_fused_qkv")(kv, layer, 1 / Math.sqrt(D), qkv, out);
        compare(out.dataSync() as Float32Array, trace.outputs[output++], `output ${output}`);
      }
      f("kv_state_end_forward")(kv);
      ids.forEach((id, i) => lengths.set(id, lengths.get(id)! + lens[i]));
    }
  }
  assertEquals(output, trace.outputs.length);
  assertEquals(kv.numAvailablePages, trace.freePages);
  for (const [id, n] of lengths) {
    using k = tensor(new Float32Array(L * n * KH * D), { shape: [L, n, KH, D] });
    using v = tensor(new Float32Array(L * n * KH * D), { shape: [L, n, KH, D] });
    f("attention_kv_cache_debug_get_kv")(kv, id, 0, n, k, v);
    compare(k.dataSync() as Float32Array, trace.cached[String(id)].k, `K of ${id}`);
    compare(v.dataSync() as Float32Array, trace.cached[String(id)].v, `V of ${id}`);
  }
  return { worst, values };
}

Deno.test("paged KV cache: the reference attention matches TVM's CPU kernels on its cache", async () => {
  const trace = JSON.parse(await Deno.readTextFile(ATTENTION)) as AttentionTrace;
  const { worst, values } = replayAttention(trace);
  console.log(`${values} values of TVM ${trace.tvm}: largest difference ${worst.toExponential(2)}`);
  assert(values > 5000);
  assert(worst < 1e-5, `largest difference ${worst}`);
});

Deno.test({
  name: "paged KV cache: TVM's CPU kernels give the committed attention trace again",
  ignore: ignoreWithoutTvm("paged KV cache attention"),
  async fn() {
    const committed = JSON.parse(await Deno.readTextFile(ATTENTION)) as AttentionTrace;
    const dir = await Deno.makeTempDir({ prefix: "relaxvm-kv-attention-" });
    try {
      const out = `${dir}/attention.json`;
      const { code, stderr } = await new Deno.Command(tvmPython(), {
        args: [ATTENTION_SCRIPT, out],
        stdout: "null",
        stderr: "piped",
      }).output();
      assertEquals(code, 0, new TextDecoder().decode(stderr));
      const again = JSON.parse(await Deno.readTextFile(out)) as AttentionTrace;
      assertEquals(again.scenario, committed.scenario);
      assertEquals(again.freePages, committed.freePages);
      let worst = 0;
      again.outputs.forEach((o, i) =>
        o.forEach((x, j) => worst = Math.max(worst, Math.abs(x - committed.outputs[i][j])))
      );
      assert(worst < 1e-6, `TVM's outputs moved by ${worst}`);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
