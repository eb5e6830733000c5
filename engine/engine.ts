/**
 * `Engine`: serves an `EngineModel` to many requests at once, with WebLLM's (and
 * OpenAI's) API: `engine.chat.completions.create({ messages, stream, … })` and
 * `engine.completions.create({ prompt, … })`. Requests run together by continuous
 * batching (scheduler.ts); each samples with its own settings and seed, so its tokens
 * are those it gets alone.
 *
 * @module
 */

import type { EngineModel } from "./model.ts";
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionRequest,
  Completion,
  CompletionRequest,
  FinishReason,
  GenerationRequest,
} from "./openai_types.ts";
import { checkSampling } from "./sampler.ts";
import { Job, type JobSink, Scheduler, type SchedulerStats } from "./scheduler.ts";
import { TextStream } from "./text_stream.ts";

/** An async queue the scheduler fills and a `for await` drains. */
class Channel<T> implements AsyncIterableIterator<T> {
  readonly #items: T[] = [];
  #closed = false;
  #error: { error: unknown } | null = null;
  #waiter: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void } | null = null;
  readonly #onReturn: () => void;

  constructor(onReturn: () => void) {
    this.#onReturn = onReturn;
  }

  push(item: T): void {
    if (this.#closed) return;
    if (this.#waiter !== null) {
      const w = this.#waiter;
      this.#waiter = null;
      w.resolve({ value: item, done: false });
    } else this.#items.push(item);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#waiter?.resolve({ value: undefined, done: true });
    this.#waiter = null;
  }

  fail(error: unknown): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#error = { error };
    this.#waiter?.reject(error);
    this.#waiter = null;
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#items.length > 0) {
      return Promise.resolve({ value: this.#items.shift()!, done: false });
    }
    if (this.#error !== null) return Promise.reject(this.#error.error);
    if (this.#closed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => (this.#waiter = { resolve, reject }));
  }

  /** The consumer stopped reading (`break`): the request is cancelled. */
  return(): Promise<IteratorResult<T>> {
    if (!this.#closed) this.#onReturn();
    this.#closed = true;
    this.#items.length = 0;
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }
}

interface Prepared {
  job: Job;
  id: string;
  created: number;
  model: string;
  /** Sets the job's sink and submits it, listening to the request's signal. */
  start(sink: JobSink): void;
}

/**
 * Serves one model to many requests at once (continuous batching over its paged KV
 * cache), with OpenAI's API as WebLLM has it.
 *
 * @example Two requests at once
 * ```ts
 * import { Engine, type EngineModel } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * // A toy model: a cache of pages in name only, logits that always favor id (last + 1).
 * const lengths = new Map<number, number>();
 * const model: EngineModel = {
 *   name: "counter", vocabSize: 128, maxSequenceLength: 64, pageSize: 16, totalPages: 8,
 *   maxBatchSize: 4, prefillChunkSize: 64,
 *   tokenizer: {
 *     encode: (text) => [...text].map((c) => c.charCodeAt(0)),
 *     decode: (ids) => String.fromCharCode(...ids),
 *   },
 *   chatTemplate: (messages) => messages.map((m) => m.content).join(""),
 *   freePages: () => 8 - [...lengths.values()].reduce((a, n) => a + Math.ceil(n / 16), 0),
 *   addSequence: (id) => void lengths.set(id, 0),
 *   removeSequence: (id) => void lengths.delete(id),
 *   forward: (entries) => Promise.resolve(entries.map(({ seqId, tokens }) => {
 *     lengths.set(seqId, lengths.get(seqId)! + tokens.length);
 *     const logits = new Float32Array(128);
 *     logits[(tokens[tokens.length - 1] + 1) % 128] = 1;
 *     return logits;
 *   })),
 * };
 * const engine = new Engine(model);
 * const [a, b] = await Promise.all([
 *   engine.completions.create({ prompt: "a", max_tokens: 3, temperature: 0 }),
 *   engine.chat.completions.create({ messages: [{ role: "user", content: "k" }], max_tokens: 4,
 *     temperature: 0 }),
 * ]);
 * assertEquals(a.choices[0].text, "bcd");
 * assertEquals(b.choices[0].message.content, "lmno");
 * assertEquals(engine.stats().freePages, 8);
 * ```
 */
export class Engine {
  /** The model served. */
  readonly model: EngineModel;
  /** `chat.completions.create(request)`: a chat turn, whole or streamed. */
  readonly chat: {
    completions: {
      create(request: ChatCompletionRequest & { stream: true }): Promise<
        AsyncIterableIterator<ChatCompletionChunk>
      >;
      create(request: ChatCompletionRequest & { stream?: false | null }): Promise<ChatCompletion>;
      create(
        request: ChatCompletionRequest,
      ): Promise<ChatCompletion | AsyncIterableIterator<ChatCompletionChunk>>;
    };
  };
  /** `completions.create(request)`: a continuation of a prompt, whole or streamed. */
  readonly completions: {
    create(
      request: CompletionRequest & { stream: true },
    ): Promise<AsyncIterableIterator<Completion>>;
    create(request: CompletionRequest & { stream?: false | null }): Promise<Completion>;
    create(request: CompletionRequest): Promise<Completion | AsyncIterableIterator<Completion>>;
  };
  readonly #scheduler: Scheduler;

  /** An engine serving `model` (its cache should hold no sequence). */
  constructor(model: EngineModel) {
    this.model = model;
    this.#scheduler = new Scheduler(model);
    // deno-lint-ignore no-explicit-any
    const chat = (r: ChatCompletionRequest) => this.#chat(r) as any;
    // deno-lint-ignore no-explicit-any
    const complete = (r: CompletionRequest) => this.#complete(r) as any;
    this.chat = { completions: { create: chat } };
    this.completions = { create: complete };
  }

  /** The scheduler's counts: free pages, waiting and running requests, preemptions. */
  stats(): SchedulerStats {
    return this.#scheduler.stats();
  }

  #chat(r: ChatCompletionRequest): Promise<unknown> {
    const who = "chat.completions.create";
    try {
      if (!Array.isArray(r?.messages) || r.messages.length === 0) {
        throw new TypeError(`${who}: messages must be a non-empty array`);
      }
      for (const [i, m] of r.messages.entries()) {
        if (!["system", "user", "assistant"].includes(m?.role) || typeof m.content !== "string") {
          throw new TypeError(
            `${who}: messages[${i}] must have a role (system, user, assistant) and a string content`,
          );
        }
      }
      const p = this.#prepare(who, r, this.model.chatTemplate(r.messages), "chatcmpl");
      const chunk = (
        delta: ChatCompletionChunk["choices"][0]["delta"],
        finish: FinishReason | null,
      ): ChatCompletionChunk => ({
        id: p.id,
        object: "chat.completion.chunk",
        created: p.created,
        model: p.model,
        choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
      });
      if (r.stream) {
        const channel = new Channel<ChatCompletionChunk>(() => this.#cancelled(p.job));
        let first = true;
        p.start({
          text: (content) => {
            channel.push(chunk(first ? { role: "assistant", content } : { content }, null));
            first = false;
          },
          finish: (reason, prompt, completion) => {
            channel.push(chunk(first ? { role: "assistant" } : {}, reason));
            if (r.stream_options?.include_usage) {
              channel.push({ ...chunk({}, null), choices: [], usage: usage(prompt, completion) });
            }
            channel.close();
          },
          fail: (e) => channel.fail(e),
        });
        return Promise.resolve(channel);
      }
      return new Promise<ChatCompletion>((resolve, reject) => {
        let content = "";
        p.start({
          text: (t) => (content += t),
          finish: (reason, prompt, completion) =>
            resolve({
              id: p.id,
              object: "chat.completion",
              created: p.created,
              model: p.model,
              choices: [{
                index: 0,
                message: { role: "assistant", content },
                finish_reason: reason,
                logprobs: null,
              }],
              usage: usage(prompt, completion),
            }),
          fail: reject,
        });
      });
    } catch (e) {
      return Promise.reject(e);
    }
  }

  #complete(r: CompletionRequest): Promise<unknown> {
    const who = "completions.create";
    try {
      if (typeof r?.prompt !== "string") throw new TypeError(`${who}: prompt must be a string`);
      const p = this.#prepare(who, r, r.prompt, "cmpl");
      const piece = (text: string, finish: FinishReason | null): Completion => ({
        id: p.id,
        object: "text_completion",
        created: p.created,
        model: p.model,
        choices: [{ index: 0, text, finish_reason: finish, logprobs: null }],
      });
      if (r.stream) {
        const channel = new Channel<Completion>(() => this.#cancelled(p.job));
        p.start({
          text: (t) => channel.push(piece(t, null)),
          finish: (reason, prompt, completion) => {
            channel.push(piece("", reason));
            if (r.stream_options?.include_usage) {
              channel.push({ ...piece("", null), choices: [], usage: usage(prompt, completion) });
            }
            channel.close();
          },
          fail: (e) => channel.fail(e),
        });
        return Promise.resolve(channel);
      }
      return new Promise<Completion>((resolve, reject) => {
        let text = "";
        p.start({
          text: (t) => (text += t),
          finish: (reason, prompt, completion) =>
            resolve({ ...piece(text, reason), usage: usage(prompt, completion) }),
          fail: reject,
        });
      });
    } catch (e) {
      return Promise.reject(e);
    }
  }

  #cancelled(job: Job): void {
    this.#scheduler.cancel(job, new DOMException("The request was cancelled", "AbortError"));
  }

  /** Checks the request's fields and makes its job (`TypeError` / `RangeError` naming them). */
  #prepare(who: string, r: GenerationRequest, prompt: string, kind: string): Prepared {
    const m = this.model;
    if (r.n !== undefined && r.n !== null && r.n !== 1) {
      throw new RangeError(`${who}: n must be 1 (one choice per request), got ${r.n}`);
    }
    const stops = r.stop === undefined || r.stop === null
      ? []
      : typeof r.stop === "string"
      ? [r.stop]
      : r.stop;
    if (!Array.isArray(stops) || stops.length > 4 || stops.some((s) => typeof s !== "string")) {
      throw new TypeError(`${who}: stop must be a string or up to 4 strings`);
    }
    const maxTokens = r.max_tokens ?? Infinity;
    if (maxTokens !== Infinity && (!Number.isSafeInteger(maxTokens) || maxTokens < 1)) {
      throw new RangeError(`${who}: max_tokens must be a positive integer, got ${r.max_tokens}`);
    }
    const sampling = checkSampling(
      {
        temperature: r.temperature ?? undefined,
        topP: r.top_p ?? undefined,
        topK: r.top_k ?? undefined,
        seed: r.seed ?? undefined,
        logitBias: r.logit_bias ?? undefined,
      },
      m.vocabSize,
      who,
    );
    const ids = m.tokenizer.encode(prompt);
    if (ids.length === 0) throw new RangeError(`${who}: the prompt has no tokens`);
    const capacity = this.#scheduler.capacity;
    if (ids.length > capacity) {
      throw new RangeError(
        `${who}: the prompt's ${ids.length} tokens exceed the ${capacity} a sequence of ${m.name} can hold`,
      );
    }
    if (r.signal?.aborted) throw r.signal.reason;
    let sink: JobSink | null = null;
    const signal = r.signal;
    const onAbort = () => this.#scheduler.cancel(job, signal!.reason);
    const forward: JobSink = {
      text: (t) => sink!.text(t),
      finish: (reason, a, b) => {
        signal?.removeEventListener("abort", onAbort);
        sink!.finish(reason, a, b);
      },
      fail: (e) => {
        signal?.removeEventListener("abort", onAbort);
        sink!.fail(e);
      },
    };
    const job = new Job(ids, sampling, maxTokens, new TextStream(m.tokenizer, stops), forward);
    return {
      job,
      id: `${kind}-${crypto.randomUUID()}`,
      created: Math.floor(Date.now() / 1000),
      model: m.name,
      start: (s) => {
        sink = s;
        signal?.addEventListener("abort", onAbort, { once: true });
        this.#scheduler.submit(job);
      },
    };
  }
}

function usage(prompt: number, completion: number) {
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
  };
}
