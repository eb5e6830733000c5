/**
 * The child of `serve_test.ts`' event loop test (it needs the network): the engine
 * steps a model whose every forward holds the thread for 10 ms, while a client
 * connects to a listener on the same thread. Prints how many forwards ran before the
 * connection was accepted: the steps a health check or another client's request waits.
 *
 *     deno run --allow-net=127.0.0.1 tests/_engine_io_child.ts
 *
 * @module
 */

import { Engine, type EngineModel } from "../mod.ts";

let forwards = 0;
const lengths = new Map<number, number>();
const model: EngineModel = {
  name: "busy",
  vocabSize: 8,
  maxSequenceLength: 4096,
  pageSize: 16,
  totalPages: 256,
  maxBatchSize: 4,
  prefillChunkSize: 4,
  tokenizer: { encode: (t) => [...t].map(() => 1), decode: (ids) => "x".repeat(ids.length) },
  chatTemplate: (m) => m.map((x) => x.content).join(""),
  freePages: () => 256 - [...lengths.values()].reduce((a, n) => a + Math.ceil(n / 16), 0),
  addSequence: (id) => void lengths.set(id, 0),
  removeSequence: (id) => void lengths.delete(id),
  forward: (entries) => {
    forwards++;
    const t = performance.now();
    while (performance.now() - t < 10); // a forward's synchronous kernels
    for (const e of entries) lengths.set(e.seqId, lengths.get(e.seqId)! + e.tokens.length);
    return Promise.resolve(entries.map(() => new Float32Array(8).fill(1)));
  },
};
const engine = new Engine(model);
const done = engine.completions.create({ prompt: "x".repeat(200), max_tokens: 100 });
// Let the engine get going, then connect.
while (forwards < 3) await new Promise((r) => setTimeout(r, 0));
const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
const before = forwards;
const accepted = listener.accept().then((c) => (c.close(), forwards - before));
const client = await Deno.connect({ hostname: "127.0.0.1", port: listener.addr.port });
const steps = await accepted;
client.close();
listener.close();
await done;
console.log(JSON.stringify({ steps, forwards }));
