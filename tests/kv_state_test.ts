/**
 * The paged KV cache (builtins/kv_state/): bad arguments refused with the cache left as
 * it was and still usable; what relaxvm leaves out refused by name, at create or at
 * the call; the pages counted as the VM's memory and held to `maxMemoryBytes`; and the
 * CPU reference attention over the pages equal to dense attention computed directly,
 * through prefills, batched decodes, forks mid-page and at the end, popn and prefixes
 * three blocks deep. tests/kv_state_differential_test.ts checks the bookkeeping
 * against TVM's runtime.
 */

import { assert, assertEquals, assertRejects, assertThrows } from "@std/assert";
import {
  ExecBuilder,
  getGlobalFunc,
  type NDArray,
  PagedKVCache,
  shape,
  tensor,
  VirtualMachine,
  VMError,
} from "../mod.ts";
import { applyRope } from "../builtins/kv_state/reference_attention.ts";
import { kvCreateArgs } from "./_kv_state_args.ts";

const f = (name: string) => getGlobalFunc(`vm.builtin.${name}`)!;
const kernel = () => {
  throw new Error("not called");
};

/** TVM's 28 create arguments for a small cache; `change` replaces some (by index). */
function createArgs(change: Record<number, unknown> = {}, init?: NDArray): unknown[] {
  const args = kvCreateArgs(
    {
      maxBatchSize: 4,
      maxTotalSeqLen: 32,
      prefillChunkSize: 16,
      pageSize: 4,
      numLayers: 2,
      numQoHeads: 4,
      numKvHeads: 2,
      headDim: 8,
      ropeMode: 1, // normal
    },
    init ?? tensor([0], { shape: [], dtype: "float32" }),
    kernel,
  );
  for (const [i, v] of Object.entries(change)) args[Number(i)] = v;
  return args;
}

function create(change: Record<number, unknown> = {}): PagedKVCache {
  return f("paged_attention_kv_cache_create")(...createArgs(change)) as PagedKVCache;
}

const figures = (kv: PagedKVCache) => [kv.numAvailablePages, kv.totalSequenceLength];

Deno.test("paged KV cache: create parses TVM's arguments (pages, layout, RoPE)", () => {
  using kv = create({ 11: 0 }); // models pass PrimValue(0) for no RoPE extension factors
  const c = kv.config;
  assertEquals([c.numPages, c.numLayers, c.numQoHeads, c.numKvHeads, c.headDim], [9, 2, 4, 2, 8]);
  assertEquals([c.ropeMode, c.maxBatchSize, c.prefillChunkSize], ["normal", 4, 16]);
  assertEquals(kv.pages(1).shape, [9, 2, 2, 4, 8]);
  assertEquals(kv.nbytes, 2 * 9 * 2 * 2 * 4 * 8 * 4);
  assertEquals(f("attention_kv_cache_empty")(kv), true);
  const sizes = { pageSize: 4, maxTotalSequenceLength: 8, numLayers: 1, numQoHeads: 2 };
  assertThrows(
    () => PagedKVCache.create({ ...sizes, numKvHeads: 1, headDim: 0 }),
    RangeError,
    "PagedKVCache.create: headDim must be a positive integer, got 0",
  );
  assertThrows(
    () => PagedKVCache.create({ ...sizes, numKvHeads: 3, headDim: 2 }),
    RangeError,
    "not a multiple of numKvHeads 3",
  );
});

Deno.test("paged KV cache: bad arguments are RangeErrors, change nothing, and the cache goes on", () => {
  using kv = create();
  f("kv_state_add_sequence")(kv, 0);
  f("kv_state_begin_forward")(kv, shape(0), shape(6));
  f("kv_state_end_forward")(kv);
  const cases: [string, () => unknown, string][] = [
    ["duplicate id", () => f("kv_state_add_sequence")(kv, 0), "already in the KV cache"],
    ["unknown remove", () => f("kv_state_remove_sequence")(kv, 5), "the sequence 5 is not"],
    ["unknown popn", () => f("kv_state_popn")(kv, 5, 1), "the sequence 5 is not"],
    ["popn past the length", () => f("kv_state_popn")(kv, 0, 7), "cannot pop 7 tokens"],
    ["negative popn", () => f("kv_state_popn")(kv, 0, -1), "cannot pop -1"],
    ["fork of a missing parent", () => f("kv_state_fork_sequence")(kv, 3, 4), "parent sequence 3"],
    [
      "fork onto an existing child",
      () => f("kv_state_fork_sequence")(kv, 0, 0),
      "child sequence 0",
    ],
    ["fork past the end", () => f("kv_state_fork_sequence")(kv, 0, 1, 7), "fork_pos 7"],
    [
      "forward of an unknown sequence",
      () => f("kv_state_begin_forward")(kv, shape(0, 9), shape(1, 1)),
      "the sequence 9 is not",
    ],
    [
      "a sequence twice in a batch",
      () => f("kv_state_begin_forward")(kv, shape(0, 0), shape(1, 1)),
      "twice in the batch",
    ],
    ["a length of 0", () => f("kv_state_begin_forward")(kv, shape(0), shape(0)), "not positive"],
    [
      "beyond the prefill chunk",
      () => f("kv_state_begin_forward")(kv, shape(0), shape(17)),
      "prefill chunk size 16",
    ],
    [
      "more lengths than ids",
      () => f("kv_state_begin_forward")(kv, shape(0), shape(1, 1)),
      "1 seq_ids but 2",
    ],
  ];
  for (const [what, call, message] of cases) {
    const before = figures(kv);
    const e = assertThrows(call, RangeError, message, what);
    assert(e.message.startsWith("kv_state_"), `${what}: names the builtin: ${e.message}`);
    assertEquals(figures(kv), before, `${what} changed nothing`);
  }
  assertThrows(() => f("kv_state_add_sequence")(kv, 1.5), TypeError, "must be an integer");
  assertThrows(() => f("kv_state_add_sequence")({}, 1), TypeError, "expected a paged KV cache");
  // More sequences than the max batch size (4).
  for (const id of [1, 2, 3, 4]) f("kv_state_add_sequence")(kv, id);
  assertThrows(
    () => f("kv_state_begin_forward")(kv, shape(0, 1, 2, 3, 4), shape(1, 1, 1, 1, 1)),
    RangeError,
    "max batch size 4",
  );
  // Pages run out part-way through a batch: nothing is taken.
  f("kv_state_begin_forward")(kv, shape(1, 2), shape(8, 8)); // 4 pages; 2 + 4 of 9 used
  assertEquals(figures(kv), [3, 22]);
  assertThrows(
    () => f("kv_state_begin_forward")(kv, shape(3, 4), shape(8, 8)),
    RangeError,
    "4 new pages",
  );
  assertEquals(figures(kv), [3, 22]);
  // A fork that copies a partial page with no page free.
  f("kv_state_begin_forward")(kv, shape(3), shape(12)); // the last 3 pages
  assertEquals(kv.numAvailablePages, 0);
  assertThrows(() => f("kv_state_fork_sequence")(kv, 0, 5, 3), RangeError, "no free page");
  assertEquals(figures(kv), [0, 34]);
  // Still usable: a fork on a page boundary needs no page; removing frees pages.
  f("kv_state_fork_sequence")(kv, 0, 5, 4);
  f("kv_state_remove_sequence")(kv, 3);
  f("kv_state_begin_forward")(kv, shape(5), shape(1));
  assertEquals(figures(kv), [2, 27]);
  f("kv_state_clear")(kv);
  assertEquals(figures(kv), [9, 0]);
  assertEquals(f("attention_kv_cache_empty")(kv), true);
});

Deno.test("paged KV cache: what relaxvm leaves out is refused by name", () => {
  const refusedAtCreate: [Record<number, unknown>, string][] = [
    [{ 0: shape(4, 32, 16, 4, 1) }, "sliding window is not supported"],
    [{ 6: shape(0, 1) }, "MLA (multi-head latent attention) is not supported"],
    [{ 6: shape(2, 0) }, "linear attention is not supported"],
    [{ 6: shape(0, 3) }, "per-layer sliding window (mha_sliding) is not supported"],
    [{ 7: true }, "KV transfer (disaggregation) is not supported"],
    [{ 11: tensor([1, 2, 3, 4]) }, "RoPE extension factors is not supported"],
    [{ 1: shape(0, 1, 2) }, "pipeline parallelism is not supported"],
    [{ 5: 4 }, "a V head size other than the QK head size is not supported"],
  ];
  for (const [change, message] of refusedAtCreate) {
    assertThrows(() => create(change), RangeError, message);
  }
  assertThrows(
    () => f("paged_attention_kv_cache_create")(...createArgs(), null),
    RangeError,
    "CUDA graph capture is not supported",
  );
  assertThrows(
    () => f("paged_attention_kv_cache_create")(...createArgs().slice(0, 27)),
    TypeError,
    "expects TVM's 28 arguments, got 27",
  );
  assertThrows(() => create({ 3: 3 }), RangeError, "not a multiple of num_kv_heads 3");
  using kv = create();
  f("kv_state_add_sequence")(kv, 0);
  const refusedAtCall: [string, unknown[], string][] = [
    ["kv_state_begin_forward", [kv, shape(0), shape(2), shape(-1, 0)], "token trees"],
    ["attention_kv_cache_enable_sliding_window_for_seq", [kv, 0, 8, 0], "sliding window"],
    ["attention_kv_cache_commit_accepted_token_tree_nodes", [kv, shape(0)], "token trees"],
    ["kv_cache_disagg_prepare_recv", [kv, 0, 4], "KV transfer"],
    ["kv_cache_disagg_mark_send", [kv, 0, 0, shape(1, 0, 4), 0], "KV transfer"],
    ["attention_kv_cache_debug_get_kv_mla", [kv, 0, 0, 1, null], "MLA"],
    ["attention_kv_cache_append_mla_kv", [kv, 0, null], "MLA"],
  ];
  for (const [name, args, feature] of refusedAtCall) {
    assertThrows(() => f(name)(...args), RangeError, `${feature}`);
  }
  assertEquals(figures(kv), [9, 0]);
  // Inline RoPE is accepted at create (the bookkeeping is the same), refused at attention.
  using inline = create({ 8: 2 });
  f("kv_state_add_sequence")(inline, 0);
  f("kv_state_begin_forward")(inline, shape(0), shape(1));
  using qkv = tensor(new Float32Array(8 * 8), { shape: [1, 8, 8] });
  using out = tensor(new Float32Array(4 * 8), { shape: [1, 4, 8] });
  assertThrows(
    () => f("attention_kv_cache_attention_with_fused_qkv")(inline, 0, 1, qkv, out),
    RangeError,
    "inline RoPE",
  );
});

Deno.test("paged KV cache in a VM: its pages are the VM's memory, held to maxMemoryBytes", async () => {
  const ib = new ExecBuilder();
  ib.function("create", 28, () => {
    const args = Array.from({ length: 28 }, (_, i) => ib.r(i));
    ib.emit_call("vm.builtin.paged_attention_kv_cache_create", args, { dst: ib.r(28) });
    ib.emit_call("vm.builtin.kv_state_add_sequence", [ib.r(28), ib.imm(7)], { dst: ib.r(29) });
    ib.emit_ret(ib.r(28));
  });
  const exec = ib.get();
  const vm = new VirtualMachine(exec);
  using init = tensor([0], { shape: [], dtype: "float32" });
  const kv = await vm.invoke("create", ...createArgs({}, init)) as PagedKVCache;
  assertEquals(kv.nbytes, 9216);
  assert(vm.memory_stats().liveBytes >= kv.nbytes, "the pages are the VM's memory");
  assertEquals(f("attention_kv_cache_get_total_sequence_length")(kv), 0);
  f("kv_state_begin_forward")(kv, shape(7), shape(3));
  assertEquals(kv.totalSequenceLength, 3);
  kv.dispose();
  assertEquals(vm.memory_stats().liveBytes, 0, "disposing the cache frees its pages");
  assertThrows(() => f("kv_state_add_sequence")(kv, 1), TypeError, "released");

  const small = new VirtualMachine(exec, undefined, { maxMemoryBytes: 12000 });
  const e = await assertRejects(() => small.invoke("create", ...createArgs({}, init)), VMError);
  assertEquals(e.packedFunc, "vm.builtin.paged_attention_kv_cache_create");
  assertEquals(small.memory_stats().liveBytes, 0, "a refused create leaves nothing behind");
  const duplicate = new ExecBuilder();
  duplicate.function("main", 1, () => {
    duplicate.emit_call("vm.builtin.kv_state_add_sequence", [duplicate.r(0), duplicate.imm(0)], {
      dst: duplicate.r(1),
    });
    duplicate.emit_ret(duplicate.r(0));
  });
  using kv2 = create();
  f("kv_state_add_sequence")(kv2, 0);
  const dup = new VirtualMachine(duplicate.get());
  const err = await assertRejects(
    () => dup.invoke("main", kv2),
    VMError,
    "already in the KV cache",
  );
  assert(err.cause instanceof RangeError);
  assertEquals(figures(kv2), [9, 0]);
});

// ------------------------------------------------------------------ attention vs dense

/** A deterministic stream of numbers in [-1, 1). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 31 - 1;
  };
}

interface Dense {
  k: Float32Array[][]; // [layer][position] → [kvHeads * D]
  v: Float32Array[][];
}

/**
 * Runs a scenario on a paged cache with the reference attention and checks each
 * output against attention computed from each sequence's whole history, kept densely.
 */
function checkAgainstDense(ropeMode: "none" | "normal"): number {
  const L = 2, H = 4, KH = 2, D = 8, P = 4, theta = 500, scale = 0.5;
  using kv = PagedKVCache.create({
    pageSize: P,
    maxTotalSequenceLength: 128,
    numLayers: L,
    numQoHeads: H,
    numKvHeads: KH,
    headDim: D,
    ropeMode,
    ropeTheta: theta,
    ropeScale: scale,
  });
  const next = random(ropeMode === "none" ? 1 : 2);
  const dense = new Map<number, Dense>();
  const smScale = 1 / Math.sqrt(D);
  let checked = 0, worst = 0;
  const add = (id: number) => {
    f("kv_state_add_sequence")(kv, id);
    dense.set(id, { k: [[], []], v: [[], []] });
  };
  const fork = (parent: number, child: number, pos: number) => {
    f("kv_state_fork_sequence")(kv, parent, child, pos);
    const p = dense.get(parent)!;
    const n = pos === -1 ? p.k[0].length : pos;
    dense.set(child, { k: p.k.map((l) => l.slice(0, n)), v: p.v.map((l) => l.slice(0, n)) });
  };
  const popn = (id: number, n: number) => {
    f("kv_state_popn")(kv, id, n);
    const d = dense.get(id)!;
    for (let l = 0; l < L; l++) {
      d.k[l].length -= n;
      d.v[l].length -= n;
    }
  };
  const forward = (ids: number[], lengths: number[]) => {
    f("kv_state_begin_forward")(kv, shape(...ids), shape(...lengths));
    const T = lengths.reduce((a, b) => a + b, 0);
    for (let layer = 0; layer < L; layer++) {
      const data = new Float32Array(T * (H + 2 * KH) * D).map(() => next());
      using qkv = tensor(data, { shape: [T, H + 2 * KH, D] });
      using out = tensor(new Float32Array(T * H * D), { shape: [T, H, D] });
      f("attention_kv_cache_attention_with_fused_qkv")(kv, layer, smScale, qkv, out);
      const got = out.dataSync() as Float32Array;
      // The dense history: append this forward's K/V (rotated at their positions), then attend.
      let t = 0;
      const queries: [number, number, Float32Array][] = []; // token row, sequence id, q
      for (let i = 0; i < ids.length; i++) {
        const d = dense.get(ids[i])!;
        for (let j = 0; j < lengths[i]; j++, t++) {
          const pos = d.k[layer].length;
          const row = data.subarray(t * (H + 2 * KH) * D, (t + 1) * (H + 2 * KH) * D);
          const q = row.slice(0, H * D), k = row.slice(H * D, (H + KH) * D);
          const v = row.slice((H + KH) * D);
          if (ropeMode === "normal") {
            for (let h = 0; h < H; h++) applyRope(q, h * D, D, pos, theta, scale);
            for (let h = 0; h < KH; h++) applyRope(k, h * D, D, pos, theta, scale);
          }
          d.k[layer].push(k);
          d.v[layer].push(v);
          queries.push([t, ids[i], q]);
        }
      }
      // Each query attends to its sequence up to its own position (causal).
      const seen = new Map<number, number>();
      for (const [row, id, q] of queries) {
        const d = dense.get(id)!;
        const upto = (seen.get(id) ?? d.k[layer].length - lengths[ids.indexOf(id)]) + 1;
        seen.set(id, upto);
        for (let h = 0; h < H; h++) {
          const kh = Math.floor(h / (H / KH));
          const scores = d.k[layer].slice(0, upto).map((k) => {
            let s = 0;
            for (let x = 0; x < D; x++) s += q[h * D + x] * k[kh * D + x];
            return s * smScale;
          });
          const max = Math.max(...scores);
          const w = scores.map((s) => Math.exp(s - max));
          const sum = w.reduce((a, b) => a + b, 0);
          for (let x = 0; x < D; x++) {
            let want = 0;
            for (let p = 0; p < upto; p++) want += (w[p] / sum) * d.v[layer][p][kh * D + x];
            worst = Math.max(worst, Math.abs(got[(row * H + h) * D + x] - want));
            checked++;
          }
        }
      }
    }
    f("kv_state_end_forward")(kv);
  };
  add(0);
  add(1);
  forward([0], [7]); // a prefill crossing a page
  forward([1, 0], [5, 2]); // a batched prefill of two
  for (let s = 0; s < 3; s++) forward([0, 1], [1, 1]); // batched decodes
  fork(0, 2, 5); // mid-page: a shared block of one page, a copied partial page
  fork(1, 3, -1); // at the end, mid-page
  forward([2, 0, 3, 1], [1, 1, 1, 1]); // a decode over shared prefixes (two depths)
  forward([2], [6]); // a chunked prefill onto a forked sequence
  fork(2, 4, 10); // three blocks deep: the third depth rides on the second
  forward([4, 2, 1], [3, 1, 2]);
  forward([4, 3, 2, 1], [1, 1, 1, 1]);
  popn(0, 11); // into the prefix it shares with 2 and 4: forks first
  popn(4, 2);
  forward([0, 4, 3], [2, 1, 1]);
  f("kv_state_remove_sequence")(kv, 2);
  dense.delete(2);
  forward([4, 0], [1, 1]);
  fork(4, 5, 8); // on a page boundary
  forward([5, 4], [4, 1]);
  // debug_get_kv reads back what dense kept (K rotated as cached).
  for (const [id, d] of dense) {
    const n = d.k[0].length;
    using k = tensor(new Float32Array(L * n * KH * D), { shape: [L, n, KH, D] });
    using v = tensor(new Float32Array(L * n * KH * D), { shape: [L, n, KH, D] });
    f("attention_kv_cache_debug_get_kv")(kv, id, 0, n, k, v);
    const kd = k.dataSync() as Float32Array, vd = v.dataSync() as Float32Array;
    for (let l = 0; l < L; l++) {
      for (let p = 0; p < n; p++) {
        for (let x = 0; x < KH * D; x++) {
          const at = (l * n + p) * KH * D + x;
          worst = Math.max(
            worst,
            Math.abs(kd[at] - d.k[l][p][x]),
            Math.abs(vd[at] - d.v[l][p][x]),
          );
        }
      }
    }
  }
  assert(worst < 1e-5, `largest difference from dense attention: ${worst}`);
  return checked;
}

Deno.test("paged KV cache: reference attention over the pages equals dense attention (no RoPE)", () => {
  assert(checkAgainstDense("none") > 1000);
});

Deno.test("paged KV cache: reference attention with RoPE (mode normal) equals dense attention", () => {
  assert(checkAgainstDense("normal") > 1000);
});
