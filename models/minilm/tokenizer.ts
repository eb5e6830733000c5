/**
 * BERT's WordPiece tokenizer, read from a Hugging Face `tokenizer.json`
 * (all-MiniLM-L6-v2's, uncased), written here rather than taken from a
 * package: the well-kept JavaScript ones (`@huggingface/transformers`,
 * `tokenizers` bindings) pull in a whole inference stack or native code,
 * while the algorithm is a page. It follows the Rust `tokenizers` crate
 * step by step; `tests/minilm_tokenizer_test.ts` checks its ids against
 * that crate's on every code point (alone and between two letters) and on
 * seeded random strings, and `tests/minilm_test.ts` on every reference
 * sentence:
 *
 * 1. Added tokens (`[CLS]`, `[SEP]`, … in the text) are split off first and
 *    map to their ids unchanged.
 * 2. `BertNormalizer`: drop NUL, U+FFFD, controls (U+0085 too), format
 *    characters and private use (unassigned code points stay), turn
 *    whitespace into spaces, put spaces around CJK ideographs, strip accents
 *    (NFD, drop non-spacing marks) and lowercase each character.
 * 3. `BertPreTokenizer`: split on whitespace, and make every punctuation
 *    character (ASCII punctuation or Unicode `P*`) a word of its own.
 *
 * The classes of steps 2 and 3 are `tokenizers`' own (unicode_classes.ts,
 * read from what it does with each code point), not the engine's `\p{…}`:
 * its Unicode tables are older, so a mark or format character assigned
 * since is text to it, and engines differ in their Unicode version.
 * 4. `WordPiece`: longest-match-first over the vocabulary, later pieces
 *    prefixed `##`; a word with no split, or longer than 100 characters,
 *    becomes `[UNK]`.
 * 5. `[CLS] … [SEP]`, truncated to `maxTokens`.
 *
 * @module
 */

import { DROPPED, ISOLATED, SPACE } from "./unicode_classes.ts";

/** The parts of `tokenizer.json` this tokenizer reads. */
export interface TokenizerJSON {
  /** The WordPiece model: its vocabulary and settings. */
  model: {
    type: string;
    vocab: Record<string, number>;
    unk_token: string;
    continuing_subword_prefix: string;
    max_input_chars_per_word: number;
  };
  /** Tokens matched in the text before anything else (`[CLS]`, `[SEP]`, …). */
  added_tokens?: { id: number; content: string }[];
  /** The normalizer; only `lowercase` is read (default true). */
  normalizer?: { type: string; lowercase?: boolean } | null;
}

/** Whether `cp` is in `ranges` (sorted inclusive [first, last] pairs): a binary search. */
function within(ranges: readonly number[], cp: number): boolean {
  let lo = 0, hi = ranges.length / 2 - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (cp < ranges[2 * mid]) hi = mid - 1;
    else if (cp > ranges[2 * mid + 1]) lo = mid + 1;
    else return true;
  }
  return false;
}

const isSpace = (cp: number) => within(SPACE, cp);
const isDropped = (cp: number) => within(DROPPED, cp);

/** The CJK ideograph blocks BERT isolates (as `tokenizers`' `is_chinese_char`). */
function isChinese(cp: number): boolean {
  return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) || (cp >= 0x2a700 && cp <= 0x2b73f) ||
    (cp >= 0x2b740 && cp <= 0x2b81f) || (cp >= 0x2b920 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0x2f800 && cp <= 0x2fa1f);
}

function isPunctuation(cp: number): boolean {
  const ascii = (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
    (cp >= 123 && cp <= 126);
  return ascii || within(ISOLATED, cp);
}

/** A WordPiece tokenizer with its vocabulary. */
export class WordPieceTokenizer {
  readonly #vocab: Map<string, number>;
  readonly #added: Map<string, number>;
  readonly #addedPattern: RegExp | undefined;
  readonly #unk: number;
  readonly #prefix: string;
  readonly #maxWordChars: number;
  readonly #lowercase: boolean;
  /** Id of `[CLS]`, which starts every sequence. */
  readonly cls: number;
  /** Id of `[SEP]`, which ends every sequence. */
  readonly sep: number;
  /** Id of `[PAD]`, which fills padded batches. */
  readonly pad: number;

  /** Reads the parts of a parsed `tokenizer.json` it needs; a `TypeError` for another model. */
  constructor(json: TokenizerJSON) {
    if (json.model?.type !== "WordPiece") {
      throw new TypeError(`tokenizer.json: a WordPiece model expected, got ${json.model?.type}`);
    }
    this.#vocab = new Map(Object.entries(json.model.vocab));
    this.#added = new Map((json.added_tokens ?? []).map((t) => [t.content, t.id]));
    const escaped = [...this.#added.keys()].sort((a, b) => b.length - a.length)
      .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    this.#addedPattern = escaped.length > 0 ? new RegExp(`(${escaped.join("|")})`) : undefined;
    this.#prefix = json.model.continuing_subword_prefix;
    this.#maxWordChars = json.model.max_input_chars_per_word;
    this.#lowercase = json.normalizer?.lowercase ?? true;
    const id = (token: string) => {
      const i = this.#vocab.get(token);
      if (i === undefined) throw new TypeError(`tokenizer.json: the vocabulary has no ${token}`);
      return i;
    };
    this.#unk = id(json.model.unk_token);
    this.cls = id("[CLS]");
    this.sep = id("[SEP]");
    this.pad = id("[PAD]");
  }

  /** Tokens in the vocabulary. */
  get vocabSize(): number {
    return this.#vocab.size;
  }

  /** The ids of `text`: `[CLS]`, its pieces, `[SEP]`; at most `maxTokens` (≥ 2) of them. */
  encode(text: string, maxTokens = Infinity): number[] {
    const ids: number[] = [];
    const parts = this.#addedPattern === undefined ? [text] : text.split(this.#addedPattern);
    for (let i = 0; i < parts.length; i++) {
      // split() with a capturing group puts the separators at odd indices.
      if (i % 2 === 1) ids.push(this.#added.get(parts[i])!);
      else for (const word of this.#words(parts[i])) this.#wordPiece(word, ids);
    }
    const kept = ids.slice(0, Math.max(0, maxTokens - 2));
    return [this.cls, ...kept, this.sep];
  }

  /** BertNormalizer then BertPreTokenizer: the words of `text`. */
  #words(text: string): string[] {
    let clean = "";
    for (const ch of text) {
      const cp = ch.codePointAt(0)!;
      if (isDropped(cp)) continue; // NUL and U+FFFD are in it
      if (isSpace(cp)) clean += " ";
      else if (isChinese(cp)) clean += ` ${ch} `;
      else clean += ch;
    }
    if (this.#lowercase) {
      let lower = "";
      for (const ch of clean.normalize("NFD")) {
        // Strip the marks NFD split off, and lowercase per character, as Rust's
        // char::to_lowercase (no final-sigma rule).
        if (!isDropped(ch.codePointAt(0)!)) lower += ch.toLowerCase();
      }
      clean = lower;
    }
    const words: string[] = [];
    let word = "";
    for (const ch of clean) {
      const cp = ch.codePointAt(0)!;
      if (isSpace(cp)) {
        if (word) words.push(word);
        word = "";
      } else if (isPunctuation(cp)) {
        if (word) words.push(word);
        words.push(ch);
        word = "";
      } else {
        word += ch;
      }
    }
    if (word) words.push(word);
    return words;
  }

  /** Appends the WordPiece ids of one word to `out`. */
  #wordPiece(word: string, out: number[]): void {
    const chars = Array.from(word);
    if (chars.length > this.#maxWordChars) {
      out.push(this.#unk);
      return;
    }
    const pieces: number[] = [];
    let start = 0;
    while (start < chars.length) {
      let end = chars.length, found: number | undefined;
      while (start < end) {
        const piece = (start > 0 ? this.#prefix : "") + chars.slice(start, end).join("");
        found = this.#vocab.get(piece);
        if (found !== undefined) break;
        end--;
      }
      if (found === undefined) {
        out.push(this.#unk);
        return;
      }
      pieces.push(found);
      start = end;
    }
    out.push(...pieces);
  }
}
