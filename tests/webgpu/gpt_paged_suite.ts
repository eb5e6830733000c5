// relaxvm's GPT on a paged KV cache with its pages on WebGPU (the pagedAttention kernel of
// kernels/webgpu/paged_attention.ts): a batch of sequences of different lengths, prefill
// chunks beside decodes, gives the CPU's logits, and each sequence what it gets alone.
import { assert, assertEquals } from "@std/assert";
import { cpu, Engine } from "../../mod.ts";
import { TINY } from "../../models/gpt/config.ts";
import { argmax } from "../../models/gpt/session.ts";
import { PagedGPT } from "../../models/gpt/paged_session.ts";
import { gpuTest } from "./suite_registry.ts";

function assertClose(got: Float32Array, want: Float32Array, what: string): void {
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    worst = Math.max(worst, Math.abs(got[i] - want[i]) / Math.max(1, Math.abs(want[i])));
  }
  assert(worst <= 1e-4, `${what}: logits differ by ${worst}`);
  assertEquals(argmax(got), argmax(want), `${what}: argmax`);
}

const tokensOf = (seed: number, n: number) =>
  Array.from({ length: n }, (_, i) => (seed * 131 + i * 37 + 7) % TINY.vocab);

gpuTest(
  "paged GPT on WebGPU: a batch of sequences gives the CPU's logits and each its own alone",
  async (gpu) => {
    const steps = [
      [{ seq: 0, tokens: tokensOf(0, 5) }, { seq: 1, tokens: tokensOf(1, 11) }, {
        seq: 2,
        tokens: tokensOf(2, 6),
      }],
      [{ seq: 0, tokens: [10] }, { seq: 2, tokens: tokensOf(2, 17).slice(6) }, {
        seq: 1,
        tokens: [20],
      }],
      [0, 1, 2].map((s) => ({ seq: s, tokens: [40 + s] })),
      [2, 0, 1].map((s) => ({ seq: s, tokens: [90 + s] })),
    ];
    const onGpu = await PagedGPT.create(TINY, { pageSize: 4, device: gpu });
    const alone = await PagedGPT.create(TINY, { pageSize: 4, device: gpu });
    const onCpu = await PagedGPT.create(TINY, { pageSize: 4, device: cpu() });
    try {
      for (const s of [0, 1, 2]) for (const m of [onGpu, alone, onCpu]) m.addSequence(s);
      for (const [i, step] of steps.entries()) {
        const entries = step.map((e) => ({ seqId: e.seq, tokens: e.tokens }));
        const got = await onGpu.forward(entries);
        const want = await onCpu.forward(entries);
        for (const [j, e] of entries.entries()) {
          assertClose(got[j], want[j], `step ${i}, sequence ${e.seqId}: WebGPU vs CPU`);
          const [one] = await alone.forward([e]);
          assertClose(got[j], one, `step ${i}, sequence ${e.seqId}: batched vs alone`);
        }
        assertEquals(onGpu.freePages(), onCpu.freePages());
      }
    } finally {
      onGpu.dispose();
      alone.dispose();
      onCpu.dispose();
    }
  },
);

gpuTest(
  "engine on WebGPU: concurrent requests give what they give alone, pages all free after",
  async (gpu) => {
    const model = await PagedGPT.create(TINY, { pageSize: 4, device: gpu });
    try {
      const engine = new Engine(model);
      const requests = [
        { prompt: "first request", max_tokens: 6, seed: 1 },
        { prompt: "2", max_tokens: 9, temperature: 0 },
        { prompt: "a third, longer prompt than the others", max_tokens: 4, top_k: 5, seed: 3 },
      ];
      const alone = [];
      for (const r of requests) alone.push((await engine.completions.create(r)).choices[0].text);
      const together = await Promise.all(requests.map((r) => engine.completions.create(r)));
      assertEquals(together.map((c) => c.choices[0].text), alone);
      assertEquals(engine.stats().freePages, engine.stats().totalPages);
    } finally {
      model.dispose();
    }
  },
);
