/**
 * The engine (engine/): continuous batching over relaxvm's GPT on a paged KV cache
 * (models/gpt/paged_session.ts, the tiny seeded model on the CPU), through OpenAI's API
 * as WebLLM has it. Concurrent requests give what each gives alone; a cancelled request
 * frees its pages at once; more requests than pages all complete; stop sequences,
 * max_tokens and logit_bias do what OpenAI's do.
 *
 * @module
 */

import { assert, assertEquals, assertRejects, assertThrows } from "@std/assert";
import {
  type ChatCompletionChunk,
  type CompletionRequest,
  Engine,
  type EngineModel,
  type ForwardEntry,
} from "../mod.ts";
import { TINY } from "../models/gpt/config.ts";
import { buildPagedGPT } from "../models/gpt/paged_program.ts";
import { PagedGPT, type PagedGPTOptions } from "../models/gpt/paged_session.ts";

const executable = buildPagedGPT(TINY);

async function withEngine(
  options: PagedGPTOptions,
  fn: (engine: Engine, model: PagedGPT) => Promise<void>,
): Promise<void> {
  const model = await PagedGPT.create(TINY, { executable, ...options });
  try {
    await fn(new Engine(model), model);
  } finally {
    model.dispose();
  }
}

/** `model` with `forward` replaced by `wrap(forward)`: to watch or break the engine's calls. */
function intercept(
  model: EngineModel,
  wrap: (
    forward: (e: readonly ForwardEntry[]) => Promise<Float32Array[]>,
  ) => (e: readonly ForwardEntry[]) => Promise<Float32Array[]>,
): EngineModel {
  const forward = wrap((entries) => model.forward(entries));
  return new Proxy(model, {
    get: (target, key) => {
      if (key === "forward") return forward;
      const v = Reflect.get(target, key, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

/** Requests with different prompts, lengths and sampling. */
const REQUESTS: (CompletionRequest & { stream?: false })[] = [
  { prompt: "The quick brown fox", max_tokens: 12, temperature: 0.9, seed: 7 },
  { prompt: "a", max_tokens: 20, temperature: 0 },
  { prompt: "Lorem ipsum dolor sit amet, consectetur", max_tokens: 9, top_p: 0.8, seed: 11 },
  { prompt: "0123456789", max_tokens: 15, temperature: 1.3, top_k: 20, seed: 3 },
  { prompt: "one two three four five", max_tokens: 6, temperature: 0.7, seed: 99 },
];

Deno.test("concurrent requests each give what they give alone, in fewer steps", async () => {
  await withEngine({ pageSize: 4 }, async (engine) => {
    const alone = [];
    for (const r of REQUESTS) alone.push(await engine.completions.create(r));
    const soloSteps = engine.stats().steps;
    const together = await Promise.all(REQUESTS.map((r) => engine.completions.create(r)));
    const steps = engine.stats().steps - soloSteps;
    for (let i = 0; i < REQUESTS.length; i++) {
      assertEquals(together[i].choices[0].text, alone[i].choices[0].text, `request ${i}`);
      assertEquals(together[i].choices[0].finish_reason, "length");
      assertEquals(together[i].usage, alone[i].usage);
      assertEquals(together[i].usage!.completion_tokens, REQUESTS[i].max_tokens);
    }
    // Alone: one step per generated token. Together: the longest request's count.
    assertEquals(soloSteps, REQUESTS.reduce((a, r) => a + r.max_tokens!, 0));
    assertEquals(steps, 20);
    assertEquals(engine.stats().freePages, engine.stats().totalPages);
  });
});

Deno.test("a request that joins while others decode gives what it gives alone", async () => {
  await withEngine({ pageSize: 4 }, async (engine) => {
    const late = { prompt: "joining late", max_tokens: 8, seed: 5 };
    const alone = await engine.completions.create(late);
    const first = await engine.completions.create({
      prompt: "first",
      max_tokens: 30,
      seed: 1,
      stream: true,
    });
    for (let i = 0; i < 3; i++) await first.next(); // three tokens decoded
    const stream = await engine.completions.create({ ...late, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0].text;
    assertEquals(text, alone.choices[0].text);
    let reason = null;
    for await (const chunk of first) reason = chunk.choices[0].finish_reason ?? reason;
    assertEquals(reason, "length");
  });
});

Deno.test("a long prompt is prefilled in chunks beside another request's decodes", async () => {
  await withEngine({ pageSize: 4, prefillChunkSize: 8, maxBatchSize: 4 }, async (_, model) => {
    const forwards: number[][] = [];
    const engine = new Engine(intercept(model, (forward) => (entries) => {
      forwards.push(entries.map((e) => e.tokens.length));
      return forward(entries);
    }));
    const long = { prompt: "a prompt of thirty tokens, yes.", max_tokens: 5, seed: 8 };
    const alone = await engine.completions.create(long);
    assertEquals(forwards.slice(0, 4), [[8], [8], [8], [7]]); // 31 tokens in chunks of 8
    forwards.length = 0;
    // The first request is decoding (two tokens out) when the long one comes.
    const first = await engine.completions.create({
      prompt: "decoding",
      max_tokens: 20,
      seed: 1,
      stream: true,
    });
    await first.next();
    await first.next();
    const joined = await engine.completions.create(long);
    assertEquals(joined.choices[0].text, alone.choices[0].text);
    for await (const _ of first) { /* drain */ }
    // Some forward ran one sequence's decode token beside the other's 7-token prefill chunk.
    assert(forwards.some((f) => f.length === 2 && f[0] === 1 && f[1] === 7), `${forwards}`);
  });
});

Deno.test("a failing forward fails the requests in it, and the engine goes on", async () => {
  await withEngine({ pageSize: 4 }, async (_, model) => {
    let calls = 0;
    const engine = new Engine(intercept(model, (forward) => (entries) => {
      if (++calls === 3) return Promise.reject(new Error("the device was lost"));
      return forward(entries);
    }));
    const requests = [0, 1].map((i) =>
      engine.completions.create({ prompt: `r${i}`, max_tokens: 5 })
    );
    for (const r of requests) await assertRejects(() => r, Error, "the device was lost");
    assertEquals(engine.stats().freePages, engine.stats().totalPages);
    const after = await engine.completions.create({ prompt: "again", max_tokens: 3 });
    assertEquals(after.usage!.completion_tokens, 3);
  });
});

Deno.test("a forward resolving to the wrong logits fails its requests, not the process", async () => {
  await withEngine({ pageSize: 4 }, async (_, model) => {
    let calls = 0;
    const engine = new Engine(intercept(model, (forward) => async (entries) => {
      const logits = await forward(entries);
      return ++calls === 2 ? logits.slice(1) : logits;
    }));
    const requests = [0, 1].map((i) =>
      engine.completions.create({ prompt: `r${i}`, max_tokens: 5 })
    );
    for (const r of requests) {
      await assertRejects(
        () => r,
        TypeError,
        "must resolve to as many Float32Arrays of 512 logits",
      );
    }
    assertEquals(engine.stats().freePages, engine.stats().totalPages);
    assertEquals(
      (await engine.completions.create({ prompt: "b", max_tokens: 2 })).usage!.completion_tokens,
      2,
    );
  });
});

Deno.test("cancelling a stream frees its pages at once, and the others go on", async () => {
  await withEngine({ pageSize: 4 }, async (engine) => {
    const other = engine.chat.completions.create({
      messages: [{ role: "user", content: "keep going" }],
      max_tokens: 25,
      seed: 2,
    });
    const controller = new AbortController();
    const stream = await engine.chat.completions.create({
      messages: [{ role: "user", content: "a long prompt that takes some pages" }],
      max_tokens: 100,
      stream: true,
      seed: 4,
      signal: controller.signal,
    });
    const before = engine.stats();
    let chunks = 0;
    for (; chunks < 3; chunks++) await stream.next();
    const during = engine.stats().freePages;
    assert(during < before.totalPages - 9, `the stream holds pages (${during} free)`);
    // A waiting request is cancelled too.
    const waitingController = new AbortController();
    const waiting = engine.completions.create({
      prompt: "never runs",
      signal: waitingController.signal,
    });
    waitingController.abort();
    await assertRejects(() => waiting, DOMException);
    // At once: before any further step, the pages of its 35-token prompt (9 of 4) are free.
    const free = engine.stats().freePages;
    controller.abort();
    assert(engine.stats().freePages - free >= 9, `${engine.stats().freePages - free} freed`);
    await assertRejects(() => stream.next(), DOMException);
    const done = await other;
    assertEquals(done.choices[0].finish_reason, "length");
    assertEquals(done.usage.completion_tokens, 25);
    assertEquals(engine.stats().freePages, before.totalPages);
    assertEquals(engine.stats().running, 0);
  });
});

Deno.test("a request cancelled during a forward it is not in leaves right after that forward", async () => {
  await withEngine({ pageSize: 4, prefillChunkSize: 8, maxBatchSize: 4 }, async (_, model) => {
    const controller = new AbortController();
    let forwards = 0;
    const engine = new Engine(intercept(model, (forward) => (entries) => {
      // The first forward is the long prompt's first chunk: the budget leaves none for the
      // second request, which is running (admitted) but not in this forward.
      if (++forwards === 1) controller.abort();
      return forward(entries);
    }));
    const long = engine.completions.create({ prompt: "x".repeat(31), max_tokens: 2 });
    let leftAfter = -1;
    const cancelled = engine.completions.create({
      prompt: "y".repeat(20),
      max_tokens: 2,
      signal: controller.signal,
    }).catch((e) => {
      leftAfter = forwards;
      return e;
    });
    assert((await cancelled) instanceof DOMException);
    assertEquals(leftAfter, 1);
    await long;
    assertEquals(engine.stats().freePages, engine.stats().totalPages);
  });
});

Deno.test("breaking out of a stream cancels the request and frees its pages", async () => {
  await withEngine({ pageSize: 4 }, async (engine) => {
    const stream = await engine.completions.create({
      prompt: "stop reading me",
      max_tokens: 60,
      stream: true,
    });
    let n = 0;
    for await (const _ of stream) if (++n === 2) break;
    assertEquals(engine.stats().freePages, engine.stats().totalPages);
  });
});

Deno.test("more requests than the cache's pages all complete, by queueing and preemption", async () => {
  // 11 pages of 4 tokens: each request needs 7 pages by its end, so at most one fits whole.
  await withEngine({ pageSize: 4, maxTotalSequenceLength: 40, maxBatchSize: 4 }, async (engine) => {
    assertEquals(engine.stats().totalPages, 11);
    const requests = Array.from({ length: 6 }, (_, i) => ({
      prompt: `request ${i}:`,
      max_tokens: 16,
      temperature: 0.8,
      seed: 100 + i,
    }));
    const alone = [];
    for (const r of requests) alone.push(await engine.completions.create(r));
    const together = await Promise.all(requests.map((r) => engine.completions.create(r)));
    for (let i = 0; i < requests.length; i++) {
      assertEquals(together[i].choices[0].text, alone[i].choices[0].text, `request ${i}`);
      assertEquals(together[i].usage!.completion_tokens, 16);
    }
    const stats = engine.stats();
    assert(stats.preemptions > 0, "some request was preempted and recomputed");
    assertEquals(stats.freePages, 11);
    assertEquals(stats.waiting + stats.running, 0);
    // A prompt longer than a sequence can hold is refused up front, naming the sizes.
    await assertRejects(
      () => engine.completions.create({ prompt: "x".repeat(45) }),
      RangeError,
      "the prompt's 45 tokens exceed the 44",
    );
  });
});

Deno.test("a stop sequence ends the text before it, streamed or not", async () => {
  await withEngine({ pageSize: 8 }, async (engine) => {
    const base = { prompt: "Once upon a time", max_tokens: 40, temperature: 0 };
    const full = (await engine.completions.create(base)).choices[0].text;
    const printable = [...full].findIndex((c, i) =>
      i >= 4 && /[ -~]/.test(c) && /[ -~]/.test(full[i + 1] ?? "")
    );
    assert(printable > 0, `some printable pair in ${JSON.stringify(full)}`);
    const stop = full.slice(printable, printable + 2);
    const want = full.slice(0, full.indexOf(stop));
    const stopped = await engine.completions.create({ ...base, stop: [stop, "never"] });
    assertEquals(stopped.choices[0].text, want);
    assertEquals(stopped.choices[0].finish_reason, "stop");
    const stream = await engine.completions.create({ ...base, stop, stream: true });
    let text = "", reason = null;
    for await (const c of stream) {
      text += c.choices[0].text;
      reason = c.choices[0].finish_reason ?? reason;
    }
    assertEquals(text, want);
    assertEquals(reason, "stop");
  });
});

Deno.test("max_tokens and logit_bias: the count, a forced token and a banned one", async () => {
  await withEngine({ pageSize: 8 }, async (engine) => {
    const forced = await engine.chat.completions.create({
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 7,
      temperature: 1,
      seed: 1,
      logit_bias: { "97": 100, "98": 100 }, // "a" and "b"
    });
    const content = forced.choices[0].message.content;
    assertEquals(content.length, 7);
    assert(/^[ab]+$/.test(content), content);
    assertEquals(forced.choices[0].finish_reason, "length");
    assertEquals(forced.usage.completion_tokens, 7);
    const banned = await engine.chat.completions.create({
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 7,
      temperature: 1,
      seed: 1,
      logit_bias: { "97": -100, "98": 100 },
    });
    assertEquals(banned.choices[0].message.content, "bbbbbbb");
  });
});

Deno.test("a streamed chat is OpenAI's chunks, with the whole completion's content and usage", async () => {
  await withEngine({ pageSize: 8 }, async (engine) => {
    const request = {
      messages: [{ role: "system" as const, content: "Be brief. " }, {
        role: "user" as const,
        content: "Hello",
      }],
      max_tokens: 10,
      seed: 42,
    };
    const whole = await engine.chat.completions.create(request);
    assertEquals(whole.object, "chat.completion");
    assertEquals(whole.model, "relaxvm-gpt-tiny");
    assertEquals(whole.usage.prompt_tokens, "Be brief. Hello".length); // concatenation
    const chunks: ChatCompletionChunk[] = [];
    const stream = await engine.chat.completions.create({
      ...request,
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const c of stream) chunks.push(c);
    assert(chunks.every((c) => c.object === "chat.completion.chunk" && c.id === chunks[0].id));
    assertEquals(chunks[0].choices[0].delta.role, "assistant");
    const content = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    assertEquals(content, whole.choices[0].message.content);
    assertEquals(chunks.at(-2)!.choices[0].finish_reason, "length");
    assertEquals(chunks.at(-1)!.choices, []);
    assertEquals(chunks.at(-1)!.usage, whole.usage);
  });
});

Deno.test("bad requests are refused with errors naming the field, and the engine goes on", async () => {
  await withEngine({ pageSize: 8 }, async (engine) => {
    const ok = { prompt: "x", max_tokens: 2 };
    await assertRejects(
      () => engine.completions.create({ ...ok, n: 2 }),
      RangeError,
      "n must be 1",
    );
    await assertRejects(
      () => engine.completions.create({ ...ok, temperature: -1 }),
      RangeError,
      "temperature",
    );
    await assertRejects(
      () => engine.completions.create({ ...ok, logit_bias: { "9999": 1 } }),
      RangeError,
      "logit_bias names token 9999",
    );
    await assertRejects(
      () => engine.completions.create({ ...ok, prompt: "" }),
      RangeError,
      "no tokens",
    );
    await assertRejects(
      () => engine.chat.completions.create({ messages: [] }),
      TypeError,
      "messages must be a non-empty array",
    );
    const model = engine.model;
    assertThrows(
      () => new Engine({ ...model, freePages: () => model.freePages(), prefillChunkSize: 2 }),
      RangeError,
      "prefillChunkSize 2 is below its maxBatchSize 16",
    );
    assertEquals((await engine.completions.create(ok)).usage!.completion_tokens, 2);
  });
});
