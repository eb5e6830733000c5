/**
 * `PagedKVCache`: TVM's paged attention KV cache (`relax.vm.PagedAttentionKVCache`,
 * `src/runtime/vm/paged_kv_cache.cc`) as a `VMObject`: the page table of
 * page_table.ts, the K/V pages (one tensor per layer, TVM's layout), the
 * configuration `vm.builtin.paged_attention_kv_cache_create` was given
 * (create_arguments.ts), the kernels the executable handed it, and the plan of the
 * forward in progress.
 *
 * ```text
 * pages[layer]   [numPages, 2, numKvHeads, pageSize, headDim]   index 0 of the "2" is K, 1 is V
 * numPages       ceil(maxTotalSequenceLength / pageSize) + 1      (TVM's count)
 * ```
 *
 * The pages come from the active allocator (the running VM's), so the cache counts in
 * that VM's `memory_stats()` and against its `maxMemoryBytes`, and returns its memory
 * when the last holder releases it.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../../ground/brand.ts";
import { elementBytes, type TensorDType } from "../../ground/dtype.ts";
import { INSPECT } from "../../ground/inspect.ts";
import { retainValue, VMObject } from "../../ground/object.ts";
import { cpu } from "../../devices/cpu_device.ts";
import type { Device } from "../../devices/device.ts";
import { NDArray } from "../../devices/ndarray.ts";
import type { PagedKVCacheConfig, PagedKVCacheKernels } from "./create_arguments.ts";
import { type ForwardPlan, PageTable } from "./page_table.ts";
import type { DeviceForwardArrays } from "./forward_arrays.ts";

/** The sizes of a cache made with `PagedKVCache.create`. */
export interface PagedKVCacheOptions {
  /** Tokens per page. */
  pageSize: number;
  /** Tokens the pool holds: `ceil(maxTotalSequenceLength / pageSize) + 1` pages, as TVM. */
  maxTotalSequenceLength: number;
  /** Layers. */
  numLayers: number;
  /** Query heads. */
  numQoHeads: number;
  /** Key/value heads (`numQoHeads` a multiple of it). */
  numKvHeads: number;
  /** Features per head. */
  headDim: number;
  /** Element type of the pages (default float32; the reference attention needs float32). */
  dtype?: TensorDType;
  /** Where the pages live (default the CPU). */
  device?: Device;
  /** Most sequences in one forward (default 16). */
  maxBatchSize?: number;
  /** Most tokens in one forward (default `maxTotalSequenceLength`). */
  prefillChunkSize?: number;
  /** RoPE applied to Q and K at their positions before K is cached, or none (default). */
  ropeMode?: "none" | "normal";
  /** RoPE's base (default 10000). */
  ropeTheta?: number;
  /** Positions are multiplied by this before RoPE (default 1). */
  ropeScale?: number;
}

const PAGED_KV_CACHE_BRAND = brandKey("PagedKVCache");

/**
 * A paged KV cache: many sequences in one pool of pages, sharing prefixes. Made by
 * `vm.builtin.paged_attention_kv_cache_create`; driven through TVM's global
 * functions (`vm.builtin.kv_state_add_sequence`, `…_begin_forward`, …), which take
 * it as their first argument, or through its methods, which those functions call.
 *
 * @example Two sequences, one forked from the other mid-page
 * ```ts
 * import { getGlobalFunc, PagedKVCache, shape } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const f = (name: string) => getGlobalFunc(`vm.builtin.${name}`)!;
 * using kv = PagedKVCache.create({ pageSize: 4, maxTotalSequenceLength: 28, numLayers: 1,
 *   numQoHeads: 2, numKvHeads: 1, headDim: 8 });
 * f("kv_state_add_sequence")(kv, 0);
 * f("kv_state_begin_forward")(kv, shape(0), shape(6)); // a prefill of 6 tokens: 2 pages
 * f("kv_state_end_forward")(kv);
 * f("kv_state_fork_sequence")(kv, 0, 1, 5); // shares page 0, copies 1 token of page 1
 * assertEquals(f("attention_kv_cache_get_num_available_pages")(kv), 5); // of 8
 * assertEquals(f("attention_kv_cache_get_total_sequence_length")(kv), 11);
 * ```
 */
export class PagedKVCache extends VMObject {
  static {
    brand(this, PAGED_KV_CACHE_BRAND);
  }

  /**
   * True for a `PagedKVCache` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is PagedKVCache {
    return typeof v === "object" && v !== null && (v as Branded)[PAGED_KV_CACHE_BRAND] === true;
  }

  /** What the cache was created with. */
  readonly config: PagedKVCacheConfig;
  /**
   * The kernels the executable passed (kept for the attention builtins).
   *
   * @ignore
   */
  readonly kernels: PagedKVCacheKernels;
  /**
   * The page and block bookkeeping.
   *
   * @ignore
   */
  readonly table: PageTable;
  #pages: NDArray[];
  #plan: ForwardPlan | null = null;
  /** The plan's arrays on the pages' device, uploaded by the first attention call of it. */
  #deviceArrays: DeviceForwardArrays | null = null;

  /**
   * A cache for `config`, allocating its pages from the active allocator.
   *
   * @ignore
   */
  constructor(config: PagedKVCacheConfig, kernels: PagedKVCacheKernels) {
    super();
    this.config = config;
    this.kernels = kernels;
    const shape = [config.numPages, 2, config.numKvHeads, config.pageSize, config.headDim];
    this.#pages = [];
    try {
      for (let l = 0; l < config.numLayers; l++) {
        const page = NDArray.empty(shape, config.dtype, config.device);
        retainValue(page); // a holder beyond frames, as AttentionKVCache's data
        this.#pages.push(page);
      }
    } catch (e) {
      for (const p of this.#pages) p.release();
      throw e;
    }
    // After the pages: their allocation is what the memory limit checks, so a pool too
    // large for it is refused before its free list is made.
    this.table = new PageTable(config);
  }

  /**
   * A cache made from TypeScript, without an executable: what
   * `paged_attention_kv_cache_create` builds from TVM's arguments, from a few sizes.
   * No kernels are attached (the CPU reference attention needs none).
   *
   * @example
   * ```ts
   * import { PagedKVCache } from "@relaxvm/relaxvm";
   * import { assertEquals } from "@std/assert";
   *
   * using kv = PagedKVCache.create({ pageSize: 16, maxTotalSequenceLength: 1024, numLayers: 2,
   *   numQoHeads: 8, numKvHeads: 2, headDim: 64, ropeMode: "normal" });
   * assertEquals(kv.config.numPages, 65); // ceil(1024 / 16) + 1, as TVM
   * assertEquals(kv.pages(0).shape, [65, 2, 2, 16, 64]);
   * ```
   */
  static create(options: PagedKVCacheOptions): PagedKVCache {
    const o = options;
    const who = "PagedKVCache.create";
    const sizes = [
      ["pageSize", o.pageSize],
      ["maxTotalSequenceLength", o.maxTotalSequenceLength],
      ["numLayers", o.numLayers],
      ["numQoHeads", o.numQoHeads],
      ["numKvHeads", o.numKvHeads],
      ["headDim", o.headDim],
      ["maxBatchSize", o.maxBatchSize ?? 16],
      ["prefillChunkSize", o.prefillChunkSize ?? o.maxTotalSequenceLength],
    ] as const;
    for (const [what, v] of sizes) {
      if (!Number.isSafeInteger(v) || v < 1) {
        throw new RangeError(`${who}: ${what} must be a positive integer, got ${v}`);
      }
    }
    if (o.numQoHeads % o.numKvHeads !== 0) {
      throw new RangeError(
        `${who}: numQoHeads ${o.numQoHeads} is not a multiple of numKvHeads ${o.numKvHeads}`,
      );
    }
    const ropeMode = o.ropeMode ?? "none";
    if (ropeMode !== "none" && ropeMode !== "normal") {
      throw new RangeError(`${who}: ropeMode must be "none" or "normal", got ${ropeMode}`);
    }
    const cache = new PagedKVCache({
      maxBatchSize: o.maxBatchSize ?? 16,
      maxTotalSequenceLength: o.maxTotalSequenceLength,
      prefillChunkSize: o.prefillChunkSize ?? o.maxTotalSequenceLength,
      pageSize: o.pageSize,
      numPages: Math.ceil(o.maxTotalSequenceLength / o.pageSize) + 1,
      numLayers: o.numLayers,
      layerBegin: 0,
      numQoHeads: o.numQoHeads,
      numKvHeads: o.numKvHeads,
      headDim: o.headDim,
      ropeMode,
      ropeScale: o.ropeScale ?? 1,
      ropeTheta: o.ropeTheta ?? 10000,
      dtype: o.dtype ?? "float32",
      device: o.device ?? cpu(),
    }, {});
    // The caller holds it (until `dispose()`): passed to a VM call, it outlives the call.
    cache.handToUser();
    return cache;
  }

  /** The K/V pages of `layer` (0-based within this cache), TVM's layout. */
  pages(layer: number): NDArray {
    this.#assertLive();
    const p = this.#pages[layer];
    if (p === undefined) {
      throw new RangeError(`PagedKVCache: layer ${layer} is not in 0..${this.#pages.length - 1}`);
    }
    return p;
  }

  /** The plan of the forward in progress (since `beginForward`), or null. */
  get plan(): ForwardPlan | null {
    return this.#plan;
  }

  /**
   * The 0-based index in this cache of model layer `layerId` (the numbering starts at
   * `config.layerBegin`), or a `RangeError` naming `who` and the layers it holds.
   */
  layerIndex(layerId: number, who: string): number {
    const c = this.config;
    const layer = layerId - c.layerBegin;
    if (!Number.isSafeInteger(layerId) || layer < 0 || layer >= c.numLayers) {
      throw new RangeError(
        `${who}: layer ${layerId} is not in ${c.layerBegin}..${c.layerBegin + c.numLayers - 1}`,
      );
    }
    return layer;
  }

  /** The forward in progress, or a `RangeError` naming `who` when there is none. */
  forwardPlan(who: string): ForwardPlan {
    if (this.#plan === null) {
      throw new RangeError(`${who}: no forward in progress (call kv_state_begin_forward first)`);
    }
    return this.#plan;
  }

  /**
   * The forward's arrays on the pages' device: `upload`'s result, made once per forward
   * and freed when the plan changes (TVM uploads them once per `begin_forward` too).
   *
   * @ignore
   */
  deviceArrays(upload: () => DeviceForwardArrays): DeviceForwardArrays {
    this.#assertLive();
    this.#deviceArrays ??= upload();
    return this.#deviceArrays;
  }

  /** Bytes of K/V pages the cache holds. */
  get nbytes(): number {
    const c = this.config;
    return c.numLayers * c.numPages * 2 * c.numKvHeads * c.pageSize * c.headDim *
      elementBytes(c.dtype);
  }

  /** `kv_state_add_sequence`. */
  addSequence(seqId: number): void {
    this.#change().addSequence(seqId);
  }

  /** `kv_state_remove_sequence`. */
  removeSequence(seqId: number): void {
    this.#change().removeSequence(seqId);
  }

  /** `kv_state_fork_sequence`: `forkPos` -1 forks the whole parent. */
  forkSequence(parentId: number, childId: number, forkPos = -1): void {
    this.#change().forkSequence(parentId, childId, forkPos, this.#copyPage);
  }

  /** `kv_state_popn`. */
  popN(seqId: number, n: number): void {
    this.#change().popN(seqId, n, this.#copyPage);
  }

  /** `kv_state_clear`. */
  clear(): void {
    this.#change().clear();
  }

  /** `kv_state_begin_forward`: reserves pages and builds the forward's arrays. */
  beginForward(seqIds: readonly number[], appendLengths: readonly number[]): ForwardPlan {
    this.#dropPlan();
    this.#plan = this.#change().beginForward(seqIds, appendLengths);
    return this.#plan;
  }

  /** `kv_state_end_forward`: the forward's arrays are no longer valid. */
  endForward(): void {
    this.#assertLive();
    this.#dropPlan();
  }

  /** `attention_kv_cache_get_num_available_pages`. */
  get numAvailablePages(): number {
    return this.table.numAvailablePages;
  }

  /** `attention_kv_cache_get_total_sequence_length`. */
  get totalSequenceLength(): number {
    return this.table.totalSequenceLength;
  }

  /** `PagedKVCache(float32, 2 sequences, 5 of 8 pages free, 2 layers, cpu(0))`. */
  override toString(): string {
    const c = this.config;
    return `PagedKVCache(${c.dtype}, ${this.table.sequenceIds.length} sequences, ${this.table.numAvailablePages} of ${c.numPages} pages of ${c.pageSize} free, ${c.numLayers} layers, ${c.device})`;
  }

  /** Shown by `console.log` and `deno repl`: as `toString()`, or `… <released>`. */
  override [INSPECT](): string {
    return this.disposed ? `PagedKVCache(${this.config.dtype}) <released>` : this.toString();
  }

  /**
   * Releases the pages.
   *
   * @ignore
   */
  protected free(): void {
    for (const p of this.#pages) p.release();
    this.#pages = [];
    this.#dropPlan();
  }

  /** No forward in progress: its device arrays are freed. */
  #dropPlan(): void {
    this.#plan = null;
    this.#deviceArrays?.dispose();
    this.#deviceArrays = null;
  }

  #assertLive(): void {
    if (this.disposed) throw this.usedAfterFree();
  }

  /** The table, for a call that changes it: the plan of a forward no longer holds. */
  #change(): PageTable {
    this.#assertLive();
    this.#dropPlan();
    return this.table;
  }

  /**
   * Copies the first `length` tokens of page `src` to page `dst` in every layer: for
   * each (K or V, head) a run of `length * headDim` elements (what TVM's
   * `copy_single_page` kernel does), as device copies, queued in order on a GPU.
   */
  #copyPage = (src: number, dst: number, length: number): void => {
    const c = this.config;
    const el = elementBytes(c.dtype);
    const row = c.headDim * el, pageRows = c.pageSize * row;
    const perPage = 2 * c.numKvHeads * pageRows;
    for (const pages of this.#pages) {
      for (let kvHead = 0; kvHead < 2 * c.numKvHeads; kvHead++) {
        const offset = kvHead * pageRows;
        pages.device.copyBlock(
          pages.block,
          pages.byteOffset + src * perPage + offset,
          pages.block,
          pages.byteOffset + dst * perPage + offset,
          length * row,
        );
      }
    }
  };
}
