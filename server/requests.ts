/**
 * Reading and checking request bodies before anything reaches the engine: a body no
 * larger than the limit (413), JSON (400 `invalid_json`), an object with known fields
 * of the right types (400 naming the field), text without control characters (400).
 * The engine checks the values' ranges again; this layer gives each refusal the field
 * as OpenAI's `param`.
 *
 * @module
 */

import type { ChatMessage } from "../runtime.ts";
import { ApiError } from "./errors.ts";
import type { ServerLimits } from "./limits.ts";

/** The body of `request` as text, refused (413) past `maxBytes` whether it declares a length or not. */
export async function readBody(request: Request, maxBytes: number): Promise<string> {
  const tooLarge = () =>
    new ApiError(413, `the request body is larger than the server's limit of ${maxBytes} bytes`, {
      code: "body_too_large",
    });
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (declared > maxBytes) throw tooLarge();
  if (request.body === null) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = request.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        await reader.cancel().catch(() => {});
        throw tooLarge();
      }
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) all.set(c, (at += c.byteLength) - c.byteLength);
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(all);
  } catch {
    throw new ApiError(400, "the request body is not valid UTF-8", { code: "invalid_json" });
  }
}

/** The JSON object of `text` (400 when it is not JSON, or not an object). */
export function parseObject(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ApiError(400, `the request body is not valid JSON: ${(e as Error).message}`, {
      code: "invalid_json",
    });
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ApiError(400, "the request body must be a JSON object", { code: "invalid_json" });
  }
  return value as Record<string, unknown>;
}

type Kind = "string" | "number" | "integer" | "boolean" | "object" | "stop" | "any";

const GENERATION_FIELDS: Record<string, Kind> = {
  model: "string",
  max_tokens: "integer",
  max_completion_tokens: "integer",
  temperature: "number",
  top_p: "number",
  top_k: "integer",
  seed: "integer",
  stop: "stop",
  logit_bias: "object",
  stream: "boolean",
  stream_options: "object",
  n: "integer",
  user: "string",
  // Accepted only at their neutral value (0): the engine has no penalties yet.
  presence_penalty: "number",
  frequency_penalty: "number",
};

// deno-lint-ignore no-control-regex
const CONTROL = new RegExp(
  "[\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f]|[\\ud800-\\udbff](?![\\udc00-\\udfff])|(?<![\\ud800-\\udbff])[\\udc00-\\udfff]",
);

/** Refuses text with control characters (other than tab and newlines) or lone surrogates. */
export function checkText(text: string, param: string): void {
  const m = CONTROL.exec(text);
  if (m !== null) {
    const cp = m[0].codePointAt(0)!.toString(16).padStart(4, "0");
    throw new ApiError(
      400,
      `${param} has a control character or lone surrogate (U+${cp} at index ${m.index}); only text is served`,
      { param, code: "invalid_text" },
    );
  }
}

function checkFields(body: Record<string, unknown>, fields: Record<string, Kind>): void {
  for (const [name, value] of Object.entries(body)) {
    const kind = fields[name];
    if (kind === undefined) {
      throw new ApiError(400, `unrecognized request argument supplied: ${name}`, {
        param: name,
        code: "unknown_parameter",
      });
    }
    if (value === null || kind === "any") continue;
    const ok = kind === "integer"
      ? Number.isSafeInteger(value)
      : kind === "object"
      ? typeof value === "object" && !Array.isArray(value)
      : kind === "stop"
      ? typeof value === "string" ||
        (Array.isArray(value) && value.every((s) => typeof s === "string"))
      : typeof value === kind && (kind !== "number" || Number.isFinite(value));
    if (!ok) {
      const what = kind === "stop"
        ? "a string or an array of strings"
        : `a${kind === "integer" ? "n" : ""} ${kind}`;
      throw new ApiError(
        400,
        `${name} must be ${what}, got ${JSON.stringify(value)?.slice(0, 80)}`,
        {
          param: name,
          code: "invalid_type",
        },
      );
    }
  }
}

/** A checked generation request: the engine's fields, and what the server does itself. */
export interface GenerationBody {
  /** The engine's request (without `stream`, `n`, `signal`). */
  fields: Record<string, unknown>;
  stream: boolean;
  includeUsage: boolean;
  n: number;
}

function generationBody(
  body: Record<string, unknown>,
  limits: ServerLimits,
  extra: Record<string, Kind>,
): GenerationBody {
  checkFields(body, { ...GENERATION_FIELDS, ...extra });
  for (const p of ["presence_penalty", "frequency_penalty"]) {
    if (body[p] !== undefined && body[p] !== null && body[p] !== 0) {
      throw new ApiError(400, `${p} is not supported (only 0)`, { param: p, code: "unsupported" });
    }
  }
  const maxTokens = body.max_tokens ?? body.max_completion_tokens ?? limits.maxTokens;
  if ((maxTokens as number) > limits.maxTokens) {
    throw new ApiError(
      400,
      `max_tokens is ${maxTokens}, above the server's limit of ${limits.maxTokens}`,
      { param: "max_tokens", code: "invalid_value" },
    );
  }
  // OpenAI's range: a temperature far above it is noise, and a client's bug.
  if (typeof body.temperature === "number" && body.temperature > 2) {
    throw new ApiError(400, `temperature must be between 0 and 2, got ${body.temperature}`, {
      param: "temperature",
      code: "invalid_value",
    });
  }
  const n = (body.n ?? 1) as number;
  if (n < 1 || n > limits.maxChoices) {
    throw new ApiError(400, `n must be between 1 and ${limits.maxChoices}, got ${n}`, {
      param: "n",
      code: "invalid_value",
    });
  }
  const options = body.stream_options as { include_usage?: unknown } | null | undefined;
  if (options !== undefined && options !== null) {
    checkFields(options as Record<string, unknown>, { include_usage: "boolean" });
  }
  if (body.logit_bias !== undefined && body.logit_bias !== null) {
    for (const [k, v] of Object.entries(body.logit_bias as object)) {
      if (!/^\d+$/.test(k) || typeof v !== "number") {
        throw new ApiError(400, `logit_bias must map token ids to numbers, got "${k}": ${v}`, {
          param: "logit_bias",
          code: "invalid_type",
        });
      }
    }
  }
  for (const s of [body.stop ?? []].flat() as string[]) checkText(s, "stop");
  const fields: Record<string, unknown> = { ...body, max_tokens: maxTokens };
  for (
    const k of [
      "stream",
      "stream_options",
      "n",
      "max_completion_tokens",
      "user",
      "presence_penalty",
      "frequency_penalty",
    ]
  ) delete fields[k];
  return {
    fields,
    stream: body.stream === true,
    includeUsage: options?.include_usage === true,
    n,
  };
}

/** `POST /v1/chat/completions`' body, checked. */
export function chatBody(body: Record<string, unknown>, limits: ServerLimits): GenerationBody {
  const out = generationBody(body, limits, { messages: "any" });
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new ApiError(400, "messages must be a non-empty array", { param: "messages" });
  }
  if (messages.length > limits.maxMessages) {
    throw new ApiError(
      400,
      `messages has ${messages.length} entries, above the limit of ${limits.maxMessages}`,
      {
        param: "messages",
      },
    );
  }
  out.fields.messages = messages.map((m, i): ChatMessage => {
    const param = `messages[${i}]`;
    if (typeof m !== "object" || m === null || Array.isArray(m)) {
      throw new ApiError(400, `${param} must be an object`, { param });
    }
    checkFields(m, { role: "string", content: "any", name: "string" });
    if (!["system", "user", "assistant", "developer"].includes(m.role)) {
      throw new ApiError(
        400,
        `${param}.role must be system, user, assistant or developer, got ${JSON.stringify(m.role)}`,
        {
          param: `${param}.role`,
        },
      );
    }
    // A content may be a string or OpenAI's list of text parts.
    let content = m.content;
    if (Array.isArray(content)) {
      content = content.map((p, j) => {
        if (p?.type !== "text" || typeof p.text !== "string") {
          throw new ApiError(
            400,
            `${param}.content[${j}] must be a text part ({type: "text", text})`,
            {
              param: `${param}.content`,
            },
          );
        }
        return p.text;
      }).join("");
    }
    if (typeof content !== "string") {
      throw new ApiError(400, `${param}.content must be a string`, { param: `${param}.content` });
    }
    checkText(content, `${param}.content`);
    return { role: m.role === "developer" ? "system" : m.role, content };
  });
  return out;
}

/** `POST /v1/completions`' body, checked. */
export function completionBody(
  body: Record<string, unknown>,
  limits: ServerLimits,
): GenerationBody {
  const out = generationBody(body, limits, { prompt: "any", echo: "boolean" });
  if (body.echo === true) throw new ApiError(400, "echo is not supported", { param: "echo" });
  delete out.fields.echo;
  if (typeof body.prompt !== "string") {
    throw new ApiError(
      400,
      "prompt must be a string (token arrays and lists of prompts are not served)",
      {
        param: "prompt",
      },
    );
  }
  checkText(body.prompt, "prompt");
  return out;
}

/** `POST /v1/embeddings`' body, checked. */
export function embeddingsBody(
  body: Record<string, unknown>,
  limits: ServerLimits,
): { input: string[]; model?: string; base64: boolean; dimensions?: number } {
  checkFields(body, {
    input: "any",
    model: "string",
    encoding_format: "string",
    dimensions: "integer",
    user: "string",
  });
  const input = typeof body.input === "string" ? [body.input] : body.input;
  if (!Array.isArray(input) || input.length === 0 || input.some((s) => typeof s !== "string")) {
    throw new ApiError(
      400,
      "input must be a string or a non-empty array of strings (token arrays are not served)",
      {
        param: "input",
      },
    );
  }
  if (input.length > limits.maxEmbeddingInputs) {
    throw new ApiError(
      400,
      `input has ${input.length} entries, above the limit of ${limits.maxEmbeddingInputs}`,
      {
        param: "input",
      },
    );
  }
  input.forEach((s, i) => checkText(s, `input[${i}]`));
  const format = body.encoding_format ?? "float";
  if (format !== "float" && format !== "base64") {
    throw new ApiError(
      400,
      `encoding_format must be float or base64, got ${JSON.stringify(format)}`,
      {
        param: "encoding_format",
      },
    );
  }
  return {
    input,
    model: body.model as string | undefined,
    base64: format === "base64",
    dimensions: body.dimensions as number | undefined,
  };
}
