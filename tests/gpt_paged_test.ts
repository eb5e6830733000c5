/**
 * relaxvm's GPT on the paged KV cache (models/gpt/paged_program.ts, paged_session.ts)
 * with relaxvm's own paged attention (`vm.op.paged_attention`, the CPU kernel in
 * kernels/cpu/paged_attention.ts): the logits of the dense GPT (`GPTSession`, the legacy
 * `attention_kv_cache_*`), and a batch of sequences of different lengths, prefill chunks
 * and decodes mixed in one call, giving each sequence what it gets alone.
 *
 * @module
 */

import { assert, assertEquals, assertThrows } from "@std/assert";
import { ExecBuilder, getGlobalFunc, PagedKVCache, shape, tensor, VirtualMachine } from "../mod.ts";
import { TINY } from "../models/gpt/config.ts";
import { argmax, GPTSession } from "../models/gpt/session.ts";
import { PagedGPT } from "../models/gpt/paged_session.ts";
import { buildPagedGPT } from "../models/gpt/paged_program.ts";
import { cpuKernelMode, setCpuKernelMode } from "../kernels/cpu/wasm/runtime.ts";

const executable = buildPagedGPT(TINY);

function assertClose(got: Float32Array, want: Float32Array, what: string, tol = 1e-5): void {
  assertEquals(got.length, want.length, what);
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    worst = Math.max(worst, Math.abs(got[i] - want[i]) / Math.max(1, Math.abs(want[i])));
  }
  assert(worst <= tol, `${what}: logits differ by ${worst}`);
  assertEquals(argmax(got), argmax(want), `${what}: argmax`);
}

/** Deterministic token ids of a sequence. */
const tokensOf = (seed: number, n: number) =>
  Array.from({ length: n }, (_, i) => (seed * 131 + i * 37 + 7) % TINY.vocab);

Deno.test("the paged GPT gives the dense GPT's logits through a prefill and decodes", async () => {
  const dense = await GPTSession.create(TINY);
  const paged = await PagedGPT.create(TINY, { pageSize: 4, executable });
  try {
    paged.addSequence(0);
    const prompt = tokensOf(1, 9); // 3 pages of 4
    assertClose(
      (await paged.forward([{ seqId: 0, tokens: prompt }]))[0],
      await dense.prefill(prompt),
      "prefill",
    );
    for (const t of [5, 300, 17, 42]) {
      assertClose(
        (await paged.forward([{ seqId: 0, tokens: [t] }]))[0],
        await dense.decode(t),
        `decode ${t}`,
      );
    }
    assertEquals(paged.freePages(), paged.totalPages - 4); // 13 tokens: 4 pages
    paged.removeSequence(0);
    assertEquals(paged.freePages(), paged.totalPages);
  } finally {
    dense.dispose();
    paged.dispose();
  }
});

Deno.test("a batch of sequences of different lengths gives each sequence what it gets alone", async () => {
  const lengths = [5, 11, 3, 17, 1];
  const steps: { seq: number; tokens: number[] }[][] = [
    // prefills of four sequences at once; the fourth in two chunks
    lengths.slice(0, 4).map((n, s) => ({ seq: s, tokens: tokensOf(s, s === 3 ? 6 : n) })),
    // decodes of three, the rest of the fourth's prefill, the fifth's one-token prefill
    [
      { seq: 0, tokens: [10] },
      { seq: 1, tokens: [20] },
      { seq: 3, tokens: tokensOf(3, 17).slice(6) },
      { seq: 2, tokens: [30] },
      { seq: 4, tokens: tokensOf(4, 1) },
    ],
    // batch decodes of all five, twice
    [0, 1, 2, 3, 4].map((s) => ({ seq: s, tokens: [40 + s] })),
    [4, 2, 0, 3, 1].map((s) => ({ seq: s, tokens: [90 + s] })),
  ];
  const alone = await PagedGPT.create(TINY, { pageSize: 4, executable });
  const batched = await PagedGPT.create(TINY, { pageSize: 4, executable });
  try {
    for (let s = 0; s < lengths.length; s++) {
      alone.addSequence(s);
      batched.addSequence(s);
    }
    for (const [i, step] of steps.entries()) {
      const together = await batched.forward(step.map((e) => ({ seqId: e.seq, tokens: e.tokens })));
      for (const [j, e] of step.entries()) {
        const [one] = await alone.forward([{ seqId: e.seq, tokens: e.tokens }]);
        assertClose(together[j], one, `step ${i}, sequence ${e.seq}`);
      }
      assertEquals(batched.freePages(), alone.freePages(), `step ${i}: free pages`);
    }
  } finally {
    alone.dispose();
    batched.dispose();
  }
});

/** Seeded values in [-1, 1). */
function randoms(n: number, seed: number): Float32Array {
  let x = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 31 - 1;
  });
}

for (const mode of ["typescript", "wasm"] as const) {
  Deno.test(`vm.op.paged_attention (${mode} kernels, grouped heads) is causal attention over each sequence's history`, () => {
    const H = 4, KH = 2, D = 8, group = H / KH, scale = 0.3;
    const f = (name: string) => getGlobalFunc(name)!;
    using kv = PagedKVCache.create({
      pageSize: 4,
      maxTotalSequenceLength: 64,
      numLayers: 1,
      numQoHeads: H,
      numKvHeads: KH,
      headDim: D,
    });
    // Each sequence's keys and values so far, [token][kv head][D], for the reference.
    const history: Float32Array[][][] = [[], []];
    const before = cpuKernelMode();
    setCpuKernelMode(mode);
    try {
      for (const s of [0, 1]) f("vm.builtin.kv_state_add_sequence")(kv, s);
      // A prefill of 13 and 6 tokens (the first crossing three pages), then two decodes.
      for (const [step, lengths] of [[13, 6], [1, 1], [1, 1]].entries()) {
        const T = lengths[0] + lengths[1];
        const data = randoms(T * (H + 2 * KH) * D, 17 + step);
        using qkv = tensor(data, { shape: [T, H + 2 * KH, D] });
        f("vm.builtin.kv_state_begin_forward")(kv, shape(0, 1), shape(...lengths));
        using out = f("vm.op.paged_attention")(kv, 0, scale, qkv) as ReturnType<typeof tensor>;
        f("vm.builtin.kv_state_end_forward")(kv);
        const got = out.cpuView() as Float32Array;
        let row = 0;
        for (const s of [0, 1]) {
          for (let r = 0; r < lengths[s]; r++, row++) {
            const at = (head: number) => (row * (H + 2 * KH) + head) * D;
            history[s].push(
              [0, 1].map((kh) => data.slice(at(H + kh), at(H + kh) + D)),
              // values after the keys
            );
            history[s][history[s].length - 1].push(
              ...[0, 1].map((kh) => data.slice(at(H + KH + kh), at(H + KH + kh) + D)),
            );
            for (let h = 0; h < H; h++) {
              const q = data.slice(at(h), at(h) + D), kh = Math.floor(h / group);
              const scores = history[s].map((t) =>
                q.reduce((a, x, d) => a + x * t[kh][d], 0) * scale
              );
              const max = Math.max(...scores);
              const w = scores.map((x) => Math.exp(x - max));
              const sum = w.reduce((a, b) => a + b, 0);
              for (let d = 0; d < D; d++) {
                const want = history[s].reduce((a, t, j) => a + w[j] * t[KH + kh][d], 0) / sum;
                const g = got[(row * H + h) * D + d];
                assert(
                  Math.abs(g - want) < 1e-5,
                  `step ${step} seq ${s} row ${r} head ${h}: ${g} vs ${want}`,
                );
              }
            }
          }
        }
      }
    } finally {
      setCpuKernelMode(before);
    }
  });
}

Deno.test("vm.op.paged_attention refuses a call outside a forward and a qkv of another shape, and the cache stays usable", () => {
  const f = getGlobalFunc("vm.op.paged_attention")!;
  using kv = PagedKVCache.create({
    pageSize: 4,
    maxTotalSequenceLength: 32,
    numLayers: 1,
    numQoHeads: 2,
    numKvHeads: 1,
    headDim: 4,
  });
  using qkv = tensor(new Float32Array(3 * 4 * 4), { shape: [3, 4, 4] });
  assertThrows(
    () => f(kv, 0, 0.5, qkv),
    RangeError,
    "vm.op.paged_attention: no forward in progress",
  );
  getGlobalFunc("vm.builtin.kv_state_add_sequence")!(kv, 0);
  getGlobalFunc("vm.builtin.kv_state_begin_forward")!(kv, shape(0), shape(2));
  assertThrows(() => f(kv, 0, 0.5, qkv), RangeError, "qkv has shape [3, 4, 4], not [2, 4, 4]");
  assertThrows(() => f(kv, 1, 0.5, qkv), RangeError, "layer 1 is not in 0..0");
  using ok = tensor(new Float32Array(2 * 4 * 4).fill(1), { shape: [2, 4, 4] });
  using out = f(kv, 0, 0.5, ok) as ReturnType<typeof tensor>;
  assertEquals(out.shape, [2, 2, 4]);
  assertEquals([...out.cpuView()], new Array(16).fill(1)); // values all 1: the mean is 1
  using roped = PagedKVCache.create({
    pageSize: 4,
    maxTotalSequenceLength: 32,
    numLayers: 1,
    numQoHeads: 2,
    numKvHeads: 1,
    headDim: 4,
    ropeMode: "normal",
  });
  assertThrows(() => f(roped, 0, 0.5, ok), RangeError, "applies RoPE");
});

Deno.test("a PagedKVCache made in TypeScript outlives a VM call it is passed to", async () => {
  const ib = new ExecBuilder();
  ib.function("free_pages", { num_inputs: 1 }, () => {
    ib.emit_call("vm.builtin.attention_kv_cache_get_num_available_pages", [ib.r(0)], {
      dst: ib.r(1),
    });
    ib.emit_ret(ib.r(1));
  });
  const vm = new VirtualMachine(ib.get());
  using kv = PagedKVCache.create({
    pageSize: 4,
    maxTotalSequenceLength: 28,
    numLayers: 1,
    numQoHeads: 1,
    numKvHeads: 1,
    headDim: 4,
  });
  assertEquals(await vm.invoke("free_pages", kv), 8);
  // Before, the call's frame released the cache it did not own: the pages were freed.
  assertEquals(kv.disposed, false);
  assertEquals(await vm.invoke("free_pages", kv), 8);
  vm.dispose();
});
