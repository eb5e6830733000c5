/**
 * `vm.op.tfidf_vectorizer`: ONNX's `TfIdfVectorizer` over integer tokens,
 * computed on the host (host_tensors.ts) as its reference
 * (`onnx/reference/ops/op_tfidf_vectorizer.py`) counts: for each row and each
 * skip distance, the n-grams from every start that the pool holds, unigrams
 * once whatever the skip, then weighed by the mode.
 *
 * @example Bigrams (5, 6) and (6, 7) of one row
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const tfidf = getGlobalFunc("vm.op.tfidf_vectorizer")!;
 * using x = tensor(new Int32Array([5, 6, 7, 5, 6]), { shape: [5] });
 * using pool = tensor(new BigInt64Array([5n, 6n, 6n, 7n]), { shape: [4] });
 * using y = tfidf(x, pool, [0, 0], [0, 1], null, "TF", 2, 2, 0) as NDArray;
 * assertEquals([...y.dataSync()], [2, 1]);
 * ```
 *
 * @module
 */

import { formatShape } from "../../kernels/broadcast.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { integerArg, shapeArg, tensorArg } from "../validate.ts";
import { choiceArg, integersOf, numbersOf, onHost, optionalTensor } from "./host_tensors.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const hostTextBuiltins = new BuiltinTable("Host text operators", import.meta.url);

const TFIDF_MODES = ["TF", "IDF", "TFIDF"] as const;

/** The pool as the reference's trie: each loaded n-gram's id (1-based, pool order), and every prefix. */
interface NgramPool {
  readonly ids: Map<string, number>;
  readonly prefixes: Set<string>;
}

/**
 * Reads `pool` laid out by `counts` (where each size's n-grams start), loading
 * the sizes in `[minGram, maxGram]`; ids count every n-gram of the pool, loaded
 * or not, as the reference's do.
 */
function loadPool(
  pool: readonly number[],
  counts: readonly number[],
  minGram: number,
  maxGram: number,
): NgramPool {
  const ids = new Map<string, number>(), prefixes = new Set<string>();
  let id = 1;
  counts.forEach((start, i) => {
    const size = i + 1, end = i + 1 < counts.length ? counts[i + 1] : pool.length;
    const n = Math.floor(Math.max(0, end - start) / size);
    for (let g = 0; g < n; g++, id++) {
      if (size < minGram || size > maxGram) continue;
      const gram = pool.slice(start + g * size, start + (g + 1) * size);
      for (let k = 1; k <= size; k++) prefixes.add(gram.slice(0, k).join(","));
      ids.set(gram.join(","), id);
    }
  });
  return { ids, prefixes };
}

hostTextBuiltins.add(
  "vm.op.tfidf_vectorizer",
  (
    x: unknown,
    pool: unknown,
    ngramCounts: unknown,
    ngramIndexes: unknown,
    weights: unknown,
    mode: unknown,
    minGram: unknown,
    maxGram: unknown,
    maxSkip: unknown,
  ) => {
    const who = "tfidf_vectorizer";
    const t = tensorArg(x, "x", who), pt = tensorArg(pool, "pool", who);
    const wt = optionalTensor(weights, "weights", who);
    const counts = [...shapeArg(ngramCounts, who, "ngram_counts")];
    const indexes = [...shapeArg(ngramIndexes, who, "ngram_indexes")];
    const m = choiceArg(who, mode, "mode", TFIDF_MODES);
    const lo = integerArg(minGram, "min_gram_length", who, 1);
    const hi = integerArg(maxGram, "max_gram_length", who, lo);
    const skips = integerArg(maxSkip, "max_skip_count", who, 0);
    if (t.shape.length > 2 || indexes.length === 0) {
      throw new RangeError(`${who}: x ${formatShape(t.shape)} and ${indexes.length} ngram_indexes`);
    }
    const rows = t.shape.length === 2 ? t.shape[0] : 1;
    const width = t.shape.length === 0 ? 1 : t.shape[t.shape.length - 1];
    const outSize = Math.max(...indexes) + 1;
    const shape = t.shape.length === 2 ? [rows, outSize] : [outSize];
    return onHost(who, [t, pt, wt], ([xv, pv, wv]) => ({
      shape,
      dtype: "float32",
      fill(out) {
        const tokens = integersOf(xv!, "x", who), w = wv === undefined ? [] : numbersOf(wv);
        const { ids, prefixes } = loadPool(integersOf(pv!, "pool", who), counts, lo, hi);
        const counted = new Array<number>(rows * outSize).fill(0);
        for (let r = 0; r < rows; r++) {
          const row = tokens.slice(r * width, (r + 1) * width);
          let first = lo;
          for (let distance = 1; distance <= skips + 1; distance++) {
            for (let start = 0; start < width; start++) {
              if (start + distance * (first - 1) >= width) break;
              let key = "";
              for (let size = 1, at = start; size <= hi && at < width; size++, at += distance) {
                key = size === 1 ? `${row[at]}` : `${key},${row[at]}`;
                if (!prefixes.has(key)) break;
                const id = ids.get(key) ?? 0;
                if (size >= first && id !== 0) counted[r * outSize + indexes[id - 1]]++;
              }
            }
            // Unigrams do not depend on the skip: counted on the first pass only.
            if (first === 1) {
              first = 2;
              if (first > hi) break;
            }
          }
        }
        const o = out as Float32Array;
        counted.forEach((f, p) => {
          const weight = w.length > 0 ? w[p % outSize] : 1;
          o[p] = m === "TF" ? f : m === "IDF" ? (f > 0 ? weight : 0) : weight * f;
        });
      },
    }));
  },
  {
    signature:
      "(x, pool, ngram_counts, ngram_indexes, weights?, mode, min_gram_length, max_gram_length, max_skip_count) → float32 tensor",
    summary:
      "ONNX's `TfIdfVectorizer` of integer tokens `x [C]` or `[N, C]`: the n-grams of `pool` (int64, each size's n-grams from `ngram_counts[size − 1]`), sizes `min_gram_length` to `max_gram_length`, counted from every start and skip distance up to `max_skip_count` (unigrams once), each n-gram's count at its `ngram_indexes` entry; `mode` `TF` keeps counts, `IDF` gives `weights[i]` (or 1) where the count is not 0, `TFIDF` the count times `weights[i]`. Computed on the host.",
    dtypes: ["int32", "int64"],
    devices: ["cpu", "webgpu"],
    errors:
      "`TypeError` (not tensors, an unknown mode), `RangeError` (x of rank past 2, no ngram_indexes, gram lengths out of order).",
    tvm: null,
  },
);
