/**
 * Continuous batching: the loop that runs every request's sequence through the model,
 * one forward per step, requests joining and leaving between steps.
 *
 * ```text
 * each step
 *   admit     waiting requests in order, while a batch slot is free and the prompt's
 *             pages fit beside a page of headroom per running sequence
 *   plan      every decoding sequence one token; then prefilling sequences, in order,
 *             chunks of what is left of the prefill chunk size (a prompt longer than
 *             it is prefilled over several steps, beside the decodes)
 *   pages     while the batch needs more new pages than are free: preempt the request
 *             admitted last (its sequence is removed, its pages free; it waits at the
 *             head of the queue and later prefills its prompt and what it generated
 *             again: recompute, the same tokens, its sampler's state kept)
 *   forward   one model call for the batch
 *   sample    each sequence whose tokens are all in the cache picks its next token
 *   leave     a finished or cancelled request's sequence is removed: its pages free
 * ```
 *
 * A cancelled request leaves at once (between steps), or right after the forward in
 * flight (removing a sequence mid-forward would change the cache's plan under it). A failing forward fails the requests in its batch and the engine goes on.
 *
 * @module
 */

import type { EngineModel } from "./model.ts";
import type { FinishReason } from "./openai_types.ts";
import { type checkSampling, sampleToken, seededUniform } from "./sampler.ts";
import type { TextStream } from "./text_stream.ts";

/**
 * How long the loop may go on yielding by messages alone before it yields to a timer,
 * in milliseconds: the bound on how long network I/O waits while steps run.
 */
export const IO_YIELD_MS = 25;

let lastTimerYield = 0;

/**
 * Resolves in a task of its own, after the tasks already queued, so that timers and
 * abort events run before the next step. Mostly a message to a fresh channel (about
 * 0.02 ms; `setTimeout(0)` costs about 2 ms a step in Deno, nested timers being
 * clamped). But a message does not let Deno poll its sockets: while messages keep
 * coming, an HTTP server on the same thread accepted a connection only after some 30
 * steps of 10 ms (`tests/serve_test.ts`' event loop test). So once `IO_YIELD_MS` have
 * passed since the last time, the loop yields to a timer, after which I/O runs too. The
 * channel is closed at once, so it never keeps the process alive.
 */
function nextTask(): Promise<void> {
  const now = performance.now();
  if (now - lastTimerYield >= IO_YIELD_MS) {
    return new Promise((resolve) =>
      setTimeout(() => {
        lastTimerYield = performance.now();
        resolve();
      }, 0)
    );
  }
  return new Promise((resolve) => {
    const { port1, port2 } = new MessageChannel();
    port1.onmessage = () => {
      port1.close();
      resolve();
    };
    port2.postMessage(null);
  });
}

/** What a request hands back as it runs. */
export interface JobSink {
  /** New text. */
  text(text: string): void;
  /** The end: the reason and the token counts. */
  finish(reason: FinishReason, promptTokens: number, completionTokens: number): void;
  /** A failure (a cancellation's reason, a model error). */
  fail(error: unknown): void;
}

/** One request inside the scheduler. */
export class Job {
  readonly prompt: readonly number[];
  readonly generated: number[] = [];
  readonly sampling: ReturnType<typeof checkSampling>;
  readonly uniform: () => number;
  readonly maxTokens: number;
  readonly text: TextStream;
  readonly sink: JobSink;
  seqId = -1;
  /** Tokens of this job in the cache. */
  fed = 0;
  admitted = 0;
  state: "waiting" | "running" | "done" = "waiting";
  cancelled: unknown = undefined;

  constructor(
    prompt: readonly number[],
    sampling: ReturnType<typeof checkSampling>,
    maxTokens: number,
    text: TextStream,
    sink: JobSink,
  ) {
    this.prompt = prompt;
    this.sampling = sampling;
    this.uniform = seededUniform(sampling.seed);
    this.maxTokens = maxTokens;
    this.text = text;
    this.sink = sink;
  }

  /** Prompt and generated tokens: what the sequence holds once all are fed. */
  get length(): number {
    return this.prompt.length + this.generated.length;
  }

  tokens(from: number, to: number): number[] {
    const p = this.prompt.length;
    const out: number[] = [];
    for (let i = from; i < to; i++) out.push(i < p ? this.prompt[i] : this.generated[i - p]);
    return out;
  }
}

/** Counts of the scheduler, for tests and benchmarks. */
export interface SchedulerStats {
  /** Requests waiting to be admitted. */
  waiting: number;
  /** Requests with a sequence in the cache. */
  running: number;
  /** Free pages of the model's cache. */
  freePages: number;
  /** Pages of the model's cache. */
  totalPages: number;
  /** Forwards run. */
  steps: number;
  /** Requests preempted (their sequence removed, to recompute later). */
  preemptions: number;
  /** Tokens generated. */
  generatedTokens: number;
}

/** The continuous-batching loop over one model. */
export class Scheduler {
  readonly #model: EngineModel;
  readonly #waiting: Job[] = [];
  readonly #running: Job[] = [];
  #nextSeqId = 0;
  #order = 0;
  #loop: Promise<void> | null = null;
  #inForward = false;
  #steps = 0;
  #preemptions = 0;
  #generated = 0;

  constructor(model: EngineModel) {
    const sizes = [
      ["pageSize", model.pageSize],
      ["totalPages", model.totalPages],
      ["maxBatchSize", model.maxBatchSize],
      ["prefillChunkSize", model.prefillChunkSize],
      ["maxSequenceLength", model.maxSequenceLength],
      ["vocabSize", model.vocabSize],
    ] as const;
    for (const [what, v] of sizes) {
      if (!Number.isSafeInteger(v) || v < 1) {
        throw new RangeError(`Engine: the model's ${what} must be a positive integer, got ${v}`);
      }
    }
    if (model.prefillChunkSize < model.maxBatchSize) {
      // Every running sequence's decode token must fit in one forward, or some would starve.
      throw new RangeError(
        `Engine: the model's prefillChunkSize ${model.prefillChunkSize} is below its maxBatchSize ${model.maxBatchSize}`,
      );
    }
    if (model.freePages() !== model.totalPages) {
      throw new RangeError(
        `Engine: the model's KV cache must start empty (${model.freePages()} of ${model.totalPages} pages free)`,
      );
    }
    this.#model = model;
  }

  /** Most tokens a sequence can hold: the model's length and the cache's pages. */
  get capacity(): number {
    const m = this.#model;
    return Math.min(m.maxSequenceLength, m.totalPages * m.pageSize);
  }

  /** The counts now. */
  stats(): SchedulerStats {
    return {
      waiting: this.#waiting.length,
      running: this.#running.length,
      freePages: this.#model.freePages(),
      totalPages: this.#model.totalPages,
      steps: this.#steps,
      preemptions: this.#preemptions,
      generatedTokens: this.#generated,
    };
  }

  /** Queues `job`; the loop runs until every job has left. */
  submit(job: Job): void {
    this.#waiting.push(job);
    this.#loop ??= this.#run();
  }

  /**
   * Cancels `job` with `reason`: it leaves now (its pages free), or right after the
   * forward in flight if it is in it. Its sink fails with `reason` once it has left.
   */
  cancel(job: Job, reason: unknown): void {
    if (job.state === "done" || job.cancelled !== undefined) return;
    job.cancelled = reason;
    if (job.state === "waiting") {
      this.#waiting.splice(this.#waiting.indexOf(job), 1);
      job.state = "done";
      job.sink.fail(reason);
    } else if (!this.#inForward) {
      this.#leave(job);
      job.sink.fail(reason);
    }
  }

  async #run(): Promise<void> {
    try {
      while (this.#waiting.length + this.#running.length > 0) {
        // Between steps, timers and I/O run: new requests and cancellations come in here.
        await nextTask();
        try {
          await this.#step();
        } catch (error) {
          // Not the forward's (that fails its batch alone): the scheduler's state is in
          // doubt, so every request fails with the error, and the loop ends clean.
          this.#failAll(error);
        }
      }
    } finally {
      this.#loop = null;
    }
  }

  #failAll(error: unknown): void {
    for (const job of [...this.#running, ...this.#waiting]) {
      try {
        if (job.state === "running") this.#model.removeSequence(job.seqId);
      } catch {
        // The sequence may be gone already; the other requests still fail.
      }
      job.state = "done";
      job.sink.fail(job.cancelled ?? error);
    }
    this.#running.length = 0;
    this.#waiting.length = 0;
  }

  #pages(tokens: number): number {
    return Math.ceil(tokens / this.#model.pageSize);
  }

  #admit(): void {
    const m = this.#model;
    while (this.#waiting.length > 0 && this.#running.length < m.maxBatchSize) {
      const job = this.#waiting[0];
      const need = this.#pages(job.length) + this.#running.length;
      if (this.#running.length > 0 && need > m.freePages()) break;
      this.#waiting.shift();
      job.seqId = this.#nextSeqId++;
      m.addSequence(job.seqId);
      job.fed = 0;
      job.admitted = ++this.#order;
      job.state = "running";
      this.#running.push(job);
    }
  }

  #plan(): { job: Job; n: number }[] {
    let budget = this.#model.prefillChunkSize;
    const batch: { job: Job; n: number }[] = [];
    for (const job of this.#running) {
      if (job.length - job.fed === 1 && budget > 0) {
        batch.push({ job, n: 1 });
        budget--;
      }
    }
    for (const job of this.#running) {
      const left = job.length - job.fed;
      if (left > 1 && budget > 0) {
        const n = Math.min(left, budget);
        batch.push({ job, n });
        budget -= n;
      }
    }
    return batch;
  }

  #newPages(batch: { job: Job; n: number }[]): number {
    let n = 0;
    for (const e of batch) n += this.#pages(e.job.fed + e.n) - this.#pages(e.job.fed);
    return n;
  }

  /** Removes the job's sequence (its pages free) and takes it out of the batch. */
  #leave(job: Job): void {
    const i = this.#running.indexOf(job);
    if (i >= 0) this.#running.splice(i, 1);
    if (job.state === "running") this.#model.removeSequence(job.seqId);
    job.state = "done";
  }

  /** Running jobs cancelled during the forward, in its batch or not, leave now. */
  #leaveCancelled(): void {
    for (const job of this.#running.filter((j) => j.cancelled !== undefined)) {
      this.#leave(job);
      job.sink.fail(job.cancelled);
    }
  }

  #preempt(job: Job): void {
    this.#leave(job);
    job.state = "waiting";
    job.fed = 0;
    this.#waiting.unshift(job);
    this.#preemptions++;
  }

  #finish(job: Job, reason: FinishReason): void {
    const rest = reason === "stop" ? "" : job.text.flush();
    if (rest !== "") job.sink.text(rest);
    this.#leave(job);
    job.sink.finish(reason, job.prompt.length, job.generated.length);
  }

  async #step(): Promise<void> {
    const m = this.#model;
    this.#admit();
    let batch = this.#plan();
    while (this.#newPages(batch) > m.freePages()) {
      const victim = this.#running.reduce((a, b) => (b.admitted > a.admitted ? b : a));
      if (this.#running.length === 1) {
        // Cannot happen for a job within `capacity`; fail it rather than the engine.
        this.#leave(victim);
        victim.sink.fail(
          new RangeError(`the KV cache has no room for the request's ${victim.length} tokens`),
        );
        return;
      }
      this.#preempt(victim);
      batch = batch.filter((e) => e.job !== victim);
    }
    if (batch.length === 0) return;
    const entries = batch.map((e) => ({
      seqId: e.job.seqId,
      tokens: e.job.tokens(e.job.fed, e.job.fed + e.n),
    }));
    let logits: Float32Array[];
    this.#inForward = true;
    try {
      logits = await m.forward(entries);
      if (
        !Array.isArray(logits) || logits.length !== batch.length ||
        logits.some((row) => !(row instanceof Float32Array) || row.length !== m.vocabSize)
      ) {
        throw new TypeError(
          `${m.name}: forward of ${batch.length} sequences must resolve to as many Float32Arrays of ${m.vocabSize} logits`,
        );
      }
    } catch (error) {
      this.#inForward = false;
      for (const { job } of batch) {
        if (job.cancelled !== undefined) continue;
        this.#leave(job);
        job.sink.fail(error);
      }
      this.#leaveCancelled();
      return;
    }
    this.#inForward = false;
    this.#steps++;
    this.#leaveCancelled();
    for (let i = 0; i < batch.length; i++) {
      const { job, n } = batch[i];
      if (job.state !== "running") continue; // cancelled during the forward: gone
      job.fed += n;
      if (job.fed < job.length) continue; // a prefill chunk, more to come
      const id = sampleToken(logits[i], job.sampling, job.uniform);
      job.generated.push(id);
      this.#generated++;
      if (m.stopTokenIds?.includes(id)) {
        this.#finish(job, "stop");
        continue;
      }
      const text = job.text.push(id);
      if (text !== "") job.sink.text(text);
      if (job.text.stopped) this.#finish(job, "stop");
      else if (job.generated.length >= job.maxTokens || job.length > this.capacity) {
        this.#finish(job, "length");
      }
    }
  }
}
