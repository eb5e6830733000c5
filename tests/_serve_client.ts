/**
 * The clients of `tests/serve_test.ts`, run as a child with loopback network access
 * (the test runner has none). Each scenario prints one JSON line of what it saw:
 *
 *     deno run --allow-net=127.0.0.1 --allow-env --allow-read --allow-run \
 *       tests/_serve_client.ts <openai|tvm|hostile|disconnect|drain|load> <base> [args]
 *
 * `openai` drives the server with the official `openai` npm package, a client nobody
 * here wrote; `tvm <base> <model>` does the same to a TVM package served with
 * `--tokenizer ids`.
 *
 * @module
 */

// deno-lint-ignore no-import-prefix -- a test client, kept out of the library's deno.json
import OpenAI from "npm:openai@6.49.0";

const [scenario, base, ...rest] = Deno.args;
const MODEL = "relaxvm-gpt-tiny";

async function post(
  path: string,
  body: string | Uint8Array<ArrayBuffer>,
  headers: HeadersInit = {},
) {
  const r = await fetch(`${base}${path}`, {
    method: "POST",
    body,
    headers: { "content-type": "application/json", ...headers },
  });
  const text = await r.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    // Not JSON: the test sees the text.
  }
  return { status: r.status, json, text, retryAfter: r.headers.get("retry-after") };
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  return m === null ? NaN : Number(m[1]);
}

async function openai() {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "none", maxRetries: 0 });
  const messages = [{ role: "user" as const, content: "Tell me a story" }];
  const whole = await client.chat.completions.create({
    model: MODEL,
    messages,
    max_tokens: 24,
    temperature: 0.8,
    top_p: 0.9,
    seed: 7,
  });
  const stream = await client.chat.completions.create({
    model: MODEL,
    messages,
    max_tokens: 24,
    temperature: 0.8,
    top_p: 0.9,
    seed: 7,
    stream: true,
    stream_options: { include_usage: true },
  });
  let streamed = "", chunks = 0, role = "", finish: string | null = null;
  let usage: unknown = null;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.delta.role) role = c.delta.role;
    streamed += c.delta.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
  const completion = await client.completions.create({
    model: MODEL,
    prompt: "Once upon",
    max_tokens: 10,
    temperature: 0,
    stop: ["zz"],
  });
  const completionStream = await client.completions.create({
    model: MODEL,
    prompt: "Once upon",
    max_tokens: 10,
    temperature: 0,
    stream: true,
  });
  let completionStreamed = "";
  for await (const c of completionStream) completionStreamed += c.choices[0]?.text ?? "";
  const two = await client.chat.completions.create({
    model: MODEL,
    messages,
    max_tokens: 6,
    seed: 3,
    n: 2,
    logit_bias: { "65": 100 },
  });
  let badRequest: unknown = null;
  try {
    await client.chat.completions.create({ model: MODEL, messages, temperature: -1 });
  } catch (e) {
    const err = e as { status?: number; error?: unknown; constructor: { name: string } };
    badRequest = { status: err.status, error: err.error, class: err.constructor.name };
  }
  let unknownModel: unknown = null;
  try {
    await client.chat.completions.create({ model: "gpt-4o", messages });
  } catch (e) {
    unknownModel = (e as { status?: number }).status;
  }
  const models = await client.models.list();
  let embeddings: unknown = null;
  if (rest.includes("--embeddings")) {
    const r = await client.embeddings.create({
      model: "all-MiniLM-L6-v2",
      input: ["How do I bake bread?", "Knead the dough.", "Stocks fell."],
    });
    const floats = await client.embeddings.create({
      model: "all-MiniLM-L6-v2",
      input: "Knead the dough.",
      encoding_format: "float",
    });
    embeddings = {
      count: r.data.length,
      dims: r.data[0].embedding.length,
      vectors: r.data.map((d) => d.embedding),
      float: floats.data[0].embedding,
      usage: r.usage,
    };
  }
  console.log(JSON.stringify({
    whole: whole.choices[0].message.content,
    wholeFinish: whole.choices[0].finish_reason,
    wholeUsage: whole.usage,
    streamed,
    chunks,
    role,
    finish,
    usage,
    completion: completion.choices[0].text,
    completionStreamed,
    two: two.choices.map((c) => ({ index: c.index, content: c.message.content })),
    badRequest,
    unknownModel,
    models: models.data.map((m) => m.id),
    embeddings,
  }));
}

async function hostile() {
  const out: Record<string, unknown> = {};
  const chat = (extra: Record<string, unknown>) =>
    JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 2, ...extra });
  out.malformed = await post("/v1/chat/completions", '{"messages": [');
  out.notObject = await post("/v1/completions", "[1,2,3]");
  out.huge = await post("/v1/completions", new Uint8Array(2 << 20).fill(32));
  out.hugeChunked = await post(
    "/v1/completions",
    new Uint8Array(2 << 20).fill(32),
    { "transfer-encoding": "chunked" },
  );
  out.wrongType = await post("/v1/chat/completions", chat({ max_tokens: "ten" }));
  out.wrongMessages = await post("/v1/chat/completions", JSON.stringify({ messages: "hi" }));
  out.unknownField = await post("/v1/chat/completions", chat({ tools: [] }));
  out.control = await post(
    "/v1/completions",
    JSON.stringify({ prompt: "\u0000\u0001\u0002\u001b[31m", max_tokens: 2 }),
  );
  out.loneSurrogate = await post("/v1/completions", '{"prompt": "a\\ud800b", "max_tokens": 2}');
  out.tooManyTokens = await post("/v1/chat/completions", chat({ max_tokens: 100000 }));
  out.badTemperature = await post("/v1/chat/completions", chat({ temperature: 1e9 }));
  out.longPrompt = await post(
    "/v1/completions",
    JSON.stringify({ prompt: "x".repeat(5000), max_tokens: 2 }),
  );
  out.notFound = await post("/v1/nothing", "{}");
  const get = await fetch(`${base}/v1/completions`);
  out.wrongMethod = { status: get.status, json: await get.json() };
  // Thousands of tiny requests, 50 at a time: health checks and junk bodies.
  const statuses: Record<number, number> = {};
  for (let i = 0; i < 2000; i += 50) {
    const batch = await Promise.all(
      Array.from(
        { length: 50 },
        (_, j) =>
          (j % 2 === 0
            ? fetch(`${base}/health`)
            : fetch(`${base}/v1/completions`, { method: "POST", body: "x" })).then(async (r) => {
              await r.body?.cancel();
              return r.status;
            }),
      ),
    );
    for (const s of batch) statuses[s] = (statuses[s] ?? 0) + 1;
  }
  out.tiny = statuses;
  // Raw bytes that are not HTTP.
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: Number(new URL(base).port) });
  await conn.write(new TextEncoder().encode("\x00\x01GARBAGE\r\n\r\n"));
  const buf = new Uint8Array(1024);
  const n = await conn.read(buf).catch(() => null);
  out.garbage = n === null
    ? "closed"
    : new TextDecoder().decode(buf.subarray(0, n)).split("\r\n")[0];
  conn.close();
  // A full queue: more requests at once than the queue holds (the server runs --max-queue 2).
  const burst = await Promise.all(
    Array.from(
      { length: 24 },
      () => post("/v1/completions", JSON.stringify({ prompt: "burst", max_tokens: 40 })),
    ),
  );
  out.burst = {
    ok: burst.filter((r) => r.status === 200).length,
    limited: burst.filter((r) => r.status === 429).length,
    other: burst.filter((r) => r.status !== 200 && r.status !== 429).map((r) => r.text),
    retryAfter: burst.find((r) => r.status === 429)?.retryAfter,
    limitedBody: burst.find((r) => r.status === 429)?.json,
  };
  // And it still serves.
  out.after = await post("/v1/completions", JSON.stringify({ prompt: "still", max_tokens: 3 }));
  console.log(JSON.stringify(out));
}

async function disconnect() {
  const total = await metric("relaxvm_kv_total_pages");
  const controller = new AbortController();
  const r = await fetch(`${base}/v1/completions`, {
    method: "POST",
    body: JSON.stringify({ prompt: "leave early", max_tokens: 200, stream: true }),
    signal: controller.signal,
  });
  const reader = r.body!.getReader();
  await reader.read();
  const runningBefore = await metric("relaxvm_running_sequences");
  controller.abort();
  let running = NaN, free = NaN;
  for (let i = 0; i < 100; i++) {
    running = await metric("relaxvm_running_sequences");
    free = await metric("relaxvm_kv_free_pages");
    if (running === 0 && free === total) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const tokens = await metric("relaxvm_generated_tokens_total");
  console.log(JSON.stringify({ runningBefore, running, free, total, tokens }));
}

/** Streams `count` requests; once each has its first token, SIGTERMs the server `pid`. */
async function drain() {
  const [pid, count] = [Number(rest[0]), Number(rest[1])];
  let started = 0;
  let allStarted: () => void;
  const ready = new Promise<void>((r) => (allStarted = r));
  const runs = Array.from({ length: count }, async () => {
    const r = await fetch(`${base}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ prompt: "drain me", max_tokens: 120, stream: true }),
    });
    let text = "", finish = null, first = true;
    const lines = r.body!.pipeThrough(new TextDecoderStream());
    let buffer = "";
    for await (const piece of lines) {
      buffer += piece;
      let at;
      while ((at = buffer.indexOf("\n\n")) >= 0) {
        const data = buffer.slice(6, at);
        buffer = buffer.slice(at + 2);
        if (data === "[DONE]") continue;
        const chunk = JSON.parse(data);
        if (chunk.error) return { error: chunk.error };
        text += chunk.choices[0].text;
        finish = chunk.choices[0].finish_reason ?? finish;
        if (first && ++started === count) allStarted();
        first = false;
      }
    }
    return { status: r.status, length: text.length, finish };
  });
  await ready;
  Deno.kill(pid, "SIGTERM");
  let health = 0;
  for (let i = 0; i < 200 && health !== 503; i++) {
    health = await fetch(`${base}/health`).then(async (r) => (await r.body?.cancel(), r.status))
      .catch(() => -1);
    if (health === -1) break;
  }
  const late = await post("/v1/completions", '{"prompt":"late","max_tokens":2}').catch((e) => ({
    status: -1,
    text: String(e),
  }));
  const results = await Promise.all(runs);
  console.log(JSON.stringify({ health, late: late.status, results }));
}

/** `clients` concurrent clients through `base` for `requests` requests in all; counts outcomes. */
async function load() {
  const [clients, requests] = [Number(rest[0]), Number(rest[1])];
  let next = 0;
  const outcomes: Record<string, number> = {};
  await Promise.all(Array.from({ length: clients }, async () => {
    while (next < requests) {
      next++;
      const r = await post(
        "/v1/completions",
        JSON.stringify({ prompt: "load", max_tokens: 24, stream: false }),
      ).catch((e) => ({ status: `fetch: ${e.message}` }));
      outcomes[r.status] = (outcomes[r.status] ?? 0) + 1;
    }
  }));
  console.log(JSON.stringify({ outcomes }));
}

/**
 * Through a load balancer: `clients` clients stream `requests` completions in all; once a
 * quarter have finished, SIGTERMs the replica `pid`. Counts outcomes: every request must
 * end with its `[DONE]`.
 */
async function balanced() {
  const [pid, clients, requests] = [Number(rest[0]), Number(rest[1]), Number(rest[2])];
  // Wait until the balancer sees both replicas (its checks run every 500 ms).
  for (let i = 0; i < 100; i++) {
    const r = await fetch(`${base}/health`).catch(() => null);
    await r?.body?.cancel();
    if (r?.status === 200) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 1500));
  let next = 0, finished = 0, killedAt = -1;
  const outcomes: Record<string, number> = {};
  await Promise.all(Array.from({ length: clients }, async () => {
    while (next < requests) {
      next++;
      let outcome = "";
      try {
        const r = await fetch(`${base}/v1/completions`, {
          method: "POST",
          body: JSON.stringify({ prompt: "balanced", max_tokens: 100, stream: true }),
        });
        const text = await r.text();
        outcome = r.status !== 200
          ? `status ${r.status}: ${text.slice(0, 200)}`
          : text.includes('"error"')
          ? `error event: ${text.slice(text.indexOf('"error"'), 200)}`
          : text.endsWith("data: [DONE]\n\n")
          ? "ok"
          : "cut";
      } catch (e) {
        outcome = `fetch: ${(e as Error).message}`;
      }
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      if (++finished === Math.floor(requests / 4)) {
        killedAt = finished;
        Deno.kill(pid, "SIGTERM");
      }
    }
  }));
  console.log(JSON.stringify({ outcomes, killedAt }));
}

/** A TVM package: a chat whole and streamed with one seed, a bad id, the models listed. */
async function tvm() {
  const [model] = rest;
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "none", maxRetries: 0 });
  const request = {
    model,
    messages: [{ role: "user" as const, content: "1 2 3" }, {
      role: "user" as const,
      content: "4 5",
    }],
    max_tokens: 12,
    temperature: 0.9,
    seed: 11,
  };
  const whole = await client.chat.completions.create(request);
  const stream = await client.chat.completions.create({ ...request, stream: true });
  let streamed = "", chunks = 0, finish: string | null = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.delta.content) chunks++;
    streamed += c.delta.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
  const other = await client.chat.completions.create({ ...request, seed: 12 });
  let notAnId: unknown = null;
  try {
    await client.completions.create({ model, prompt: "1 two 3", max_tokens: 2 });
  } catch (e) {
    const err = e as { status?: number; error?: { param?: string; message?: string } };
    notAnId = { status: err.status, param: err.error?.param, message: err.error?.message };
  }
  console.log(JSON.stringify({
    whole: whole.choices[0].message.content,
    wholeFinish: whole.choices[0].finish_reason,
    usage: whole.usage,
    model: whole.model,
    streamed,
    chunks,
    finish,
    other: other.choices[0].message.content,
    notAnId,
    models: (await client.models.list()).data.map((m) => m.id),
  }));
}

const scenarios: Record<string, () => Promise<void>> = {
  openai,
  tvm,
  hostile,
  disconnect,
  drain,
  load,
  balanced,
};
await scenarios[scenario]();
