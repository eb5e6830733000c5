/**
 * all-MiniLM-L6-v2's hyperparameters (its `config.json`): a 6-layer BERT
 * encoder, hidden 384, 12 heads, MLP 1536, exact GELU, post-layer-norm with
 * epsilon 1e-12, then sentence-transformers' mean pooling and L2
 * normalization. Sentences are truncated to 256 tokens
 * (`sentence_bert_config.json`'s `max_seq_length`).
 *
 * @module
 */

/** Hyperparameters of the encoder. */
export interface MiniLMConfig {
  /** Tokens in the vocabulary. */
  readonly vocab: number;
  /** Width of the residual stream. */
  readonly hidden: number;
  /** Encoder layers. */
  readonly layers: number;
  /** Attention heads per layer. */
  readonly heads: number;
  /** Hidden width of the MLP. */
  readonly intermediate: number;
  /** Rows of the position embedding. */
  readonly maxPositions: number;
  /** Longest input in tokens, [CLS] and [SEP] included; longer inputs are truncated. */
  readonly maxTokens: number;
  /** Epsilon of every layer norm. */
  readonly eps: number;
}

/** all-MiniLM-L6-v2. */
export const MINILM_L6: MiniLMConfig = Object.freeze({
  vocab: 30522,
  hidden: 384,
  layers: 6,
  heads: 12,
  intermediate: 1536,
  maxPositions: 512,
  maxTokens: 256,
  eps: 1e-12,
});
