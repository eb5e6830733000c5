/**
 * The request and response shapes of the engine's API: OpenAI's chat completions and
 * completions (what WebLLM's `engine.chat.completions.create` takes and returns), the
 * fields relaxvm serves. Field names are OpenAI's (snake_case), so code written for
 * OpenAI's or WebLLM's client ports unchanged.
 *
 * @module
 */

import type { ChatMessage } from "./model.ts";

/** What both kinds of request share. */
export interface GenerationRequest {
  /** Most tokens generated (default: up to the model's sequence length). */
  max_tokens?: number | null;
  /** 0: greedy; default 1. */
  temperature?: number | null;
  /** Nucleus mass in (0, 1]; default 1. */
  top_p?: number | null;
  /** Only the k likeliest tokens (relaxvm's and WebLLM's extension; 0 or absent: all). */
  top_k?: number | null;
  /** Seed of the request's sampling: the same seed, the same tokens. */
  seed?: number | null;
  /** Up to four strings that end the generation (not included in the text). */
  stop?: string | string[] | null;
  /** Token id → bias added to its logit (-100 bans it). */
  logit_bias?: Record<string, number> | null;
  /** Stream chunks (an async iterable) instead of one response. */
  stream?: boolean | null;
  /** With `stream`: `include_usage` adds a last chunk with the token counts. */
  stream_options?: { include_usage?: boolean } | null;
  /** Choices per request: only 1. */
  n?: number | null;
  /** Cancels the request: its sequence and pages are freed at once. */
  signal?: AbortSignal;
}

/** `engine.chat.completions.create`'s request. */
export interface ChatCompletionRequest extends GenerationRequest {
  /** The conversation so far. */
  messages: ChatMessage[];
  /** Ignored beyond being echoed: the engine serves one model. */
  model?: string | null;
}

/** `engine.completions.create`'s request. */
export interface CompletionRequest extends GenerationRequest {
  /** The text to continue. */
  prompt: string;
  /** Ignored beyond being echoed: the engine serves one model. */
  model?: string | null;
}

/** Why a generation ended. */
export type FinishReason = "stop" | "length" | "abort";

/** Token counts of a request. */
export interface CompletionUsage {
  /** Tokens of the prompt (after the chat template). */
  prompt_tokens: number;
  /** Tokens generated. */
  completion_tokens: number;
  /** Their sum. */
  total_tokens: number;
}

/** One streamed piece of a chat completion. */
export interface ChatCompletionChunk {
  /** The request's id (`chatcmpl-…` or `cmpl-…`), the same on every chunk. */
  id: string;
  /** What the object is, as OpenAI names it. */
  object: "chat.completion.chunk";
  /** When the request was made, in seconds since the epoch. */
  created: number;
  /** The model's name. */
  model: string;
  /** The one choice (`n` is 1). */
  choices: {
    index: number;
    delta: { role?: "assistant"; content?: string };
    finish_reason: FinishReason | null;
    logprobs: null;
  }[];
  /** On the last chunk only, when `stream_options.include_usage` (its `choices` empty). */
  usage?: CompletionUsage;
}

/** A whole chat completion. */
export interface ChatCompletion {
  /** The request's id (`chatcmpl-…` or `cmpl-…`), the same on every chunk. */
  id: string;
  /** What the object is, as OpenAI names it. */
  object: "chat.completion";
  /** When the request was made, in seconds since the epoch. */
  created: number;
  /** The model's name. */
  model: string;
  /** The one choice (`n` is 1). */
  choices: {
    index: number;
    message: { role: "assistant"; content: string };
    finish_reason: FinishReason;
    logprobs: null;
  }[];
  /** The token counts. */
  usage: CompletionUsage;
}

/** A whole completion, or (`object` the same) one streamed piece of one. */
export interface Completion {
  /** The request's id (`chatcmpl-…` or `cmpl-…`), the same on every chunk. */
  id: string;
  /** What the object is, as OpenAI names it. */
  object: "text_completion";
  /** When the request was made, in seconds since the epoch. */
  created: number;
  /** The model's name. */
  model: string;
  /** The one choice (`n` is 1). */
  choices: {
    index: number;
    text: string;
    finish_reason: FinishReason | null;
    logprobs: null;
  }[];
  /** The token counts: on a whole completion, and on a stream's last chunk when asked. */
  usage?: CompletionUsage;
}
