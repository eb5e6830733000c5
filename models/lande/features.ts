/**
 * lande's input features, as its `infer` computes them (lande 1.0.10,
 * `standalone/utils.js`): the text normalized (hyphens to spaces; only
 * letters, marks and whitespace kept; runs of whitespace collapsed;
 * lowercased; one space added at each end), then for each n-gram of the
 * model's lists (unigrams, bigrams, trigrams, quadgrams, in that order) its
 * frequency among the text's n-grams of that length, 0 when absent.
 *
 * @module
 */

/** The n-grams the network reads, one input per entry. */
export interface LandeNgrams {
  unigrams: string[];
  bigrams: string[];
  trigrams: string[];
  quadgrams: string[];
}

/** lande's `getNormalized`. */
export function normalize(text: string): string {
  const spaced = text.replace(/-+/g, " ").replace(/[^\p{L}\p{M}\s]/gu, "")
    .replace(/\s{2,}/g, " ");
  return ` ${spaced.toLowerCase().trim()} `;
}

/** Frequencies of the n-grams of `text` of one length (UTF-16 slices, as lande takes them). */
function frequencies(text: string, length: number): Map<string, number> {
  const counts = new Map<string, number>();
  let total = 0;
  for (let i = 0; i <= text.length - length; i++) {
    const gram = text.slice(i, i + length);
    counts.set(gram, (counts.get(gram) ?? 0) + 1);
    total++;
  }
  for (const [gram, count] of counts) counts.set(gram, count / total);
  return counts;
}

/** The network's input for `text`: one frequency per n-gram of `ngrams`. */
export function features(text: string, ngrams: LandeNgrams): Float32Array {
  const norm = normalize(text);
  const lists = [ngrams.unigrams, ngrams.bigrams, ngrams.trigrams, ngrams.quadgrams];
  const out = new Float32Array(lists.reduce((n, l) => n + l.length, 0));
  let at = 0;
  lists.forEach((list, i) => {
    const f = frequencies(norm, i + 1);
    for (const gram of list) out[at++] = f.get(gram) ?? 0;
  });
  return out;
}
