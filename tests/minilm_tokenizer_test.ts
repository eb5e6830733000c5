/**
 * all-MiniLM-L6-v2's tokenizer (models/minilm/tokenizer.ts) gives Hugging Face's `tokenizers`
 * ids on the whole Unicode range: every code point but the surrogates alone and between two
 * letters, and seeded random strings mixing ASCII, whitespace, controls, accents and any plane.
 * The reference is testdata/minilm/tokenizer_reference.json, written by
 * `bash tools/tokenizer_reference.sh` (`tokenizers` 0.22.2 in a venv of its own); see that script
 * for its format. The sentences of tests/minilm_test.ts check only what sentences hold.
 *
 * Needs the model's tokenizer.json from .weights/ (`bash tools/fetch_weights.sh`): ignored with a
 * message without it, failing when `RELAXVM_REQUIRE_WEIGHTS=1`.
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";
import { type TokenizerJSON, WordPieceTokenizer } from "../models/minilm/tokenizer.ts";
import { ignoreWithoutWeights, MINILM_DIR, requireWeights } from "./_minilm_checks.ts";

interface Reference {
  tokenizers: string;
  tokenizer_json_sha256: string;
  block: number;
  random_count: number;
  random_seed: number;
  single: [number, number, number[]][];
  context: string[];
  random: string[];
}

const ignore = ignoreWithoutWeights();

async function load(): Promise<{ tokenizer: WordPieceTokenizer; ref: Reference }> {
  requireWeights();
  const bytes = await Deno.readFile(new URL("tokenizer.json", MINILM_DIR));
  const ref: Reference = JSON.parse(
    await Deno.readTextFile(
      new URL("../testdata/minilm/tokenizer_reference.json", import.meta.url),
    ),
  );
  const sha = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)))
    .map((b) => b.toString(16).padStart(2, "0")).join("");
  assertEquals(
    sha,
    ref.tokenizer_json_sha256,
    "the reference was made from another tokenizer.json",
  );
  const json: TokenizerJSON = JSON.parse(new TextDecoder().decode(bytes));
  return { tokenizer: new WordPieceTokenizer(json), ref };
}

/** The ids of `text` without [CLS] and [SEP], as `encode(text, add_special_tokens=False)`. */
function ids(tokenizer: WordPieceTokenizer, text: string): number[] {
  return tokenizer.encode(text).slice(1, -1);
}

/** The same FNV-1a (32 bits, over UTF-8) as tools/tokenizer_reference.py. */
function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(text)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h.toString(16).padStart(8, "0");
}

const idsText = (results: number[][]) => results.map((r) => r.join(",")).join(";");

function* codePoints(): Generator<number> {
  for (let cp = 0; cp < 0x110000; cp++) if (cp < 0xd800 || cp > 0xdfff) yield cp;
}

/** mulberry32, as tools/tokenizer_reference.py writes it. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1) >>> 0;
    t = (t ^ ((t + (Math.imul(t ^ (t >>> 7), t | 61) >>> 0)) >>> 0)) >>> 0;
    return (t ^ (t >>> 14)) >>> 0;
  };
}

const SPECIALS = [
  0x00,
  0x09,
  0x0a,
  0x0d,
  0x1f,
  0x20,
  0x7f,
  0x85,
  0xa0,
  0xad,
  0x301,
  0x308,
  0x1680,
  0x2000,
  0x200b,
  0x2028,
  0x2029,
  0x202f,
  0x3000,
  0xfdd0,
  0xfeff,
  0xfffd,
  0xffff,
  0x1f600,
  0xe0001,
  0x10ffff,
];

/** The reference's random strings, from the same generator and the same choices. */
function randomStrings(count: number, seed: number): string[] {
  const next = mulberry32(seed);
  const out: string[] = [];
  for (let s = 0; s < count; s++) {
    const n = 1 + next() % 24;
    const cps: number[] = [];
    for (let i = 0; i < n; i++) {
      const kind = next() % 8;
      const r = next();
      let cp = kind <= 2
        ? 0x20 + r % 95
        : kind === 3
        ? SPECIALS[r % SPECIALS.length]
        : kind === 4
        ? 0xc0 + r % 0x190
        : kind === 5
        ? r % 0x10000
        : r % 0x110000;
      if (cp >= 0xd800 && cp <= 0xdfff) cp += 0x800;
      cps.push(cp);
    }
    out.push(String.fromCodePoint(...cps));
  }
  return out;
}

Deno.test({
  name: "minilm tokenizer: every code point alone gives tokenizers' ids",
  ignore,
  async fn() {
    const { tokenizer, ref } = await load();
    const wrong: string[] = [];
    let checked = 0;
    for (const [first, count, want] of ref.single) {
      for (let cp = first; cp < first + count; cp++) {
        const got = ids(tokenizer, String.fromCodePoint(cp));
        checked++;
        if (got.join() !== want.join()) wrong.push(`U+${hex(cp)}: ours [${got}], theirs [${want}]`);
      }
    }
    assertEquals(wrong.slice(0, 20), [], `${wrong.length} code points differ`);
    assertEquals(checked, 0x110000 - 0x800);
  },
});

Deno.test({
  name: "minilm tokenizer: every code point between two letters gives tokenizers' ids",
  ignore,
  async fn() {
    const { tokenizer, ref } = await load();
    const blocks = new Map<number, number[][]>();
    for (const cp of codePoints()) {
      const b = Math.floor(cp / ref.block);
      if (!blocks.has(b)) blocks.set(b, []);
      blocks.get(b)!.push(ids(tokenizer, `a${String.fromCodePoint(cp)}b`));
    }
    assertEquals(blocks.size, ref.context.length);
    // The reference lists the blocks in order, without the surrogates' (U+D800..U+DFFF).
    const wrong = [...blocks].filter(([, results], i) => fnv1a(idsText(results)) !== ref.context[i])
      .map(([b, results]) => {
        const sample = results.slice(0, 3).map((r) => `[${r}]`).join(" ");
        return `block U+${hex(b * ref.block)}: ours ${sample} …; ` +
          `theirs: bash tools/tokenizer_reference.sh --show 0x${hex(b * ref.block)}`;
      });
    assertEquals(wrong.slice(0, 20), [], `${wrong.length} blocks differ`);
  },
});

Deno.test({
  name: "minilm tokenizer: seeded random strings give tokenizers' ids",
  ignore,
  async fn() {
    const { tokenizer, ref } = await load();
    const strings = randomStrings(ref.random_count, ref.random_seed);
    assert(strings.some((s) => s.includes("\u0085")) && strings.some((s) => s.includes("\ufdd0")));
    const wrong = strings.flatMap((s, i) =>
      fnv1a(idsText([ids(tokenizer, s)])) === ref.random[i]
        ? []
        : [`${i} ${JSON.stringify(s)}: ours ${ids(tokenizer, s)}; theirs: --random ${i}`]
    );
    assertEquals(wrong.slice(0, 20), [], `${wrong.length} strings differ`);
  },
});

Deno.test({
  name:
    "minilm tokenizer: the two differences issue 32 found: U+0085 is removed (not a space), U+FDD0 is [UNK]",
  ignore,
  async fn() {
    const { tokenizer } = await load();
    const unk = 100;
    assertEquals(ids(tokenizer, "a\u0085b"), ids(tokenizer, "ab")); // not [a, b]
    assertEquals(ids(tokenizer, "\ufdd0"), [unk]);
  },
});

function hex(n: number): string {
  return n.toString(16).toUpperCase().padStart(4, "0");
}
