/**
 * all-MiniLM-L6-v2 (models/minilm) on the CPU with its real weights: the
 * shared reference check (`_minilm_checks.ts`), the tokenizer's ids against
 * sentence-transformers' for every reference sentence, padding, and bad
 * input. The WebGPU run is `webgpu/minilm_suite.ts`. Ignored with a message
 * when the weights are absent, failing instead when `RELAXVM_REQUIRE_WEIGHTS=1`.
 *
 * @module
 */

import { assertEquals, assertMatch, assertRejects } from "@std/assert";
import { cpu, tensor } from "../mod.ts";
import { MINILM_L6 } from "../models/minilm/config.ts";
import { MiniLMSession } from "../models/minilm/session.ts";
import {
  assertEmbeddings,
  defineMiniLMTests,
  ignoreWithoutWeights,
  MINILM_DIR,
  readReference,
  requireWeights,
} from "./_minilm_checks.ts";

const ignore = ignoreWithoutWeights();
const register = (name: string, fn: () => Promise<void>) => Deno.test({ name, ignore, fn });

defineMiniLMTests("cpu", () => Promise.resolve(cpu()), register);

register(
  "cpu: minilm's tokenizer gives sentence-transformers' ids for all 220 sentences",
  async () => {
    requireWeights();
    const ref = await readReference();
    const session = await MiniLMSession.create(MINILM_DIR, { device: cpu() });
    try {
      ref.sentences.forEach((s, i) => {
        assertEquals(
          session.tokenize(s),
          ref.ids[i],
          `sentence ${i} ${JSON.stringify(s.slice(0, 60))}`,
        );
      });
      // What the set covers: truncation, empty text, special tokens written in the text.
      assertEquals(Math.max(...ref.ids.map((t) => t.length)), MINILM_L6.maxTokens);
      assertEquals(session.tokenize(""), [session.tokenizer.cls, session.tokenizer.sep]);
    } finally {
      session.dispose();
    }
  },
);

register(
  "cpu: minilm gives a sentence the same embedding alone and padded in a batch",
  async () => {
    requireWeights();
    const ref = await readReference();
    const session = await MiniLMSession.create(MINILM_DIR, { device: cpu() });
    try {
      // Short sentences next to a longer one: they are padded, and the mask must hide it.
      const picks = [13, 0, 30, 59, 120].map((i) => ref.ids[i]);
      const batched = await session.embedBatch(picks);
      for (let i = 0; i < picks.length; i++) {
        const [alone] = await session.embedBatch([picks[i]]);
        const worst = alone.reduce((m, v, j) => Math.max(m, Math.abs(v - batched[i][j])), 0);
        if (worst > 1e-6) throw new Error(`row ${i}: padded and alone differ by ${worst}`);
      }
      assertEmbeddings(batched, [13, 0, 30, 59, 120].map((i) => ref.embeddings[i]), ref.sentences);
    } finally {
      session.dispose();
    }
  },
);

register(
  "cpu: minilm rejects a mask of another shape and ids out of the vocabulary, and stays usable",
  async () => {
    requireWeights();
    const session = await MiniLMSession.create(MINILM_DIR, { device: cpu() });
    try {
      const params = await session.vm.invoke("load_params", MINILM_DIR.href, 1, 0);
      using ids = tensor(new Int32Array([101, 7592, 102]), { shape: [1, 3], dtype: "int32" });
      using shortMask = tensor(new Int32Array([1, 1]), { shape: [1, 2], dtype: "int32" });
      await assertRejects(
        () => session.vm.invoke("embed", ids, shortMask, params),
        Error,
        "embed: mask",
      );
      using bad = tensor(new Int32Array([101, MINILM_L6.vocab, 102]), {
        shape: [1, 3],
        dtype: "int32",
      });
      using mask = tensor(new Int32Array([1, 1, 1]), { shape: [1, 3], dtype: "int32" });
      await assertRejects(() => session.vm.invoke("embed", bad, mask, params), Error, "vm.op.take");
      await assertRejects(
        () => session.embedBatch([new Array(MINILM_L6.maxPositions + 1).fill(1000)]),
        RangeError,
        "longer than the 512 positions",
      );
      const [again] = await session.embed(["Hello!"]);
      const ref = await readReference();
      assertEmbeddings([again], [ref.embeddings[13]], [ref.sentences[13]]);
      for (const p of params as { dispose(): void }[]) p.dispose();
    } finally {
      session.dispose();
    }
  },
);

register("examples/semantic_search.ts ranks the corpus for each query", async () => {
  requireWeights();
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      "--allow-read=.weights",
      "examples/semantic_search.ts",
      "--device",
      "cpu",
    ],
    cwd: new URL("../", import.meta.url),
    stdout: "piped",
    stderr: "piped",
  }).output();
  const out = new TextDecoder().decode(stdout);
  assertEquals(code, 0, new TextDecoder().decode(stderr));
  // The first hit of each default query: the sentence a person would pick.
  const first = (query: string) => {
    const lines = out.split("\n");
    return lines[lines.indexOf(`query: ${query}`) + 1].replace(/^\s+\d\.\d{3}\s+/, "");
  };
  assertEquals(
    first("How do I make bread?").includes("flour") ||
      first("How do I make bread?").includes("dough"),
    true,
  );
  assertEquals(first("Someone is playing a musical instrument."), "A woman is playing violin.");
  assertEquals(
    first("What is the weather going to be like?"),
    "It will rain tomorrow afternoon, so take an umbrella.",
  );
  assertEquals(
    first("I forgot my login."),
    "To reset your password, click 'Forgot password' on the sign-in page.",
  );
  assertEquals(
    first("news about space exploration"),
    "The spacecraft entered orbit around Mars after a seven-month journey.",
  );
});

register(
  "examples/semantic_search.ts --corpus ranks your own sentences, from a file or stdin",
  async () => {
    requireWeights();
    const corpus =
      "The cat sleeps on the sofa.\nInterest rates went up again.\n\nA recipe for sourdough bread.\n";
    const file = await Deno.makeTempFile({ suffix: ".txt" });
    try {
      await Deno.writeTextFile(file, corpus);
      for (const [from, stdin] of [[file, ""], ["-", corpus]]) {
        const child = new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "--no-prompt",
            `--allow-read=.weights,${file}`,
            "examples/semantic_search.ts",
            "--device",
            "cpu",
            "--top",
            "1",
            "--corpus",
            from,
            "How do I bake bread?",
            "monetary policy",
          ],
          cwd: new URL("../", import.meta.url),
          stdin: "piped",
          stdout: "piped",
          stderr: "piped",
        }).spawn();
        const writer = child.stdin.getWriter();
        await writer.write(new TextEncoder().encode(stdin));
        await writer.close();
        const { code, stdout, stderr } = await child.output();
        const out = new TextDecoder().decode(stdout);
        assertEquals(code, 0, new TextDecoder().decode(stderr));
        assertMatch(out, /3 sentences embedded/);
        assertMatch(
          out,
          /query: How do I bake bread\?\n +0\.\d{3} +A recipe for sourdough bread\./,
        );
        assertMatch(out, /query: monetary policy\n +0\.\d{3} +Interest rates went up again\./);
      }
    } finally {
      await Deno.remove(file);
    }
  },
);
