/**
 * One generation request on the engine: `n` choices (an engine request each, seeds
 * `seed`, `seed + 1`, …), answered whole or as server-sent events. The server always
 * streams from the engine, so time to first token and inter-token latency are measured
 * the same way for both; a whole answer is the stream's pieces joined.
 *
 * @module
 */

import type { CompletionUsage, Engine } from "../runtime.ts";
import { ApiError, toApiError } from "./errors.ts";
import type { Metrics } from "./metrics.ts";
import type { GenerationBody } from "./requests.ts";

/** What a generation needs of the server. */
export interface GenerationContext {
  engine: Engine;
  metrics: Metrics;
  /** The model's name in responses. */
  model: string;
  /** Aborts on client disconnect, the time limit or a shutdown's deadline. */
  signal: AbortSignal;
  /** `performance.now()` when the request arrived. */
  arrived: number;
}

/** One piece of one choice. */
interface Piece {
  index: number;
  text: string;
  finish: string | null;
  /** The first piece of the choice (a chat chunk's delta carries the role). */
  first: boolean;
}

const encoder = new TextEncoder();
const event = (data: unknown) =>
  encoder.encode(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);

/**
 * Runs the request and answers it. Errors before the first byte are `ApiError`s the
 * caller turns into a response; an error once a stream has begun is sent as a last
 * event `{ error: { … } }` (what OpenAI's clients read as an API error).
 */
export async function generate(
  ctx: GenerationContext,
  kind: "chat" | "completion",
  body: GenerationBody,
): Promise<Response> {
  const local = new AbortController();
  const signal = AbortSignal.any([ctx.signal, local.signal]);
  const id = `${kind === "chat" ? "chatcmpl" : "cmpl"}-${crypto.randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  const seed = body.fields.seed as number | null | undefined;
  const streams: AsyncIterableIterator<{ choices: unknown[]; usage?: CompletionUsage }>[] = [];
  try {
    for (let i = 0; i < body.n; i++) {
      const request = {
        ...body.fields,
        seed: seed === undefined || seed === null ? seed : seed + i,
        stream: true as const,
        stream_options: { include_usage: true },
        signal,
      };
      // deno-lint-ignore no-explicit-any
      const create = kind === "chat" ? ctx.engine.chat.completions : ctx.engine.completions as any;
      streams.push(await create.create(request));
    }
  } catch (e) {
    local.abort(e);
    throw toApiError(e);
  }

  let promptTokens = 0, completionTokens = 0;
  /** Drains choice `index`'s stream, calling `emit` per piece. */
  const drain = async (
    index: number,
    stream: (typeof streams)[number],
    emit: (p: Piece) => void,
  ) => {
    let last = -1, first = true;
    for await (const chunk of stream) {
      if (chunk.usage) {
        if (index === 0) promptTokens = chunk.usage.prompt_tokens;
        completionTokens += chunk.usage.completion_tokens;
      }
      // deno-lint-ignore no-explicit-any
      const choice = chunk.choices[0] as any;
      if (choice === undefined) continue;
      const text: string = (kind === "chat" ? choice.delta?.content : choice.text) ?? "";
      if (text !== "") {
        const now = performance.now();
        if (last < 0) ctx.metrics.timeToFirstToken.observe((now - ctx.arrived) / 1000);
        else ctx.metrics.interTokenLatency.observe((now - last) / 1000);
        last = now;
      }
      if (text === "" && choice.finish_reason === null && !first) continue;
      emit({ index, text, finish: choice.finish_reason, first });
      first = false;
    }
  };
  const usage = () => ({
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  });
  const object = kind === "chat" ? "chat.completion.chunk" : "text_completion";
  const chunkOf = (p: Piece) => ({
    id,
    object,
    created,
    model: ctx.model,
    choices: [
      kind === "chat"
        ? {
          index: p.index,
          delta: p.first
            ? { role: "assistant", content: p.text }
            : p.text === ""
            ? {}
            : { content: p.text },
          finish_reason: p.finish,
          logprobs: null,
        }
        : { index: p.index, text: p.text, finish_reason: p.finish, logprobs: null },
    ],
  });

  if (!body.stream) {
    const texts = new Array<string>(body.n).fill("");
    const finishes = new Array<string | null>(body.n).fill(null);
    try {
      await Promise.all(streams.map((s, i) =>
        drain(i, s, (p) => {
          texts[p.index] += p.text;
          if (p.finish !== null) finishes[p.index] = p.finish;
        })
      ));
    } catch (e) {
      local.abort(e);
      throw toApiError(signal.aborted ? signal.reason : e);
    }
    const choices = texts.map((text, index) =>
      kind === "chat"
        ? {
          index,
          message: { role: "assistant", content: text },
          finish_reason: finishes[index],
          logprobs: null,
        }
        : { index, text, finish_reason: finishes[index], logprobs: null }
    );
    return Response.json({
      id,
      object: kind === "chat" ? "chat.completion" : "text_completion",
      created,
      model: ctx.model,
      choices,
      usage: usage(),
    });
  }

  const sse = new ReadableStream<Uint8Array>({
    start(controller) {
      // Not awaited: the response's headers go out now, the events as they come.
      void pump(controller);
    },
    cancel(reason) {
      local.abort(reason ?? new DOMException("the client disconnected", "AbortError"));
    },
  });
  async function pump(controller: ReadableStreamDefaultController<Uint8Array>) {
    const send = (bytes: Uint8Array) => {
      try {
        controller.enqueue(bytes);
      } catch {
        // The client left: the signal cancels the engine's requests.
      }
    };
    try {
      await Promise.all(streams.map((s, i) => drain(i, s, (p) => send(event(chunkOf(p))))));
      if (body.includeUsage) {
        send(event({ id, object, created, model: ctx.model, choices: [], usage: usage() }));
      }
      send(event("[DONE]"));
    } catch (e) {
      local.abort(e);
      if (
        !ctx.signal.aborted || !(ctx.signal.reason instanceof DOMException) ||
        ctx.signal.reason.name !== "AbortError"
      ) {
        send(event(toApiError(signal.aborted ? signal.reason : e).body()));
      }
    }
    try {
      controller.close();
    } catch {
      // Cancelled already.
    }
  }
  return new Response(sse, {
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      "x-accel-buffering": "no",
    },
  });
}

/** The 429 a request gets when the engine's queue is full. */
export function queueFull(waiting: number, limit: number): ApiError {
  return new ApiError(
    429,
    `the server's queue is full (${waiting} requests waiting, limit ${limit}); retry later`,
    { code: "queue_full", retryAfter: 1 },
  );
}
