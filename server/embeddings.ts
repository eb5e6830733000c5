/**
 * `POST /v1/embeddings`: sentences through an embedding model (all-MiniLM-L6-v2), one
 * request at a time in arrival order (each request's inputs are one batch), with a
 * bounded queue.
 *
 * @module
 */

import { ApiError } from "./errors.ts";

/** What the server needs of an embedding model (`MiniLMSession` fits). */
export interface Embedder {
  /** One unit vector per sentence. */
  embed(sentences: readonly string[]): Promise<Float32Array[]>;
  /** The token ids of a sentence (for `usage`). */
  tokenize(text: string): number[];
}

/** Runs embedding requests one after another. */
export class EmbeddingQueue {
  readonly #embedder: Embedder;
  readonly #limit: number;
  #tail: Promise<unknown> = Promise.resolve();
  #pending = 0;

  /** A queue of at most `limit` requests in front of `embedder`. */
  constructor(embedder: Embedder, limit: number) {
    this.#embedder = embedder;
    this.#limit = limit;
  }

  /** Requests waiting or running. */
  get pending(): number {
    return this.#pending;
  }

  /** The vectors and token count of `input`; 429 when the queue is full. */
  run(input: string[], signal: AbortSignal): Promise<{ vectors: Float32Array[]; tokens: number }> {
    if (this.#pending >= this.#limit) {
      return Promise.reject(
        new ApiError(429, `the embedding queue is full (${this.#pending} requests); retry later`, {
          code: "queue_full",
          retryAfter: 1,
        }),
      );
    }
    this.#pending++;
    const job = this.#tail.then(async () => {
      signal.throwIfAborted();
      const tokens = input.reduce((n, s) => n + this.#embedder.tokenize(s).length, 0);
      return { vectors: await this.#embedder.embed(input), tokens };
    }).finally(() => this.#pending--);
    this.#tail = job.catch(() => {});
    return job;
  }
}

/** Little-endian float32 bytes of `v`, in base64 (OpenAI's `encoding_format: "base64"`). */
export function base64Floats(v: Float32Array): string {
  const bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}
