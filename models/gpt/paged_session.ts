/**
 * `PagedGPT`: the GPT of models/gpt on a paged KV cache (paged_program.ts), many
 * sequences per call, as the engine's `EngineModel`. The host drives the cache with
 * TVM's global functions, as MLC LLM's host does around `batch_prefill` /
 * `batch_decode`: `kv_state_begin_forward(cache, ids, lengths)`, the program's
 * `batch_forward`, `kv_state_end_forward`.
 *
 * The model has no tokenizer (its weights are seeded, not trained): `ByteTokenizer`
 * maps UTF-8 bytes to ids 0..255 (ids 256 and up, which only the model emits, decode as
 * byte `id - 256`), and the chat template is plain concatenation of the messages'
 * contents (a base model has no chat format).
 *
 * @module
 */

import {
  type ChatMessage,
  cpu,
  type Device,
  type EngineModel,
  type Executable,
  type ForwardEntry,
  getGlobalFunc,
  type NDArray,
  PagedKVCache,
  tensor,
  type Tokenizer,
  VirtualMachine,
} from "../../mod.ts";
import { type GPTConfig, headSize } from "./config.ts";
import { buildPagedGPT } from "./paged_program.ts";
import { encodeWeights, makeWeights, publishInMemory } from "./weights.ts";

/** Options of `PagedGPT.create`. */
export interface PagedGPTOptions {
  /** Where the model runs; default `cpu()` (the paged attention kernel is the CPU's). */
  device?: Device;
  /** The executable; default `buildPagedGPT(config)`. */
  executable?: Executable;
  /** Seed of the generated weights; default 1 (the same weights as `GPTSession`'s). */
  seed?: number;
  /** Tokens per page; default 16. */
  pageSize?: number;
  /** Tokens the cache holds in all; default 4 sequences of the whole context. */
  maxTotalSequenceLength?: number;
  /** Most sequences per forward; default 16. */
  maxBatchSize?: number;
  /** Most tokens per forward; default 256. */
  prefillChunkSize?: number;
  /** The VM's memory limit (`VirtualMachineOptions.maxMemoryBytes`); default the VM's, 1 GiB. */
  maxMemoryBytes?: number;
  /**
   * How often a long call yields to the event loop (`VirtualMachineOptions.yieldIntervalMs`), so
   * a server answers other clients during a long prefill; default the VM's.
   */
  yieldIntervalMs?: number;
}

/** UTF-8 bytes as ids 0..255; an id `b + 256` decodes as byte `b` too. */
export class ByteTokenizer implements Tokenizer {
  readonly #encoder = new TextEncoder();
  readonly #decoder = new TextDecoder();
  /** The UTF-8 bytes of `text`. */
  encode(text: string): number[] {
    return [...this.#encoder.encode(text)];
  }
  /** The text of the bytes (`id mod 256`). */
  decode(ids: readonly number[]): string {
    return this.#decoder.decode(Uint8Array.from(ids, (id) => id & 255));
  }
}

/** The GPT decoder with a paged KV cache: an `EngineModel`. */
export class PagedGPT implements EngineModel {
  /** The configuration. */
  readonly config: GPTConfig;
  /** The VM running the program. */
  readonly vm: VirtualMachine;
  /** The KV cache. */
  readonly cache: PagedKVCache;
  readonly name: string;
  readonly vocabSize: number;
  readonly maxSequenceLength: number;
  readonly pageSize: number;
  readonly totalPages: number;
  readonly maxBatchSize: number;
  readonly prefillChunkSize: number;
  readonly tokenizer: Tokenizer = new ByteTokenizer();
  readonly #params: NDArray[];

  private constructor(
    config: GPTConfig,
    vm: VirtualMachine,
    params: NDArray[],
    cache: PagedKVCache,
  ) {
    this.config = config;
    this.vm = vm;
    this.#params = params;
    this.cache = cache;
    this.name = `relaxvm-gpt-${config.name}`;
    this.vocabSize = config.vocab;
    this.maxSequenceLength = config.context;
    this.pageSize = cache.config.pageSize;
    this.totalPages = cache.numAvailablePages;
    this.maxBatchSize = cache.config.maxBatchSize;
    this.prefillChunkSize = cache.config.prefillChunkSize;
  }

  /** Builds (or takes) the executable, loads the seeded weights and creates the cache. */
  static async create(config: GPTConfig, options: PagedGPTOptions = {}): Promise<PagedGPT> {
    const device = options.device ?? cpu();
    const ex = options.executable ?? buildPagedGPT(config);
    const published = publishInMemory(
      await encodeWeights(config, makeWeights(config, options.seed ?? 1)),
    );
    const vm = new VirtualMachine(ex, device, {
      tensorCacheRoots: published.urls,
      maxMemoryBytes: options.maxMemoryBytes,
      yieldIntervalMs: options.yieldIntervalMs,
    });
    try {
      const params = await vm.invoke(
        "load_params",
        published.url,
        device.deviceType,
        device.id,
      ) as NDArray[];
      const cache = PagedKVCache.create({
        pageSize: options.pageSize ?? 16,
        maxTotalSequenceLength: options.maxTotalSequenceLength ?? 4 * config.context,
        numLayers: config.layers,
        numQoHeads: config.heads,
        numKvHeads: config.heads,
        headDim: headSize(config),
        maxBatchSize: options.maxBatchSize ?? 16,
        prefillChunkSize: options.prefillChunkSize ?? 256,
        device,
      });
      return new PagedGPT(config, vm, params, cache);
    } catch (e) {
      vm.dispose();
      throw e;
    } finally {
      published.revoke();
    }
  }

  /** Plain concatenation of the contents: the model is a base model, with no chat format. */
  chatTemplate(messages: readonly ChatMessage[]): string {
    return messages.map((m) => m.content).join("");
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

  /** One `batch_forward` between `kv_state_begin_forward` and `kv_state_end_forward`. */
  async forward(entries: readonly ForwardEntry[]): Promise<Float32Array[]> {
    const ids = entries.map((e) => e.seqId), lengths = entries.map((e) => e.tokens.length);
    const f = (name: string) => getGlobalFunc(`vm.builtin.${name}`)!;
    f("kv_state_begin_forward")(this.cache, ids, lengths);
    try {
      const lastRows: number[] = [];
      let row = 0;
      for (const n of lengths) lastRows.push((row += n) - 1);
      const device = this.vm.devices[0];
      const int32 = (values: Int32Array) => tensor(values, { dtype: "int32", device });
      using tokens = int32(Int32Array.from(entries.flatMap((e) => e.tokens)));
      using last = int32(Int32Array.from(lastRows));
      // What attention_kv_cache_get_query_positions returns, on the model's device.
      using positions = int32(this.cache.plan!.qRopePositionMap.slice());
      using logits = await this.vm.invoke(
        "batch_forward",
        tokens,
        this.cache,
        this.#params,
        last,
        positions,
      ) as NDArray;
      const all = await logits.data() as Float32Array;
      const V = this.vocabSize;
      return entries.map((_, i) => all.slice(i * V, (i + 1) * V));
    } finally {
      f("kv_state_end_forward")(this.cache);
    }
  }

  /** Releases the cache, the parameters and the VM. */
  dispose(): void {
    this.cache.dispose();
    for (const p of this.#params) p.dispose();
    this.vm.dispose();
  }
}
