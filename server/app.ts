/**
 * The server's routes over the engine and an embedding model, without the socket:
 * `ServerApp.handle(request)` answers one `Request` (what `Deno.serve` calls), so tests
 * can drive it directly. `drain()` is the graceful shutdown: readiness goes false, new
 * work is refused with 503, running requests finish or, past the deadline, get a 503.
 *
 * @module
 */

import type { Engine } from "../runtime.ts";
import { base64Floats, type Embedder, EmbeddingQueue } from "./embeddings.ts";
import { ApiError, toApiError } from "./errors.ts";
import { generate, queueFull } from "./generation.ts";
import { resolveLimits, type ServerLimits } from "./limits.ts";
import { Metrics } from "./metrics.ts";
import { chatBody, completionBody, embeddingsBody, parseObject, readBody } from "./requests.ts";

/** The models a server serves: a generator, an embedder, or both. */
export interface ServedModels {
  /** Chat and text completions. */
  generation?: { engine: Engine; name: string; aliases?: readonly string[] };
  /** Embeddings. */
  embeddings?: { embedder: Embedder; name: string; aliases?: readonly string[] };
}

const ROUTES: Record<string, string> = {
  "/v1/chat/completions": "POST",
  "/v1/completions": "POST",
  "/v1/embeddings": "POST",
  "/v1/models": "GET",
  "/health": "GET",
  "/health/live": "GET",
  "/health/ready": "GET",
  "/metrics": "GET",
};

/**
 * OpenAI's API over relaxvm's engine: the routes, limits, metrics and draining.
 *
 * @example Answer a request without a socket
 * ```ts ignore
 * const app = new ServerApp({ generation: { engine, name: engine.model.name } });
 * const response = await app.handle(new Request("http://x/v1/models"));
 * ```
 */
export class ServerApp {
  /** The limits in force. */
  readonly limits: ServerLimits;
  /** The metrics `GET /metrics` shows. */
  readonly metrics: Metrics = new Metrics();
  readonly #models: ServedModels;
  readonly #embeddings: EmbeddingQueue | null;
  /** Requests with work in flight: aborting one cancels it. */
  readonly #active = new Set<AbortController>();
  #idle: (() => void) | null = null;
  #draining = false;

  /** A server of `models` under `limits` (defaults: `DEFAULT_LIMITS`). */
  constructor(models: ServedModels, limits: Partial<ServerLimits> = {}) {
    if (models.generation === undefined && models.embeddings === undefined) {
      throw new RangeError("ServerApp: serve at least one model");
    }
    this.#models = models;
    this.limits = resolveLimits(limits);
    this.#embeddings = models.embeddings
      ? new EmbeddingQueue(models.embeddings.embedder, this.limits.maxQueue)
      : null;
  }

  /** Whether the server drains (not ready; new work refused). */
  get draining(): boolean {
    return this.#draining;
  }

  /** Requests in flight (streams until their last event). */
  get active(): number {
    return this.#active.size;
  }

  /** Answers one request; never rejects. */
  async handle(request: Request): Promise<Response> {
    const arrived = performance.now();
    const path = new URL(request.url).pathname;
    const endpoint = path in ROUTES ? path : "other";
    let response: Response;
    try {
      response = await this.#route(request, path, arrived);
    } catch (e) {
      response = toApiError(e).response();
    }
    this.metrics.request(endpoint, response.status);
    return response;
  }

  /**
   * The graceful shutdown: not ready at once, new work refused (503); resolves once the
   * running requests have finished, or after `drainTimeoutMs`, when those left are
   * cancelled with a 503 (a stream gets it as its last event).
   */
  async drain(): Promise<void> {
    this.#draining = true;
    if (this.#active.size === 0) return;
    const idle = new Promise<void>((resolve) => (this.#idle = resolve));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), this.limits.drainTimeoutMs);
    });
    const outcome = await Promise.race([idle, deadline]);
    clearTimeout(timer);
    if (outcome === "late") {
      const reason = new ApiError(
        503,
        `the server is shutting down; the request was cancelled after the drain deadline of ${this.limits.drainTimeoutMs} ms`,
        { code: "server_shutting_down" },
      );
      for (const c of this.#active) c.abort(reason);
      // Their error events go out; the streams end.
      await Promise.race([idle, new Promise((r) => setTimeout(r, 1000))]);
    }
  }

  async #route(request: Request, path: string, arrived: number): Promise<Response> {
    const method = ROUTES[path];
    if (method === undefined) {
      throw new ApiError(404, `unknown URL: ${request.method} ${path}`, { code: "unknown_url" });
    }
    if (request.method !== method) {
      throw new ApiError(405, `${path} takes ${method}, not ${request.method}`, {
        code: "method_not_allowed",
      });
    }
    switch (path) {
      case "/health":
      case "/health/ready":
        return Response.json(
          { status: this.#draining ? "draining" : "ok" },
          { status: this.#draining ? 503 : 200 },
        );
      case "/health/live":
        return Response.json({ status: "ok" });
      case "/metrics":
        return new Response(
          this.metrics.text(
            this.#models.generation?.engine.stats() ?? null,
            this.#embeddings?.pending ?? 0,
            this.#draining,
          ),
          { headers: { "content-type": "text/plain; version=0.0.4" } },
        );
      case "/v1/models":
        return Response.json({
          object: "list",
          data: [this.#models.generation, this.#models.embeddings].filter((m) => m !== undefined)
            .map((m) => ({ id: m!.name, object: "model", created: 0, owned_by: "relaxvm" })),
        });
    }
    if (this.#draining) {
      throw new ApiError(503, "the server is shutting down; retry on another replica", {
        code: "server_shutting_down",
        retryAfter: 1,
      });
    }
    const body = parseObject(await readBody(request, this.limits.maxBodyBytes));
    const work = new AbortController();
    const signal = AbortSignal.any([
      request.signal,
      work.signal,
      AbortSignal.timeout(this.limits.requestTimeoutMs),
    ]);
    this.#active.add(work);
    const done = () => {
      this.#active.delete(work);
      if (this.#active.size === 0) this.#idle?.();
    };
    try {
      const response = path === "/v1/embeddings"
        ? await this.#embed(body, signal)
        : await this.#generate(path, body, signal, arrived);
      if (
        response.body === null ||
        !response.headers.get("content-type")?.startsWith("text/event-stream")
      ) {
        done();
        return response;
      }
      // A stream is in flight until its last event, or until the client leaves.
      return new Response(untilEnd(response.body, done), response);
    } catch (e) {
      done();
      throw e;
    }
  }

  #generate(
    path: string,
    raw: Record<string, unknown>,
    signal: AbortSignal,
    arrived: number,
  ): Promise<Response> {
    const g = this.#models.generation;
    if (g === undefined) {
      throw new ApiError(404, "this server serves no generation model (it serves embeddings)", {
        code: "model_not_found",
      });
    }
    const kind = path === "/v1/chat/completions" ? "chat" : "completion";
    const body = kind === "chat" ? chatBody(raw, this.limits) : completionBody(raw, this.limits);
    checkModel(raw.model, g);
    const waiting = g.engine.stats().waiting;
    if (waiting + body.n > this.limits.maxQueue) throw queueFull(waiting, this.limits.maxQueue);
    return generate(
      { engine: g.engine, metrics: this.metrics, model: g.name, signal, arrived },
      kind,
      body,
    );
  }

  async #embed(raw: Record<string, unknown>, signal: AbortSignal): Promise<Response> {
    const e = this.#models.embeddings;
    if (e === undefined || this.#embeddings === null) {
      throw new ApiError(404, "this server serves no embedding model", { code: "model_not_found" });
    }
    const body = embeddingsBody(raw, this.limits);
    checkModel(body.model, e);
    const { vectors, tokens } = await this.#embeddings.run(body.input, signal);
    if (body.dimensions !== undefined && body.dimensions !== vectors[0].length) {
      throw new ApiError(
        400,
        `dimensions must be ${vectors[0].length} (the model's), got ${body.dimensions}`,
        {
          param: "dimensions",
        },
      );
    }
    return Response.json({
      object: "list",
      data: vectors.map((v, index) => ({
        object: "embedding",
        index,
        embedding: body.base64 ? base64Floats(v) : Array.from(v),
      })),
      model: e.name,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    });
  }
}

/** `body` as a stream that calls `done` once, when it ends, fails or is cancelled. */
function untilEnd(body: ReadableStream<Uint8Array>, done: () => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let ended = false;
  const end = () => {
    if (!ended) (ended = true, done());
  };
  return new ReadableStream({
    async pull(controller) {
      try {
        const { done: last, value } = await reader.read();
        if (last) {
          controller.close();
          end();
        } else controller.enqueue(value);
      } catch (e) {
        controller.error(e);
        end();
      }
    },
    async cancel(reason) {
      end();
      await reader.cancel(reason);
    },
  });
}

/** 404 when a request names a model the server does not serve (as OpenAI answers). */
function checkModel(model: unknown, served: { name: string; aliases?: readonly string[] }): void {
  if (model === undefined || model === null) return;
  if (model !== served.name && !served.aliases?.includes(model as string)) {
    throw new ApiError(
      404,
      `the model ${JSON.stringify(model)} does not exist here; this server serves ${served.name}`,
      {
        param: "model",
        code: "model_not_found",
      },
    );
  }
}
