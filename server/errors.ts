/**
 * Errors in OpenAI's shape: `{ error: { message, type, param, code } }` with the status
 * code OpenAI's clients expect (the official `openai` package turns 400 into
 * `BadRequestError`, 429 into `RateLimitError`, and retries 429 and 5xx by itself).
 *
 * @module
 */

/** An error a request gets, with its HTTP status and OpenAI's `type`, `param` and `code`. */
export class ApiError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** OpenAI's error type (`invalid_request_error`, `rate_limit_error`, `server_error`, …). */
  readonly type: string;
  /** The request field at fault, or null. */
  readonly param: string | null;
  /** A short machine-readable code, or null. */
  readonly code: string | null;
  /** Seconds to wait before a retry (`Retry-After`), when it is worth one. */
  readonly retryAfter?: number;

  /** An error answered with `status`; `message` is shown to the client as is. */
  constructor(
    status: number,
    message: string,
    options: { type?: string; param?: string | null; code?: string | null; retryAfter?: number } =
      {},
  ) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.type = options.type ??
      (status === 429
        ? "rate_limit_error"
        : status >= 500
        ? "server_error"
        : "invalid_request_error");
    this.param = options.param ?? null;
    this.code = options.code ?? null;
    this.retryAfter = options.retryAfter;
  }

  /** The JSON body: `{ error: { message, type, param, code } }`. */
  body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return {
      error: { message: this.message, type: this.type, param: this.param, code: this.code },
    };
  }

  /** The whole response. */
  response(): Response {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.retryAfter !== undefined) headers["retry-after"] = String(this.retryAfter);
    return new Response(JSON.stringify(this.body()), { status: this.status, headers });
  }
}

const FIELDS =
  /\b(messages|prompt|max_tokens|temperature|top_p|top_k|seed|stop|logit_bias|n|stream_options)\b/;

/**
 * The `ApiError` for anything a request's handling threw: the engine refuses bad values
 * with `TypeError` / `RangeError` naming the field (400, the field as `param`); a
 * cancellation for a time limit is 504, for a shutdown 503; anything else is the
 * server's fault (500), its message kept (it names what failed, never a secret).
 */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof TypeError || error instanceof RangeError) {
    return new ApiError(400, error.message, {
      param: FIELDS.exec(error.message)?.[1] ?? null,
      code: "invalid_value",
    });
  }
  if (error instanceof DOMException && error.name === "TimeoutError") {
    return new ApiError(504, `the request ran past the server's time limit: ${error.message}`, {
      code: "timeout",
    });
  }
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return new ApiError(500, `the server failed the request: ${message}`, { code: "internal" });
}
