/**
 * A generation's text as it grows, token by token: what may be sent now, and where a
 * stop sequence ends it. Text that could still become a stop sequence (a suffix that
 * is a prefix of one) or a character still cut between two tokens (a trailing U+FFFD)
 * is held back until the next token decides it; a stop sequence found is cut off, with
 * everything after it, and never sent.
 *
 * @module
 */

import type { Tokenizer } from "./model.ts";

/** The text of one generation, with its stop sequences. */
export class TextStream {
  readonly #tokenizer: Tokenizer;
  readonly #stops: readonly string[];
  readonly #ids: number[] = [];
  #sent = 0;
  #stopped = false;

  constructor(tokenizer: Tokenizer, stops: readonly string[]) {
    this.#tokenizer = tokenizer;
    this.#stops = stops.filter((s) => s.length > 0);
  }

  /** Whether a stop sequence has been generated. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Adds a token; returns the text it lets through (maybe empty). */
  push(id: number): string {
    this.#ids.push(id);
    const text = this.#tokenizer.decode(this.#ids);
    let end = text.length;
    // A stop sequence may start in text already sent, up to its length back.
    const longest = Math.max(0, ...this.#stops.map((s) => s.length));
    const from = Math.max(0, this.#sent - longest + 1);
    let hit = -1;
    for (const s of this.#stops) {
      const at = text.indexOf(s, from);
      if (at >= 0 && (hit < 0 || at < hit)) hit = at;
    }
    if (hit >= 0) {
      this.#stopped = true;
      end = hit;
    } else {
      if (text.endsWith("\uFFFD")) end--;
      // Hold back the longest suffix that begins a stop sequence.
      const limit = end;
      for (const s of this.#stops) {
        for (let n = Math.min(s.length - 1, limit); n > 0; n--) {
          if (text.slice(limit - n, limit) === s.slice(0, n)) {
            end = Math.min(end, limit - n);
            break;
          }
        }
      }
    }
    if (end <= this.#sent) return "";
    const out = text.slice(this.#sent, end);
    this.#sent = end;
    return out;
  }

  /** At the end of a generation (not by a stop sequence): the text still held back. */
  flush(): string {
    if (this.#stopped) return "";
    const text = this.#tokenizer.decode(this.#ids);
    const out = text.slice(this.#sent);
    this.#sent = text.length;
    return out;
  }
}
