/**
 * `TVMLanguageModel`: a language model TVM compiled for WebGPU the way MLC LLM compiles
 * one (`embed`, `batch_prefill`, `batch_decode`, `create_paged_kv_cache`, packed weights,
 * TVM's paged KV cache), loaded as a TVM package (`loadTVMPackage`) and served by
 * `Engine` as an `EngineModel`. The host drives the cache as MLC LLM's engine does:
 *
 * ```text
 * kv_state_begin_forward(cache, ids, lengths)
 * embed(tokens) → [n, d]                         all the forward's tokens
 * every length 1: batch_decode(embeds [b, 1, d], cache, weights) → logits [b, 1, vocab]
 * otherwise:      batch_prefill(embeds [1, n, d], last rows, cache, weights) → [1, b, vocab]
 * kv_state_end_forward(cache)
 * ```
 *
 * The cache's attention runs the package's own kernels (builtins/kv_state/kernel_attention.ts).
 * The vocabulary and hidden sizes come from the embedding table (the weight named
 * `…embed_tokens.weight`, `[vocab, hidden]`, as MLC names it) unless given. The package
 * carries no tokenizer: the caller gives one.
 *
 * @module
 */

import {
  type ChatMessage,
  type EngineModel,
  type ForwardEntry,
  getGlobalFunc,
  loadTVMPackage,
  type LoadTVMPackageOptions,
  NDArray,
  type PagedKVCache,
  shape,
  tensor,
  type Tokenizer,
  type TVMPackage,
  type VirtualMachine,
} from "../../mod.ts";

/** Options of `TVMLanguageModel.load`. */
export interface TVMLanguageModelOptions extends LoadTVMPackageOptions {
  /** Text to ids and back (the package has none). */
  tokenizer: Tokenizer;
  /** The name completions report; default `"tvm-llm"`. */
  name?: string;
  /** Tokens per page; default 16. It must be the page size the package's kernels were built for. */
  pageSize?: number;
  /** Tokens the cache holds in all; default 1024. */
  maxTotalSequenceLength?: number;
  /** Most tokens in one sequence; default `maxTotalSequenceLength`. */
  maxSequenceLength?: number;
  /** Most sequences per forward; default 16. */
  maxBatchSize?: number;
  /** Most tokens per forward; default 128. */
  prefillChunkSize?: number;
  /** Ids that end a generation. */
  stopTokenIds?: readonly number[];
  /** The prompt of a chat; default the messages' contents, concatenated. */
  chatTemplate?: (messages: readonly ChatMessage[]) => string;
  /** Logits per token and features per token, when the embedding table is not named as MLC's. */
  sizes?: { vocabSize: number; hiddenSize: number };
}

const REQUIRED = ["embed", "batch_prefill", "batch_decode", "create_paged_kv_cache"];

/**
 * A TVM-compiled language model (MLC LLM's function set) on WebGPU, as an `EngineModel`.
 *
 * @example Serve the tiny Llama of testdata to two requests at once
 * ```ts
 * import { Engine } from "@relaxvm/relaxvm";
 * import { TVMLanguageModel } from "@relaxvm/relaxvm/models";
 *
 * if (import.meta.main) { // needs a WebGPU adapter; the doc tests only type-check it
 *   const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .";
 *   const tokenizer = { // 64 ids, one a character
 *     encode: (text: string) => [...text].map((c) => Math.max(0, letters.indexOf(c))),
 *     decode: (ids: readonly number[]) => ids.map((i) => letters[i] ?? "?").join(""),
 *   };
 *   const model = await TVMLanguageModel.load("testdata/tvm_webgpu/llama", { tokenizer });
 *   const engine = new Engine(model);
 *   const replies = await Promise.all(["hello", "world"].map((prompt) =>
 *     engine.completions.create({ prompt, max_tokens: 8, temperature: 0 })
 *   ));
 *   console.log(replies.map((r) => r.choices[0].text));
 *   model.dispose();
 * }
 * ```
 */
export class TVMLanguageModel implements EngineModel {
  /** The loaded package. */
  readonly package: TVMPackage;
  /** The VM running it. */
  readonly vm: VirtualMachine;
  /** The paged KV cache its `create_paged_kv_cache` made. */
  readonly cache: PagedKVCache;
  readonly name: string;
  readonly vocabSize: number;
  /** Features per token (the embeddings' width). */
  readonly hiddenSize: number;
  readonly maxSequenceLength: number;
  readonly pageSize: number;
  readonly totalPages: number;
  readonly maxBatchSize: number;
  readonly prefillChunkSize: number;
  readonly tokenizer: Tokenizer;
  readonly stopTokenIds?: readonly number[];
  readonly #params: NDArray[];
  readonly #template: (messages: readonly ChatMessage[]) => string;

  private constructor(
    pkg: TVMPackage,
    vm: VirtualMachine,
    cache: PagedKVCache,
    sizes: { vocabSize: number; hiddenSize: number },
    options: TVMLanguageModelOptions,
    maxTotal: number,
  ) {
    this.package = pkg;
    this.vm = vm;
    this.cache = cache;
    this.#params = pkg.params("embed");
    this.name = options.name ?? "tvm-llm";
    this.vocabSize = sizes.vocabSize;
    this.hiddenSize = sizes.hiddenSize;
    this.maxSequenceLength = options.maxSequenceLength ?? maxTotal;
    this.pageSize = cache.config.pageSize;
    this.totalPages = cache.numAvailablePages;
    this.maxBatchSize = cache.config.maxBatchSize;
    this.prefillChunkSize = cache.config.prefillChunkSize;
    this.tokenizer = options.tokenizer;
    if (options.stopTokenIds !== undefined) this.stopTokenIds = options.stopTokenIds;
    this.#template = options.chatTemplate ?? ((m) => m.map((x) => x.content).join(""));
  }

  /**
   * Loads the package at `location` (see `loadTVMPackage`), checks it has MLC's functions
   * and creates its paged KV cache. Throws a `TypeError` naming what is missing.
   */
  static async load(
    location: string | URL | ReadonlyMap<string, Uint8Array | string>,
    options: TVMLanguageModelOptions,
  ): Promise<TVMLanguageModel> {
    const pkg = await loadTVMPackage(location, options);
    try {
      const missing = REQUIRED.filter((f) => !pkg.manifest.functions.has(f));
      if (missing.length > 0) {
        throw new TypeError(
          `TVMLanguageModel: the package has no ${missing.join(", ")} (MLC LLM's functions)`,
        );
      }
      const sizes = options.sizes ?? embeddingSizes(pkg);
      const maxTotal = options.maxTotalSequenceLength ?? 1024;
      const vm = pkg.createVM();
      const cache = await vm.invoke(
        "create_paged_kv_cache",
        shape(options.maxBatchSize ?? 16),
        shape(maxTotal),
        shape(options.prefillChunkSize ?? 128),
        shape(options.pageSize ?? 16),
        shape(0),
      ) as PagedKVCache;
      return new TVMLanguageModel(pkg, vm, cache, sizes, options, maxTotal);
    } catch (e) {
      pkg.dispose();
      throw e;
    }
  }

  /** The prompt of a chat (the `chatTemplate` option's). */
  chatTemplate(messages: readonly ChatMessage[]): string {
    return this.#template(messages);
  }

  /** The cache's free pages (`attention_kv_cache_get_num_available_pages`). */
  freePages(): number {
    return this.cache.numAvailablePages;
  }

  /** `kv_state_add_sequence`. */
  addSequence(seqId: number): void {
    this.cache.addSequence(seqId);
  }

  /** `kv_state_remove_sequence`. */
  removeSequence(seqId: number): void {
    this.cache.removeSequence(seqId);
  }

  /** One `batch_decode` (every entry one token) or `batch_prefill`, with one read back. */
  async forward(entries: readonly ForwardEntry[]): Promise<Float32Array[]> {
    const f = (name: string) => getGlobalFunc(`vm.builtin.${name}`)!;
    const ids = entries.map((e) => e.seqId), lengths = entries.map((e) => e.tokens.length);
    const device = this.package.device, vm = this.vm, d = this.hiddenSize;
    f("kv_state_begin_forward")(this.cache, shape(...ids), shape(...lengths));
    try {
      const flat = Int32Array.from(entries.flatMap((e) => e.tokens));
      using tokens = tensor(flat, { device });
      using embeds = await vm.invokeTensor("embed", tokens, this.#params);
      const decode = lengths.every((n) => n === 1);
      using input = new NDArray(
        embeds.storage,
        embeds.byteOffset,
        decode ? [ids.length, 1, d] : [1, flat.length, d],
        embeds.dtype,
      ).handToUser();
      let out: unknown;
      if (decode) {
        out = await vm.invoke("batch_decode", input, this.cache, this.#params);
      } else {
        let row = -1;
        using last = tensor(Int32Array.from(lengths, (n) => (row += n)), { device });
        out = await vm.invoke("batch_prefill", input, last, this.cache, this.#params);
      }
      const [logits] = out as [NDArray, PagedKVCache];
      let all: Float32Array;
      try {
        all = await logits.data() as Float32Array;
      } finally {
        logits.dispose();
      }
      const V = this.vocabSize;
      return entries.map((_, i) => all.slice(i * V, (i + 1) * V));
    } finally {
      f("kv_state_end_forward")(this.cache);
    }
  }

  /** Releases the cache, the VM and the package's weights. */
  dispose(): void {
    this.cache.dispose();
    this.vm.dispose();
    this.package.dispose();
  }
}

/** `[vocab, hidden]` of the weight MLC names `…embed_tokens.weight`. */
function embeddingSizes(pkg: TVMPackage): { vocabSize: number; hiddenSize: number } {
  const names = pkg.manifest.functions.get("embed")!.params;
  const params = pkg.params("embed");
  const i = names.findIndex((n) => n.endsWith("embed_tokens.weight"));
  if (i < 0 || params[i].shape.length !== 2) {
    throw new TypeError(
      "TVMLanguageModel: no [vocab, hidden] weight named …embed_tokens.weight; give the sizes option",
    );
  }
  return { vocabSize: params[i].shape[0], hiddenSize: params[i].shape[1] };
}
