/**
 * `IdTokenizer`: text that is token ids, for `relaxvm serve --tokenizer ids`. A TVM
 * package carries no tokenizer, and a test model's vocabulary (the 64 ids of
 * `testdata/tvm_webgpu/llama`) is no text's: the prompt names the ids and the reply
 * prints them, so nothing is made up between the client and the model.
 *
 * @module
 */

import type { Tokenizer } from "../runtime.ts";

/**
 * Space-separated decimal ids in, space-separated ids out. Decoding a longer list
 * extends the text of a shorter one, as streaming needs (`"5 7"`, then `"5 7 12"`).
 *
 * @example
 * ```ts
 * import { IdTokenizer } from "./id_tokenizer.ts";
 *
 * const t = new IdTokenizer(64);
 * t.encode(" 5  7\n12"); // [5, 7, 12]
 * t.decode([5, 7, 12]); // "5 7 12"
 * ```
 */
export class IdTokenizer implements Tokenizer {
  /** Ids run from 0 to `vocabSize - 1`. */
  readonly vocabSize: number;

  /** A tokenizer of the ids below `vocabSize`. */
  constructor(vocabSize: number) {
    this.vocabSize = vocabSize;
  }

  /** The ids `text` lists; a `RangeError` naming the word that is not one (a 400). */
  encode(text: string): number[] {
    const words = text.trim().split(/\s+/).filter((w) => w.length > 0);
    return words.map((word) => {
      const id = /^\d{1,9}$/.test(word) ? Number(word) : NaN;
      if (!(id < this.vocabSize)) {
        throw new RangeError(
          `the prompt's ${JSON.stringify(word.slice(0, 32))} is not a token id below ` +
            `${this.vocabSize} (this server's tokenizer is ids: a prompt is token ids ` +
            "separated by spaces)",
        );
      }
      return id;
    });
  }

  /** The ids, separated by spaces. */
  decode(ids: readonly number[]): string {
    return ids.join(" ");
  }
}
