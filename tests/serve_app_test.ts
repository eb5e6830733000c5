/**
 * The server's routes without a socket: `ServerApp.handle(request)` over a toy model
 * whose forwards wait until the test lets them go, so queueing, draining and metrics
 * are checked step by step (the socket, real clients and real models are
 * `serve_test.ts`').
 */
import { assert, assertEquals, assertMatch } from "@std/assert";
import { Engine, type EngineModel } from "../mod.ts";
import { ServerApp } from "../server/app.ts";
import { Histogram } from "../server/metrics.ts";
import { readBody } from "../server/requests.ts";

/** A model that counts (logits favor last + 1) and whose forwards wait for `release()`. */
function gatedModel(maxBatchSize: number) {
  const lengths = new Map<number, number>();
  const gates: (() => void)[] = [];
  const model: EngineModel = {
    name: "counter",
    vocabSize: 128,
    maxSequenceLength: 64,
    pageSize: 16,
    totalPages: 16,
    maxBatchSize,
    prefillChunkSize: 64,
    tokenizer: {
      encode: (text) => [...text].map((c) => c.charCodeAt(0)),
      decode: (ids) => String.fromCharCode(...ids),
    },
    chatTemplate: (messages) => messages.map((m) => m.content).join(""),
    freePages: () => 16 - [...lengths.values()].reduce((a, n) => a + Math.ceil(n / 16), 0),
    addSequence: (id) => void lengths.set(id, 0),
    removeSequence: (id) => void lengths.delete(id),
    forward: async (entries) => {
      await new Promise<void>((r) => gates.push(r));
      return entries.map(({ seqId, tokens }) => {
        lengths.set(seqId, lengths.get(seqId)! + tokens.length);
        const logits = new Float32Array(128);
        logits[(tokens[tokens.length - 1] + 1) % 128] = 1;
        return logits;
      });
    },
  };
  return { model, release: () => gates.splice(0).forEach((g) => g()), waiting: () => gates.length };
}

const post = (path: string, body: unknown) =>
  new Request(`http://x${path}`, { method: "POST", body: JSON.stringify(body) });
const tick = () => new Promise((r) => setTimeout(r, 1));

/** Releases forwards until `promise` settles. */
async function pump<T>(gate: { release(): void }, promise: Promise<T>): Promise<T> {
  let done = false;
  promise.finally(() => (done = true)).catch(() => {});
  while (!done) {
    gate.release();
    await tick();
  }
  return await promise;
}

Deno.test("serve app: a full queue answers 429 with Retry-After; the queued ones complete", async () => {
  const gate = gatedModel(1);
  const app = new ServerApp({ generation: { engine: new Engine(gate.model), name: "counter" } }, {
    maxQueue: 2,
  });
  const body = { prompt: "a", max_tokens: 3, temperature: 0 };
  const first = app.handle(post("/v1/completions", body));
  while (gate.waiting() === 0) await tick(); // running, in its first forward
  const queued = [
    app.handle(post("/v1/completions", body)),
    app.handle(post("/v1/completions", body)),
  ];
  await tick();
  const refused = await app.handle(post("/v1/completions", body));
  assertEquals(refused.status, 429);
  assertEquals(refused.headers.get("retry-after"), "1");
  assertEquals((await refused.json()).error.code, "queue_full");
  for (const r of await pump(gate, Promise.all([first, ...queued]))) {
    assertEquals(r.status, 200);
    assertEquals((await r.json()).choices[0].text, "bcd");
  }
  const metrics = await (await app.handle(new Request("http://x/metrics"))).text();
  assertMatch(metrics, /relaxvm_requests_total\{endpoint="\/v1\/completions",status="429"\} 1\n/);
  assertMatch(metrics, /relaxvm_requests_total\{endpoint="\/v1\/completions",status="200"\} 3\n/);
  assertMatch(metrics, /relaxvm_kv_free_pages 16\n/);
});

Deno.test("serve app: draining is not ready at once, refuses new work, lets a stream finish", async () => {
  const gate = gatedModel(4);
  const app = new ServerApp({ generation: { engine: new Engine(gate.model), name: "counter" } });
  const stream = await app.handle(
    post("/v1/completions", { prompt: "a", max_tokens: 3, temperature: 0, stream: true }),
  );
  while (gate.waiting() === 0) await tick();
  const drained = app.drain();
  assertEquals((await app.handle(new Request("http://x/health"))).status, 503);
  assertEquals((await app.handle(new Request("http://x/health/live"))).status, 200);
  const late = await app.handle(post("/v1/completions", { prompt: "b" }));
  assertEquals([late.status, (await late.json()).error.code], [503, "server_shutting_down"]);
  const text = await pump(gate, stream.text());
  assert(text.endsWith("data: [DONE]\n\n"), text);
  await drained;
  assertEquals(app.active, 0);
});

Deno.test("serve app: a body past the limit is refused whether or not it declares a length", async () => {
  const chunks = new ReadableStream({
    pull(c) {
      c.enqueue(new Uint8Array(1000));
    },
  });
  const err = await readBody(new Request("http://x", { method: "POST", body: chunks }), 4096)
    .catch((e) => e);
  assertEquals([err.status, err.code], [413, "body_too_large"]);
  const declared = new Request("http://x", {
    method: "POST",
    body: "x",
    headers: { "content-length": "999999" },
  });
  assertEquals((await readBody(declared, 4096).catch((e) => e)).status, 413);
});

Deno.test("serve app: histogram buckets are cumulative", () => {
  const h = new Histogram();
  for (const s of [0.002, 0.02, 3]) h.observe(s);
  const lines = h.lines("t");
  assert(lines.includes('t_bucket{le="0.0025"} 1'));
  assert(lines.includes('t_bucket{le="0.025"} 2'));
  assert(lines.includes('t_bucket{le="5"} 3'));
  assert(lines.includes('t_bucket{le="+Inf"} 3'));
  assert(lines.includes("t_count 3"));
});
