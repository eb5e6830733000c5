/**
 * The server's limits: what one request may ask and what the server takes at once.
 * Every one has a flag of `relaxvm serve`; a request beyond one gets a clear error
 * (400, 413 or 429), never a crash.
 *
 * @module
 */

/** Limits of one server. */
export interface ServerLimits {
  /** Largest request body, in bytes (413 beyond). */
  maxBodyBytes: number;
  /** Requests waiting for the engine (or the embedder) at once; 429 with `Retry-After` beyond. */
  maxQueue: number;
  /** Largest `max_tokens`, and the default when a request gives none. */
  maxTokens: number;
  /** Largest `n` (choices per request). */
  maxChoices: number;
  /** Most messages in a chat request. */
  maxMessages: number;
  /** Most inputs in one embeddings request. */
  maxEmbeddingInputs: number;
  /** Longest time one request may take, queueing included, in milliseconds (504 beyond). */
  requestTimeoutMs: number;
  /** How long a SIGTERM waits for running requests before cancelling them, in milliseconds. */
  drainTimeoutMs: number;
}

/** The defaults: sized for the small models relaxvm serves on a CPU. */
export const DEFAULT_LIMITS: Readonly<ServerLimits> = Object.freeze({
  maxBodyBytes: 1 << 20,
  maxQueue: 64,
  maxTokens: 256,
  maxChoices: 4,
  maxMessages: 256,
  maxEmbeddingInputs: 64,
  requestTimeoutMs: 60_000,
  drainTimeoutMs: 10_000,
});

/** `limits` with defaults filled in, each checked to be a positive integer. */
export function resolveLimits(limits: Partial<ServerLimits> = {}): ServerLimits {
  const out = { ...DEFAULT_LIMITS, ...limits };
  for (const [name, value] of Object.entries(out)) {
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new RangeError(`server limit ${name} must be a positive integer, got ${value}`);
    }
  }
  return out;
}
