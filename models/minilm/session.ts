/**
 * `MiniLMSession`: the host side of all-MiniLM-L6-v2, what an application
 * calls. It reads the tokenizer from the model directory, loads the weights
 * through the program's `load_params` (a tensor cache, as a compiled
 * model's weights are loaded) and embeds sentences: each batch is
 * tokenized, padded to its longest sentence with a mask, and run by one
 * `embed` call.
 *
 * The model directory is what `tools/fetch_minilm.ts` writes
 * (`tensor-cache.json` and shards, `tokenizer.json`).
 *
 * @module
 */

import {
  type Device,
  type Executable,
  type NDArray,
  preferredDevice,
  tensor,
  VirtualMachine,
} from "../../mod.ts";
import { MINILM_L6 } from "./config.ts";
import { buildMiniLM } from "./program.ts";
import { type TokenizerJSON, WordPieceTokenizer } from "./tokenizer.ts";

/** Options of `MiniLMSession.create`. */
export interface MiniLMSessionOptions {
  /**
   * Where the model runs; default `preferredDevice()`: WebGPU on a hardware adapter, the CPU on a
   * software one (slower than the CPU kernels) or none.
   */
  device?: Device;
  /** The executable; default `buildMiniLM()` (build it once to share it between sessions). */
  executable?: Executable;
}

/** Token ids of a batch, padded to its longest row, with the mask that marks real tokens. */
export interface PaddedBatch {
  /** `[rows, length]` ids, row-major; padding is `[PAD]`. */
  ids: Int32Array;
  /** `[rows, length]`: 1 for a token, 0 for padding. */
  mask: Int32Array;
  /** Rows. */
  rows: number;
  /** Tokens per row. */
  length: number;
}

/** Pads token id lists to the longest one. */
export function padBatch(batch: readonly (readonly number[])[], padId = 0): PaddedBatch {
  const rows = batch.length, length = Math.max(...batch.map((t) => t.length));
  const ids = new Int32Array(rows * length).fill(padId), mask = new Int32Array(rows * length);
  batch.forEach((tokens, r) => {
    ids.set(tokens, r * length);
    mask.fill(1, r * length, r * length + tokens.length);
  });
  return { ids, mask, rows, length };
}

/**
 * all-MiniLM-L6-v2 loaded on a device, with its tokenizer: sentences in, unit vectors of 384
 * numbers out, compared with `cosine`.
 *
 * @example Rank your own sentences against a query
 * ```ts
 * import { cosine, MiniLMSession } from "@relaxvm/relaxvm/models";
 *
 * if (import.meta.main) { // needs the weights: bash tools/fetch_weights.sh
 *   const session = await MiniLMSession.create(new URL("./.weights/all-MiniLM-L6-v2/", import.meta.url));
 *   const corpus = ["Knead the dough, then bake it.", "Stocks fell sharply.", "It will rain."];
 *   const [query, ...vectors] = await session.embed(["How do I make bread?", ...corpus]);
 *   const ranked = corpus.map((s, i) => ({ s, score: cosine(query, vectors[i]) }))
 *     .sort((a, b) => b.score - a.score);
 *   console.log(session.device.kind, ranked[0].s); // the bread sentence first
 *   session.dispose();
 * }
 * ```
 */
export class MiniLMSession {
  /** The VM running the program. */
  readonly vm: VirtualMachine;
  /** Where the model runs. */
  readonly device: Device;
  /** The model's WordPiece tokenizer. */
  readonly tokenizer: WordPieceTokenizer;
  readonly #params: NDArray[];

  private constructor(vm: VirtualMachine, tokenizer: WordPieceTokenizer, params: NDArray[]) {
    this.vm = vm;
    this.device = vm.devices[0];
    this.tokenizer = tokenizer;
    this.#params = params;
  }

  /**
   * Loads the tokenizer and the weights from the directory at `dir` (a URL:
   * `file:`, `https:`, …; in Deno, `new URL("../.weights/all-MiniLM-L6-v2/",
   * import.meta.url)` or `toFileUrl`).
   */
  static async create(
    dir: string | URL,
    options: MiniLMSessionOptions = {},
  ): Promise<MiniLMSession> {
    const base = new URL(String(dir).endsWith("/") ? String(dir) : `${dir}/`);
    const tokenizerUrl = new URL("tokenizer.json", base);
    const response = await fetch(tokenizerUrl);
    if (!response.ok) throw new Error(`${tokenizerUrl}: HTTP ${response.status}`);
    const tokenizer = new WordPieceTokenizer(await response.json() as TokenizerJSON);
    const device = options.device ?? (await preferredDevice()).device;
    // The program loads its weights itself: the VM grants it exactly that directory.
    const vm = new VirtualMachine(options.executable ?? buildMiniLM(), device, {
      tensorCacheRoots: [base.href],
    });
    const params = await vm.invoke(
      "load_params",
      base.href,
      device.deviceType,
      device.id,
    ) as NDArray[];
    return new MiniLMSession(vm, tokenizer, params);
  }

  /** The token ids of `text`, `[CLS]` … `[SEP]`, truncated to 256. */
  tokenize(text: string): number[] {
    return this.tokenizer.encode(text, MINILM_L6.maxTokens);
  }

  /**
   * Embeds `sentences`: one unit vector of 384 numbers each, in the order
   * given. They run in batches of `batchSize` (default 32) sentences of
   * similar length (sorted by token count, as sentence-transformers does), so
   * little of each batch is padding.
   */
  async embed(sentences: readonly string[], batchSize = 32): Promise<Float32Array[]> {
    return await this.embedTokens(sentences.map((s) => this.tokenize(s)), batchSize);
  }

  /** `embed` from token ids (each list `[CLS]` … `[SEP]`). */
  async embedTokens(
    tokens: readonly (readonly number[])[],
    batchSize = 32,
  ): Promise<Float32Array[]> {
    const order = tokens.map((_, i) => i).sort((a, b) => tokens[a].length - tokens[b].length);
    const out: Float32Array[] = new Array(tokens.length);
    for (let i = 0; i < order.length; i += batchSize) {
      const rows = order.slice(i, i + batchSize);
      const vectors = await this.embedBatch(rows.map((r) => tokens[r]));
      rows.forEach((r, j) => out[r] = vectors[j]);
    }
    return out;
  }

  /** One `embed` call: the rows padded to the longest, with their mask. */
  async embedBatch(tokens: readonly (readonly number[])[]): Promise<Float32Array[]> {
    if (tokens.length === 0) return [];
    const longest = Math.max(...tokens.map((t) => t.length));
    if (longest > MINILM_L6.maxPositions) {
      throw new RangeError(
        `MiniLM: a row of ${longest} tokens is longer than the ${MINILM_L6.maxPositions} positions the model has (tokenize() truncates to ${MINILM_L6.maxTokens})`,
      );
    }
    const batch = padBatch(tokens, this.tokenizer.pad);
    using ids = tensor(batch.ids, { shape: [batch.rows, batch.length], dtype: "int32" });
    using mask = tensor(batch.mask, { shape: [batch.rows, batch.length], dtype: "int32" });
    using result = await this.vm.invokeTensor("embed", ids, mask, this.#params);
    const data = await result.data() as Float32Array;
    const D = MINILM_L6.hidden;
    return Array.from({ length: batch.rows }, (_, r) => data.slice(r * D, (r + 1) * D));
  }

  /** Releases the parameters. */
  dispose(): void {
    for (const p of this.#params) p.dispose();
  }
}

/** The cosine similarity of two vectors (their dot product when both have unit length). */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return dot / Math.sqrt(na * nb);
}
