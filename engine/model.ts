/**
 * What the engine needs of a model: prefill and decode of many sequences at once over a
 * paged KV cache that sequence ids name, the cache's sizes to plan with, a tokenizer and
 * a chat template. relaxvm's GPT implements it (models/gpt/paged_session.ts); a
 * TVM-compiled model (MLC's `batch_prefill` / `batch_decode` over
 * `vm.builtin.kv_state_*`) fits the same shape.
 *
 * @module
 */

/** One message of a chat, as OpenAI's API spells it. */
export interface ChatMessage {
  /** Who wrote it. */
  role: "system" | "user" | "assistant";
  /** Its text. */
  content: string;
}

/** Text to token ids and back. */
export interface Tokenizer {
  /** The ids of `text`. */
  encode(text: string): number[];
  /**
   * The text of `ids`. A character cut between two ids may come out as U+FFFD at the
   * end; the engine holds a trailing U+FFFD back until the next id completes it.
   */
  decode(ids: readonly number[]): string;
}

/** One sequence's part of a forward: the tokens appended to it. */
export interface ForwardEntry {
  /** The sequence (added with `addSequence`). */
  readonly seqId: number;
  /** Its new tokens, at least one. */
  readonly tokens: readonly number[];
}

/**
 * A model the engine can serve: a paged KV cache of sequences and one call that runs a
 * batch of them (each sequence's prefill chunk or decode token together).
 *
 * @example The shape of an implementation
 * ```ts
 * import type { EngineModel } from "@relaxvm/relaxvm";
 *
 * function describe(model: EngineModel): string {
 *   return `${model.name}: ${model.totalPages} pages of ${model.pageSize} tokens`;
 * }
 * void describe;
 * ```
 */
export interface EngineModel {
  /** The name completions report (`model`). */
  readonly name: string;
  /** Logits per token. */
  readonly vocabSize: number;
  /** Most tokens in one sequence (prompt and generated). */
  readonly maxSequenceLength: number;
  /** Tokens per page of the KV cache. */
  readonly pageSize: number;
  /** Pages in the KV cache. */
  readonly totalPages: number;
  /** Most sequences in one forward. */
  readonly maxBatchSize: number;
  /** Most tokens in one forward. */
  readonly prefillChunkSize: number;
  /** Text to ids and back. */
  readonly tokenizer: Tokenizer;
  /** Ids that end a generation (finish reason `"stop"`), if any. */
  readonly stopTokenIds?: readonly number[];
  /** The prompt text of a chat. */
  chatTemplate(messages: readonly ChatMessage[]): string;
  /** Free pages of the KV cache. */
  freePages(): number;
  /** Adds an empty sequence. */
  addSequence(seqId: number): void;
  /** Removes a sequence; its pages are free at once. */
  removeSequence(seqId: number): void;
  /**
   * Appends each entry's tokens to its sequence in one forward; resolves to the logits
   * of each entry's last token, in order.
   */
  forward(entries: readonly ForwardEntry[]): Promise<Float32Array[]>;
}
