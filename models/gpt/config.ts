/**
 * The sizes of the GPT-2-style decoder this folder builds: `tiny` for the
 * tests, `small` for the benchmark (issue 11).
 *
 * @module
 */

/** Hyperparameters of one decoder. */
export interface GPTConfig {
  /** Name, as `--model` spells it. */
  readonly name: string;
  /** Tokens in the vocabulary (rows of the token embedding, logits per position). */
  readonly vocab: number;
  /** Width of the residual stream. */
  readonly dModel: number;
  /** Transformer blocks. */
  readonly layers: number;
  /** Attention heads per block; `dModel / heads` is the head size. */
  readonly heads: number;
  /** Longest sequence: rows of the position embedding and of each KV cache. */
  readonly context: number;
  /** Hidden width of the MLP (4 × `dModel`, as GPT-2). */
  readonly dMLP: number;
  /** Epsilon of every layer norm. */
  readonly eps: number;
}

function config(
  name: string,
  vocab: number,
  dModel: number,
  layers: number,
  heads: number,
  context: number,
): GPTConfig {
  if (dModel % heads !== 0) throw new RangeError(`${name}: ${heads} heads do not divide ${dModel}`);
  return Object.freeze({
    name,
    vocab,
    dModel,
    layers,
    heads,
    context,
    dMLP: 4 * dModel,
    eps: 1e-5,
  });
}

/** vocab 512, d_model 128, 2 layers, 4 heads, context 128: for tests. */
export const TINY: GPTConfig = config("tiny", 512, 128, 2, 4, 128);

/** vocab 4096, d_model 384, 6 layers, 6 heads, context 256: for the benchmark. */
export const SMALL: GPTConfig = config("small", 4096, 384, 6, 6, 256);

/**
 * GPT-2's vocabulary size (50257) with `small`'s body: every id GPT-2's
 * tokenizer makes is a row, so `examples/gpt.ts --prompt` can feed it text.
 * Its weights are seeded like the others, not trained.
 */
export const TEXT: GPTConfig = config("text", 50257, 384, 6, 6, 256);

/** The configurations by name. */
export const CONFIGS: Readonly<Record<string, GPTConfig>> = {
  tiny: TINY,
  small: SMALL,
  text: TEXT,
};

/** The head size, `dModel / heads`. */
export function headSize(c: GPTConfig): number {
  return c.dModel / c.heads;
}
