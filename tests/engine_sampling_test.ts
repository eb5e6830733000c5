/**
 * The engine's per-request sampling (engine/sampler.ts) and text stream
 * (engine/text_stream.ts) on their own: top-k, top-p, logit bias and the seed; stop
 * sequences across token boundaries and characters cut between tokens.
 *
 * @module
 */

import { assert, assertEquals, assertThrows } from "@std/assert";
import { checkSampling, sampleToken, seededUniform } from "../engine/sampler.ts";
import { TextStream } from "../engine/text_stream.ts";
import { ByteTokenizer } from "../models/gpt/paged_session.ts";

const logits = Float32Array.from([0.5, 2, 1.9, -1, 1.8, 0]); // order: 1, 2, 4, 0, 5, 3

function draws(params: Parameters<typeof checkSampling>[0], n = 400): Map<number, number> {
  const p = checkSampling(params, logits.length, "test");
  const u = seededUniform(p.seed);
  const counts = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    const id = sampleToken(logits, p, u);
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

Deno.test("top-k keeps the k likeliest ids, top-p the shortest prefix reaching the mass", () => {
  assertEquals([...draws({ topK: 1, seed: 1 }).keys()], [1]);
  assertEquals([...draws({ topK: 2, seed: 2 }).keys()].sort(), [1, 2]);
  assertEquals([...draws({ topP: 1e-6, seed: 3 }).keys()], [1]);
  // softmax: ids 1, 2, 4 hold about 0.29, 0.26, 0.24 of the mass; 0.5 needs the first two.
  assertEquals([...draws({ topP: 0.5, seed: 4 }).keys()].sort(), [1, 2]);
  assertEquals(draws({ seed: 5 }, 2000).size, 6);
  assertEquals([...draws({ temperature: 0 }).keys()], [1]);
});

Deno.test("logit bias moves the choice, -100 bans, and a seed repeats its draws", () => {
  assertEquals([...draws({ temperature: 0, logitBias: { 1: -100 } }).keys()], [2]);
  assertEquals([...draws({ temperature: 0, logitBias: { "3": 5 } }).keys()], [3]);
  assertEquals([...draws({ logitBias: { 0: 100 }, seed: 9 }).keys()], [0]);
  assertEquals(draws({ seed: 6 }), draws({ seed: 6 }));
  const u = seededUniform(7);
  for (let i = 0; i < 1000; i++) {
    const x = u();
    assert(x >= 0 && x < 1);
  }
  assertThrows(() => checkSampling({ topP: 0 }, 6, "who"), RangeError, "who: top_p");
  assertThrows(() => checkSampling({ topK: 1.5 }, 6, "who"), RangeError, "top_k");
  assertThrows(() => checkSampling({ logitBias: { 2: 101 } }, 6, "who"), RangeError, "-100..100");
});

/** The pieces a stream lets through for `text`'s bytes, one token each, and the rest. */
function stream(text: string, stops: string[]): { pieces: string[]; stopped: boolean } {
  const s = new TextStream(new ByteTokenizer(), stops);
  const pieces: string[] = [];
  for (const b of new TextEncoder().encode(text)) {
    pieces.push(s.push(b));
    if (s.stopped) return { pieces, stopped: true };
  }
  pieces.push(s.flush());
  return { pieces, stopped: false };
}

Deno.test("a stop sequence across tokens ends the text before it; a near miss is let through", () => {
  const hit = stream("hello world", ["o w"]);
  assertEquals(hit.pieces.join(""), "hell");
  assertEquals(hit.stopped, true);
  // "o" and "o " are held back while they may begin "o w", then let through with the "t".
  const miss = stream("hello there", ["o w"]);
  assertEquals(miss.pieces.join(""), "hello there");
  assertEquals(miss.pieces.slice(4, 7), ["", "", "o t"]);
  assertEquals(miss.stopped, false);
  assertEquals(stream("abc", []).pieces.join(""), "abc");
});

Deno.test("a character cut between tokens is held back until it is whole", () => {
  const { pieces } = stream("é!", []); // é is two bytes
  assertEquals(pieces, ["", "é", "!", ""]);
});
