/**
 * `PageTable`: the bookkeeping of TVM's paged KV cache
 * (`PagedAttentionKVCacheObj` in `src/runtime/vm/paged_kv_cache.cc`, `Block` and
 * `Sequence` in `attn_utils.h`), without the K/V data: which pages each sequence
 * holds, and the small int32 arrays `begin_forward` builds for the attention kernels.
 *
 * ```text
 * pages      a pool of numPages pages of pageSize tokens; free ids on a stack (TVM's order)
 * block      pages of consecutive tokens; every page full but the last; a parent block index
 * sequence   its last block; the chain of parents is its prefix; a block forked from is shared
 *            (refs > 1) and never written again
 * ```
 *
 * The algorithms are TVM's, step for step, so page ids, free-page counts and every
 * array match TVM's for the same calls (tests/kv_state_differential_test.ts replays
 * a trace of TVM's runtime). What differs: every call checks its arguments and the
 * pages it will need before it changes anything, and a failure part-way (a copy that
 * throws) restores the state, so a refused call leaves the table as it was; TVM
 * checks some conditions only after it has changed the sequence (`begin_forward`
 * past the free pages leaves TVM's sequence longer and its pages partly taken).
 * Refused too where TVM is silent: a batch with one sequence twice, a batch larger
 * than `maxBatchSize`, more tokens than `prefillChunkSize` in one forward.
 *
 * No sliding window, attention sinks or token trees: their fields (sink length,
 * window offset) are always 0 here, and the arrays that carry them are zeros.
 *
 * Pure bookkeeping (imports nothing from devices): the layer check keeps it so.
 *
 * @module
 */

/** TVM's `kPagedKVCacheMaxBlockDepth`: page tables are built for at most this many depths. */
export const MAX_BLOCK_DEPTH = 2;

/** One block: consecutive tokens of one or more sequences (TVM's `Block`). */
interface Block {
  /** The pages, in order; all full except the last. */
  pageIds: number[];
  /** Tokens in this block. */
  seqLength: number;
  /** The position in the sequence of its first token (RoPE positions start here). */
  startPos: number;
  /** The parent block's index, or -1. */
  parent: number;
  /** Holders: the sequence whose last block it is, and each child block. */
  refs: number;
}

/** One sequence: its last block and its length (TVM's `Sequence`). */
interface Sequence {
  lastBlock: number;
  seqLength: number;
}

/** The arrays of one depth of a forward, as TVM's `*_on_depths_host_` hold them. */
export interface DepthPlan {
  /** Query ranges of the entries: entry `i` has queries `qoIndptr[i]..qoIndptr[i+1]`. */
  readonly qoIndptr: Int32Array;
  /** Page ranges of the entries in `pageIndices`. */
  readonly pageIndptr: Int32Array;
  /** The page ids, entry after entry. */
  readonly pageIndices: Int32Array;
  /** Tokens in each entry's last page (0 for an entry with no pages). */
  readonly lastPageLen: Int32Array;
  /** The position of each entry's first cached token (TVM's `k_rope_pos_offset`). */
  readonly kRopePosOffset: Int32Array;
  /** Whether TVM runs the decode kernel at this depth (else the prefill kernel). */
  readonly useDecodeKernel: boolean;
}

/** What `beginForward` built: everything the attention of one forward needs. */
export interface ForwardPlan {
  /** The sequences, in batch order. */
  readonly seqIds: readonly number[];
  /** Tokens appended to each. */
  readonly appendLengths: readonly number[];
  /** Total tokens of the forward (the rows of q/k/v). */
  readonly totalLength: number;
  /** Every append is of one token. */
  readonly isDecode: boolean;
  /**
   * Whether K/V are appended before attention (a decode: the page tables include the
   * new tokens) or after it (a prefill: the new tokens attend to each other through
   * the ragged kernel, and the page tables hold only what was cached before).
   */
  readonly appendBeforeAttention: boolean;
  /** The page tables of each depth (one or two). */
  readonly depths: readonly DepthPlan[];
  /** `[0, l0, l0+l1, …]`: each sequence's rows of q/k/v (TVM's `cur_append_length_indptr`). */
  readonly appendLengthIndptr: Int32Array;
  /** Each sequence's length before the forward: the position of its first new token. */
  readonly kRaggedRopePosOffset: Int32Array;
  /** The position in its sequence of each new token (the RoPE position). */
  readonly qRopePositionMap: Int32Array;
  /** Where each new token's K/V go: `page * pageSize + offset`. */
  readonly appendPositionMap: Int32Array;
  /** Tokens in each sequence's last block after the forward (TVM's `kv_len_arr`). */
  readonly kvLengths: Int32Array;
}

/** The sizes a table is made with. */
export interface PageTableLimits {
  /** Tokens per page. */
  readonly pageSize: number;
  /** Pages in the pool. */
  readonly numPages: number;
  /** Most sequences in one forward (TVM's `reserved_num_seqs`). */
  readonly maxBatchSize: number;
  /** Most tokens in one forward. */
  readonly prefillChunkSize: number;
}

/** Copies the first `length` tokens of page `src` to page `dst` (a partial page, on a fork). */
export type CopyPage = (src: number, dst: number, length: number) => void;

function checkId(v: unknown, who: string, what: string): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v)) {
    throw new TypeError(`${who}: ${what} must be an integer, got ${String(v)}`);
  }
  return v;
}

/**
 * The page and block bookkeeping of a paged KV cache, with TVM's semantics.
 *
 * @example Two sequences sharing a prefix
 * ```ts
 * import { PageTable } from "./page_table.ts";
 * import { assertEquals } from "@std/assert";
 *
 * const t = new PageTable({ pageSize: 4, numPages: 8, maxBatchSize: 4, prefillChunkSize: 32 });
 * t.addSequence(0);
 * t.beginForward([0], [6]); // two pages
 * t.forkSequence(0, 1, 5, () => {}); // shares the first page, copies one token of the second
 * assertEquals([t.numAvailablePages, t.totalSequenceLength], [5, 11]);
 * ```
 */
export class PageTable {
  readonly pageSize: number;
  readonly numPages: number;
  readonly maxBatchSize: number;
  readonly prefillChunkSize: number;

  /** The free page ids, a stack: TVM's order (pages 0, 1, … are taken first). */
  #freePages = new Int32Array(0);
  #freeCount = 0;
  #blocks: Block[] = [];
  #freeBlocks: number[] = [];
  #sequences = new Map<number, Sequence>();

  /** A table of `numPages` free pages. */
  constructor(limits: PageTableLimits) {
    this.pageSize = limits.pageSize;
    this.numPages = limits.numPages;
    this.maxBatchSize = limits.maxBatchSize;
    this.prefillChunkSize = limits.prefillChunkSize;
    this.clear();
  }

  /** Removes every sequence; every page is free again (TVM's `Clear`). */
  clear(): void {
    this.#sequences.clear();
    if (this.#freePages.length !== this.numPages) this.#freePages = new Int32Array(this.numPages);
    for (let i = 0; i < this.numPages; i++) this.#freePages[i] = this.numPages - 1 - i;
    this.#freeCount = this.numPages;
    this.#blocks = [];
    this.#freeBlocks = [];
  }

  /** Free pages (TVM's `GetNumAvailablePages`). */
  get numAvailablePages(): number {
    return this.#freeCount;
  }

  /** The sum of the sequences' lengths (TVM's `GetTotalSequenceLength`). */
  get totalSequenceLength(): number {
    let total = 0;
    for (const s of this.#sequences.values()) total += s.seqLength;
    return total;
  }

  /** The sequence ids, in the order they were added. */
  get sequenceIds(): number[] {
    return [...this.#sequences.keys()];
  }

  /** Whether `seqId` is in the table. */
  has(seqId: number): boolean {
    return this.#sequences.has(seqId);
  }

  /** The length of sequence `seqId`. */
  sequenceLength(seqId: number, who = "sequence_length"): number {
    return this.#sequence(seqId, who).seqLength;
  }

  /**
   * Where each token of sequence `seqId` lives: `page * pageSize + offset` for
   * positions `0..length-1` (what TVM's `DebugGetKV` computes).
   */
  positionMap(seqId: number, who = "position_map"): Int32Array {
    const seq = this.#sequence(seqId, who);
    const out = new Int32Array(seq.seqLength);
    let at = 0;
    for (const b of this.#trace(seq)) {
      const block = this.#blocks[b];
      for (let i = 0; i < block.seqLength; i++) {
        out[at++] = block.pageIds[Math.floor(i / this.pageSize)] * this.pageSize +
          i % this.pageSize;
      }
    }
    return out;
  }

  /** Adds an empty sequence (TVM's `AddSequence`). */
  addSequence(seqId: number): void {
    const who = "kv_state_add_sequence";
    checkId(seqId, who, "seq_id");
    if (this.#sequences.has(seqId)) {
      throw new RangeError(`${who}: the sequence ${seqId} is already in the KV cache`);
    }
    this.#addSequence(seqId, this.#freeBlock());
  }

  /** Removes a sequence, freeing the blocks only it held (TVM's `RemoveSequence`). */
  removeSequence(seqId: number): void {
    const who = "kv_state_remove_sequence";
    checkId(seqId, who, "seq_id");
    this.#remove(seqId, this.#sequence(seqId, who));
  }

  /**
   * Adds `childId` as a copy of the first `forkPos` tokens of `parentId` (-1: all of
   * them), sharing the parent's full pages and copying a partial last page with
   * `copyPage` (TVM's `ForkSequence`).
   */
  forkSequence(parentId: number, childId: number, forkPos: number, copyPage: CopyPage): void {
    const who = "kv_state_fork_sequence";
    checkId(parentId, who, "parent_seq_id");
    checkId(childId, who, "child_seq_id");
    checkId(forkPos, who, "fork_pos");
    const parent = this.#sequence(parentId, who, "parent sequence");
    if (this.#sequences.has(childId)) {
      throw new RangeError(`${who}: the child sequence ${childId} is already in the KV cache`);
    }
    if (forkPos < -1 || forkPos > parent.seqLength) {
      throw new RangeError(
        `${who}: fork_pos ${forkPos} is not in -1..${parent.seqLength} (the parent's length)`,
      );
    }
    const pos = forkPos === -1 ? parent.seqLength : forkPos;
    // Blocks before the forked one are whole pages, so the copied part is pos % pageSize.
    if (pos % this.pageSize !== 0 && this.#freeCount === 0) {
      throw new RangeError(
        `${who}: forking at ${pos} copies a partial page, and the KV cache has no free page`,
      );
    }
    this.#atomically(() => this.#fork(parentId, childId, pos, copyPage));
  }

  /**
   * Drops the last `n` tokens of a sequence, freeing pages it alone held; popping into
   * a shared prefix forks the sequence at its new length first (TVM's `PopN`).
   */
  popN(seqId: number, n: number, copyPage: CopyPage): void {
    const who = "kv_state_popn";
    checkId(seqId, who, "seq_id");
    checkId(n, who, "n");
    const seq = this.#sequence(seqId, who);
    if (n < 0 || n > seq.seqLength) {
      throw new RangeError(
        `${who}: cannot pop ${n} tokens from the sequence ${seqId} of length ${seq.seqLength}`,
      );
    }
    if (n === 0) return;
    this.#atomically(() => this.#popN(seqId, seq, n, copyPage));
  }

  /**
   * Starts a forward that appends `appendLengths[i]` tokens to sequence `seqIds[i]`:
   * reserves their pages and builds the arrays the attention kernels read (TVM's
   * `BeginForward` without a token tree).
   */
  beginForward(seqIds: readonly number[], appendLengths: readonly number[]): ForwardPlan {
    const who = "kv_state_begin_forward";
    if (seqIds.length !== appendLengths.length) {
      throw new RangeError(
        `${who}: ${seqIds.length} seq_ids but ${appendLengths.length} append_lengths`,
      );
    }
    if (seqIds.length === 0) throw new RangeError(`${who}: the batch is empty`);
    if (seqIds.length > this.maxBatchSize) {
      throw new RangeError(
        `${who}: ${seqIds.length} sequences exceed the cache's max batch size ${this.maxBatchSize}`,
      );
    }
    const sequences: Sequence[] = [];
    const seen = new Set<number>();
    let total = 0, needed = 0;
    for (let i = 0; i < seqIds.length; i++) {
      const id = checkId(seqIds[i], who, "a seq_id");
      const len = checkId(appendLengths[i], who, "an append length");
      const seq = this.#sequence(id, who);
      if (seen.has(id)) throw new RangeError(`${who}: the sequence ${id} is twice in the batch`);
      seen.add(id);
      if (len <= 0) {
        throw new RangeError(`${who}: the append length ${len} of sequence ${id} is not positive`);
      }
      const last = this.#blocks[seq.lastBlock];
      if (last.refs !== 1) {
        throw new RangeError(`${who}: the last block of sequence ${id} is shared`); // cannot happen
      }
      needed += Math.ceil((last.seqLength + len) / this.pageSize) - last.pageIds.length;
      total += len;
      sequences.push(seq);
    }
    if (total > this.prefillChunkSize) {
      throw new RangeError(
        `${who}: ${total} tokens exceed the cache's prefill chunk size ${this.prefillChunkSize}`,
      );
    }
    if (needed > this.#freeCount) {
      throw new RangeError(
        `${who}: the batch needs ${needed} new pages and the KV cache has ${this.#freeCount} free`,
      );
    }
    return this.#beginForward(seqIds, appendLengths, sequences);
  }

  // ---------------------------------------------------------------- TVM's algorithms

  #sequence(seqId: number, who: string, what = "sequence"): Sequence {
    const seq = this.#sequences.get(seqId);
    if (seq === undefined) {
      throw new RangeError(`${who}: the ${what} ${seqId} is not in the KV cache`);
    }
    return seq;
  }

  /** Runs `fn`; if it throws, puts every page, block and sequence back as they were. */
  #atomically(fn: () => void): void {
    const pages = this.#freePages.slice(0, this.#freeCount), count = this.#freeCount;
    const freeBlocks = [...this.#freeBlocks];
    const blocks = this.#blocks.map((b) => ({ ...b, pageIds: [...b.pageIds] }));
    const sequences = new Map([...this.#sequences].map(([k, s]) => [k, { ...s }]));
    try {
      fn();
    } catch (e) {
      this.#freePages.set(pages);
      this.#freeCount = count;
      this.#freeBlocks = freeBlocks;
      this.#blocks = blocks;
      this.#sequences = sequences;
      throw e;
    }
  }

  #freePage(): number {
    // Callers check the free pages first; this is the last line of defence.
    if (this.#freeCount === 0) {
      throw new RangeError("kv_state: the KV cache is full: no page is free");
    }
    return this.#freePages[--this.#freeCount];
  }

  #pushFree(page: number): void {
    this.#freePages[this.#freeCount++] = page;
  }

  #freeBlock(): number {
    const reused = this.#freeBlocks.pop();
    const fresh: Block = { pageIds: [], seqLength: 0, startPos: 0, parent: -1, refs: 0 };
    if (reused !== undefined) {
      this.#blocks[reused] = fresh;
      return reused;
    }
    this.#blocks.push(fresh);
    return this.#blocks.length - 1;
  }

  /** TVM's `Sequence(pool, last_block)`: a holder of the block; its length from the chain. */
  #addSequence(seqId: number, lastBlock: number): void {
    this.#blocks[lastBlock].refs++;
    let length = 0;
    for (let b = lastBlock; b !== -1; b = this.#blocks[b].parent) {
      length += this.#blocks[b].seqLength;
    }
    this.#sequences.set(seqId, { lastBlock, seqLength: length });
  }

  /** The blocks of a sequence, root first. */
  #trace(seq: Sequence): number[] {
    const trace: number[] = [];
    for (let b = seq.lastBlock; b !== -1; b = this.#blocks[b].parent) trace.push(b);
    return trace.reverse();
  }

  #remove(seqId: number, seq: Sequence): void {
    let b = seq.lastBlock;
    while (b !== -1 && this.#blocks[b].refs === 1) {
      for (const page of this.#blocks[b].pageIds) this.#pushFree(page);
      this.#freeBlocks.push(b);
      b = this.#blocks[b].parent;
    }
    if (b !== -1) this.#blocks[b].refs--;
    this.#sequences.delete(seqId);
  }

  #fork(parentId: number, childId: number, pos: number, copyPage: CopyPage): void {
    const parent = this.#sequences.get(parentId)!;
    const blocks = this.#blocks;
    if (
      pos === parent.seqLength && pos % this.pageSize === 0 &&
      blocks[parent.lastBlock].seqLength > 0
    ) {
      // The parent goes on decoding after the fork: its new tokens go to a new empty block.
      const fresh = this.#freeBlock();
      blocks[fresh].startPos = parent.seqLength;
      blocks[fresh].parent = parent.lastBlock;
      blocks[fresh].refs = 1;
      parent.lastBlock = fresh;
    }
    const child = this.#freeBlock();
    const trace = this.#trace(parent);
    let inBlock = pos;
    for (const forked of trace) {
      if (forked !== trace[trace.length - 1] && blocks[forked].seqLength <= inBlock) {
        inBlock -= blocks[forked].seqLength;
        continue;
      }
      const inPage = inBlock % this.pageSize;
      const moved = inBlock - inPage;
      const movedPages = moved / this.pageSize;
      if (movedPages === 0) {
        // Forked in the block's first page: the child hangs off the block's parent.
        const up = blocks[forked].parent;
        if (up !== -1) blocks[up].refs++;
        blocks[child].parent = up;
      } else {
        // The block's leading full pages become a new shared parent of both.
        const shared = this.#freeBlock();
        blocks[shared].parent = blocks[forked].parent;
        blocks[forked].parent = shared;
        blocks[child].parent = shared;
        blocks[shared].refs = 2;
        blocks[shared].pageIds = blocks[forked].pageIds.splice(0, movedPages);
        blocks[shared].startPos = blocks[forked].startPos;
        blocks[forked].startPos += moved;
        blocks[shared].seqLength = moved;
        blocks[forked].seqLength -= moved;
      }
      blocks[child].startPos = pos - inPage;
      blocks[child].seqLength = inPage;
      if (inPage > 0) {
        const src = blocks[forked].pageIds[0];
        const dst = this.#freePage();
        blocks[child].pageIds.push(dst);
        copyPage(src, dst, inPage);
      }
      break;
    }
    this.#addSequence(childId, child);
  }

  #popN(seqId: number, seq: Sequence, n: number, copyPage: CopyPage): void {
    const blocks = this.#blocks;
    let b = seq.lastBlock;
    while (b !== -1 && blocks[b].refs === 1) {
      const block = blocks[b];
      if (n > block.seqLength) {
        n -= block.seqLength;
        seq.seqLength -= block.seqLength;
        for (const page of block.pageIds) this.#pushFree(page);
        this.#freeBlocks.push(b);
        b = block.parent;
        seq.lastBlock = b;
        continue;
      }
      const keep = Math.ceil((block.seqLength - n) / this.pageSize);
      while (block.pageIds.length > keep) this.#pushFree(block.pageIds.pop()!);
      seq.seqLength -= n;
      block.seqLength -= n;
      n = 0;
      break;
    }
    if (n > 0) {
      // The rest is shared: fork the kept prefix to a temporary id, drop the old sequence,
      // and give the fork the sequence's id (TVM's temporary id is -1 - seq_id).
      const temp = -1 - seqId;
      if (this.#sequences.has(temp)) {
        throw new RangeError(
          `kv_state_popn: popping into a shared prefix needs the id ${temp}, which a sequence holds`,
        );
      }
      if ((seq.seqLength - n) % this.pageSize !== 0 && this.#freeCount === 0) {
        throw new RangeError(
          `kv_state_popn: popping into a shared prefix copies a partial page, and the KV cache has no free page`,
        );
      }
      this.#fork(seqId, temp, seq.seqLength - n, copyPage);
      this.#remove(seqId, seq);
      this.#sequences.set(seqId, this.#sequences.get(temp)!);
      this.#sequences.delete(temp);
    }
  }

  /** The block ids of each depth, and each sequence's blocks past the last depth. */
  #blockIdsOnDepths(sequences: readonly Sequence[]): [number[][], number[][]] {
    const traces = sequences.map((s) => this.#trace(s));
    let depths = 0;
    for (const t of traces) depths = Math.min(MAX_BLOCK_DEPTH, Math.max(depths, t.length));
    const onDepths: number[][] = [];
    for (let d = 0; d < depths; d++) onDepths.push(traces.map((t) => d < t.length ? t[d] : -1));
    return [onDepths, traces.map((t) => t.slice(MAX_BLOCK_DEPTH))];
  }

  /**
   * TVM's `GetChunkedBlockIds`: the (block, query count) entries of one depth, with
   * adjacent sequences on the same block coalesced into one prefill entry unless the
   * decode kernel is used (or at the last depth, where trailing blocks are appended).
   */
  #chunkedBlockIds(
    blockIds: readonly number[],
    coalesce: boolean,
    lengths: readonly number[],
    isDecode: boolean,
  ): [[number, number][], boolean] {
    const pagesOf = (b: number) => (b === -1 ? 0 : this.#blocks[b].pageIds.length);
    const uncoalesced: [number, number][] = [], coalesced: [number, number][] = [];
    let current = blockIds[0], chunk = lengths[0];
    let pagesCoalesced = 0, pagesUncoalesced = pagesOf(blockIds[0]);
    for (let i = 1; i < blockIds.length; i++) {
      pagesUncoalesced += pagesOf(blockIds[i]);
      uncoalesced.push([blockIds[i - 1], lengths[i - 1]]);
      if (blockIds[i] === current) {
        chunk += lengths[i];
      } else {
        coalesced.push([current, chunk]);
        pagesCoalesced += pagesOf(current);
        current = blockIds[i];
        chunk = lengths[i];
      }
    }
    uncoalesced.push([blockIds[blockIds.length - 1], lengths[lengths.length - 1]]);
    coalesced.push([current, chunk]);
    pagesCoalesced += pagesOf(current);
    const ratio = pagesCoalesced > 0 ? pagesUncoalesced / pagesCoalesced : 0;
    const useDecode = isDecode && ratio < 32;
    return [useDecode || !coalesce ? uncoalesced : coalesced, useDecode];
  }

  /** TVM's `ReserveAppendLengthInSeq` (no sliding window): pages for `length` more tokens. */
  #reserve(seq: Sequence, length: number): void {
    const block = this.#blocks[seq.lastBlock];
    const target = Math.ceil((block.seqLength + length) / this.pageSize);
    while (block.pageIds.length < target) block.pageIds.push(this.#freePage());
    block.seqLength += length;
  }

  #beginForward(
    seqIds: readonly number[],
    lengths: readonly number[],
    sequences: Sequence[],
  ): ForwardPlan {
    const blocks = this.#blocks;
    const n = sequences.length;
    const lastBefore = sequences.map((s) => blocks[s.lastBlock].seqLength);
    const ragged = new Int32Array(n);
    let isDecode = true;
    for (let i = 0; i < n; i++) {
      ragged[i] = sequences[i].seqLength;
      sequences[i].seqLength += lengths[i];
      if (lengths[i] !== 1) isDecode = false;
    }
    const [onDepths, trailing] = this.#blockIdsOnDepths(sequences);
    const chunked: [number, number][][] = [], useDecode: boolean[] = [];
    for (let d = 0; d < onDepths.length; d++) {
      const [ids, decode] = this.#chunkedBlockIds(
        onDepths[d],
        d !== MAX_BLOCK_DEPTH - 1,
        lengths,
        isDecode,
      );
      chunked.push(ids);
      useDecode.push(decode);
    }
    const appendBefore = useDecode[useDecode.length - 1];
    if (appendBefore) { for (let i = 0; i < n; i++) this.#reserve(sequences[i], lengths[i]); }

    const depths: DepthPlan[] = [];
    for (let d = 0; d < onDepths.length; d++) {
      const entries = chunked[d];
      const qoIndptr = [0], pageIndptr = [0], pageIndices: number[] = [];
      const lastPageLen: number[] = [], kRope: number[] = [];
      for (let i = 0; i < entries.length; i++) {
        const [blockId, chunk] = entries[i];
        qoIndptr.push(qoIndptr[qoIndptr.length - 1] + chunk);
        if (blockId === -1) {
          pageIndptr.push(pageIndptr[pageIndptr.length - 1]);
          lastPageLen.push(0);
          kRope.push(0);
          continue;
        }
        const block = blocks[blockId];
        let pages = block.pageIds.length, length = block.seqLength;
        for (const page of block.pageIds) pageIndices.push(page);
        if (d === MAX_BLOCK_DEPTH - 1) {
          // The last depth takes the sequence's deeper blocks too, as one run of pages.
          for (const t of trailing[i]) {
            for (const page of blocks[t].pageIds) pageIndices.push(page);
            pages += blocks[t].pageIds.length;
            length += blocks[t].seqLength;
          }
        }
        pageIndptr.push(pageIndptr[pageIndptr.length - 1] + pages);
        lastPageLen.push(length === 0 ? 0 : (length - 1) % this.pageSize + 1);
        kRope.push(block.startPos);
      }
      depths.push({
        qoIndptr: Int32Array.from(qoIndptr),
        pageIndptr: Int32Array.from(pageIndptr),
        pageIndices: Int32Array.from(pageIndices),
        lastPageLen: Int32Array.from(lastPageLen),
        kRopePosOffset: Int32Array.from(kRope),
        useDecodeKernel: useDecode[d],
      });
    }
    if (!appendBefore) { for (let i = 0; i < n; i++) this.#reserve(sequences[i], lengths[i]); }

    let total = 0;
    for (const l of lengths) total += l;
    const indptr = new Int32Array(n + 1), qPos = new Int32Array(total);
    const append = new Int32Array(total), kvLengths = new Int32Array(n);
    let at = 0;
    for (let i = 0; i < n; i++) {
      indptr[i + 1] = indptr[i] + lengths[i];
      const block = blocks[sequences[i].lastBlock];
      kvLengths[i] = block.seqLength;
      for (let p = 0; p < lengths[i]; p++, at++) {
        qPos[at] = ragged[i] + p;
        const offset = lastBefore[i] + p;
        append[at] = block.pageIds[Math.floor(offset / this.pageSize)] * this.pageSize +
          offset % this.pageSize;
      }
    }
    return {
      seqIds: [...seqIds],
      appendLengths: [...lengths],
      totalLength: total,
      isDecode,
      appendBeforeAttention: appendBefore,
      depths,
      appendLengthIndptr: indptr,
      kRaggedRopePosOffset: ragged,
      qRopePositionMap: qPos,
      appendPositionMap: append,
      kvLengths,
    };
  }
}
