/**
 * `TfIdfVectorizer` over integer tokens: one call of
 * `vm.op.tfidf_vectorizer` (builtins/host_operators/host_text_operators.ts),
 * which counts the pool's n-grams on the host as ONNX's reference does. The
 * pool goes as an int64 constant (its tokens may be negative), the layout
 * lists as lists; string pools are refused with the rest of the strings.
 *
 * @module
 */

import { tensor } from "../devices/tensor.ts";
import { Unsupported } from "./graph_values.ts";
import type { OpSpec } from "./op_spec.ts";

/** The operators of this module, by ONNX name. */
export const TEXT_OPS: Record<string, OpSpec> = {
  TfIdfVectorizer: {
    attrs: [
      "max_gram_length",
      "max_skip_count",
      "min_gram_length",
      "mode",
      "ngram_counts",
      "ngram_indexes",
      "pool_int64s",
      "weights",
    ],
    convert(cx) {
      const x = cx.input(0);
      cx.dtype(x, ["int32", "int64"]);
      if (x.shape.length < 1 || x.shape.length > 2) {
        throw new Unsupported(`tokens of rank ${x.shape.length}`);
      }
      const pool = cx.ints("pool_int64s"), counts = cx.ints("ngram_counts");
      const indexes = cx.ints("ngram_indexes");
      if (pool === undefined || counts === undefined || indexes === undefined) {
        throw new Unsupported("a pool without pool_int64s, ngram_counts and ngram_indexes");
      }
      if (indexes.length === 0 || [...counts, ...indexes].some((v) => v < 0)) {
        throw new Unsupported(`ngram_counts [${counts}] and ngram_indexes [${indexes}]`);
      }
      const poolTensor = tensor(new BigInt64Array(pool.map(BigInt)), { shape: [pool.length] });
      cx.made.push(poolTensor);
      const w = cx.floats("weights");
      let weights;
      if (w !== undefined && w.length > 0) {
        const t = tensor(Float32Array.from(w), { shape: [w.length] });
        cx.made.push(t);
        weights = cx.em.reg(cx.fromTensor(t));
      } else weights = cx.em.record("vm.builtin.null_value", [])!;
      const min = cx.int("min_gram_length", 1), max = cx.int("max_gram_length", 1);
      const outSize = Math.max(...indexes) + 1;
      return [
        cx.em.call(
          "vm.op.tfidf_vectorizer",
          [
            cx.em.reg(x),
            cx.em.reg(cx.fromTensor(poolTensor)),
            counts,
            indexes,
            weights,
            cx.string("mode", "TF"),
            cx.em.imm(min),
            cx.em.imm(max),
            cx.em.imm(cx.int("max_skip_count", 0)),
          ],
          "float32",
          x.shape.length === 2 ? [x.shape[0], outSize] : [outSize],
        ),
      ];
    },
  },
};
