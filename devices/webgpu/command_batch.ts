/**
 * Command batching for one WebGPU device: the open command encoder that every
 * kernel and device-side copy appends to, its submission, and the error
 * scopes that turn GPU validation and out-of-memory errors into rejections.
 *
 * Why batch. On the software adapter this project is measured on, waiting for
 * the GPU costs about 11 ms however little work was queued (Deno's `mapAsync`
 * polls the device, then sleeps 10 ms before it looks at the result), while
 * one more dispatch in an open encoder costs about 50 µs. So nothing here ever waits:
 * work accumulates in one encoder until `flush()` (the VM calls it when a VM
 * call ends) or until a value must be read back, and only the read waits.
 *
 * Ordering contract. Everything a device does to its buffers goes through
 * this one encoder or happens when the encoder is empty, so the GPU executes
 * it in exactly the order the program issued it. Two consequences the rest of
 * the backend relies on:
 *
 * - `queue.writeBuffer` runs on the queue timeline when it is called, that is
 *   *before* the command buffer still being encoded here. A write may use it
 *   only while `pending` is false; otherwise it must be encoded as a copy from
 *   a staging buffer (see `WebGPUDevice.writeBlock`).
 * - A buffer that recorded work still uses must not be destroyed before that
 *   work is submitted (submitting a command buffer that references a destroyed
 *   buffer is a validation error). `destroyAfterSubmit` defers it. Once
 *   submitted, `destroy()` is safe: WebGPU keeps the memory alive until the
 *   queued work that uses it has finished.
 *
 * Between consecutive dispatches WebGPU itself orders storage-buffer accesses
 * (each dispatch is its own usage scope), so kernels may share one compute
 * pass; the pass is ended only when a copy has to be recorded or at submit.
 *
 * @module
 */

import { WebGPUError } from "../../ground/errors.ts";

/** One workgroup count per dimension at most; larger dispatches are folded into 2-D. */
export const MAX_WORKGROUPS_PER_DIMENSION = 65535;

/**
 * Splits a linear workgroup count into an `[x, y]` dispatch that respects the
 * per-dimension limit. Shaders recover the linear index as
 * `workgroup_id.y * num_workgroups.x + workgroup_id.x` and must guard against
 * the few extra workgroups the rounding adds.
 */
export function dispatchSize(
  workgroups: number,
  limit = MAX_WORKGROUPS_PER_DIMENSION,
): [number, number] {
  if (workgroups <= limit) return [Math.max(1, workgroups), 1];
  const y = Math.ceil(workgroups / limit);
  return [Math.ceil(workgroups / y), y];
}

/** Timestamp queries per query set (WebGPU allows at most 4096): two per timed dispatch. */
const QUERIES_PER_SET = 4096;
/** Buffer usages, as numbers (see TENSOR_USAGE in webgpu_device.ts): MAP_READ, COPY_SRC, COPY_DST, QUERY_RESOLVE. */
const MAP_READ = 0x1, COPY_SRC = 0x4, COPY_DST = 0x8, QUERY_RESOLVE = 0x200;

/** What a timed batch records: a query pair and a tag per dispatch. */
class TimestampRecording {
  readonly sets: GPUQuerySet[] = [];
  /** The tag of each timed dispatch, in order; dispatch k writes queries 2k and 2k + 1. */
  readonly tags: number[] = [];
  /** When each dispatch was submitted (`performance.now()`); NaN until then. */
  readonly submittedAt: number[] = [];
  tag = -1;
}

/** One dispatch timed with timestamp queries (`CommandBatch.stopTimestamps`). */
export interface TimedDispatch {
  /** The tag it was recorded under. */
  tag: number;
  /** Start, in nanoseconds after the first timed dispatch started. */
  startNs: number;
  /** End, on the same clock. */
  endNs: number;
  /** When the host submitted it. */
  submittedAtMs: number;
}

/** The open encoder of one `GPUDevice`, with submission and error tracking. */
export class CommandBatch {
  /** The WebGPU device commands are recorded for. */
  readonly gpu: GPUDevice;
  #encoder: GPUCommandEncoder | null = null;
  #pass: GPUComputePassEncoder | null = null;
  #recorded = 0;
  #destroyLater: GPUBuffer[] = [];
  #scopeOpen = false;
  /** Error scopes popped whose outcome has not arrived yet. */
  #inFlightScopes = 0;
  /**
   * Settles when `#inFlightScopes` next reaches 0: every waiting
   * `checkErrors()` shares it. (One `Promise.all` over the scopes per waiter
   * made N concurrent readbacks cost O(N²): 3,000 ran V8 out of memory.)
   */
  #idle: { promise: Promise<void>; resolve: () => void } | null = null;
  #firstError: WebGPUError | null = null;
  #submits = 0;
  #dispatches = 0;
  #timing: TimestampRecording | null = null;

  /** Starts with nothing recorded. */
  constructor(gpu: GPUDevice) {
    this.gpu = gpu;
    // Errors raised outside our scopes (another library's calls, say) would
    // otherwise only be printed; keep them so the next read reports them.
    gpu.addEventListener("uncapturederror", (event) => {
      const e = (event as GPUUncapturedErrorEvent).error;
      this.#record(e);
    });
  }

  /** Command buffers submitted so far (one per flush that had work). */
  get submitCount(): number {
    return this.#submits;
  }

  /** Compute dispatches recorded so far. */
  get dispatchCount(): number {
    return this.#dispatches;
  }

  /** True while the open encoder holds recorded commands not yet submitted. */
  get pending(): boolean {
    return this.#recorded > 0;
  }

  /**
   * Opens the error scopes that will cover every WebGPU call until the next
   * flush. Device methods call it before any call that can fail
   * (`createBuffer`, `writeBuffer`, pipeline and bind group creation), so a
   * failure is tied to the batch and reported by the read that follows.
   */
  openScope(): void {
    if (this.#scopeOpen) return;
    this.gpu.pushErrorScope("out-of-memory");
    this.gpu.pushErrorScope("validation");
    this.gpu.pushErrorScope("internal");
    this.#scopeOpen = true;
  }

  /** Records a compute dispatch of `[x, y, z]` workgroups. */
  dispatch(pipeline: GPUComputePipeline, bindGroup: GPUBindGroup, x: number, y = 1, z = 1): void {
    this.openScope();
    if (this.#timing !== null) return this.#timedDispatch(pipeline, bindGroup, x, y, z);
    if (this.#pass === null) this.#pass = this.#encoderNow().beginComputePass();
    this.#pass.setPipeline(pipeline);
    this.#pass.setBindGroup(0, bindGroup);
    this.#pass.dispatchWorkgroups(x, y, z);
    this.#recorded++;
    this.#dispatches++;
  }

  /**
   * While timing: the dispatch in a compute pass of its own whose
   * `timestampWrites` record when the pass starts and ends on the GPU.
   * Passes cost a little each, which is why only a profile does this.
   */
  #timedDispatch(
    pipeline: GPUComputePipeline,
    bindGroup: GPUBindGroup,
    x: number,
    y: number,
    z: number,
  ) {
    const timing = this.#timing!;
    const encoder = this.#encoderNow();
    if (this.#pass !== null) {
      this.#pass.end();
      this.#pass = null;
    }
    const k = timing.tags.length;
    const set = Math.floor((2 * k) / QUERIES_PER_SET);
    if (set === timing.sets.length) {
      timing.sets.push(this.gpu.createQuerySet({ type: "timestamp", count: QUERIES_PER_SET }));
    }
    const first = (2 * k) % QUERIES_PER_SET;
    const pass = encoder.beginComputePass({
      timestampWrites: {
        querySet: timing.sets[set],
        beginningOfPassWriteIndex: first,
        endOfPassWriteIndex: first + 1,
      },
    });
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindGroup);
    pass.dispatchWorkgroups(x, y, z);
    pass.end();
    timing.tags.push(timing.tag);
    timing.submittedAt.push(NaN);
    this.#recorded++;
    this.#dispatches++;
  }

  /**
   * Starts timing every dispatch with timestamp queries (the device must
   * have been created with the `timestamp-query` feature); returns false
   * when a timing is already running.
   */
  startTimestamps(): boolean {
    if (this.#timing !== null) return false;
    this.#timing = new TimestampRecording();
    return true;
  }

  /** Dispatches recorded from now on are counted for `tag`. */
  setTimestampTag(tag: number): void {
    if (this.#timing !== null) this.#timing.tag = tag;
  }

  /**
   * Stops timing, submits everything recorded, and reads the timestamps
   * back (one wait for the GPU).
   */
  async stopTimestamps(): Promise<TimedDispatch[]> {
    const timing = this.#timing;
    this.#timing = null;
    if (timing === null) return [];
    const count = timing.tags.length;
    if (count === 0) return [];
    this.openScope();
    const encoder = this.#encoderNow();
    if (this.#pass !== null) {
      this.#pass.end();
      this.#pass = null;
    }
    const setBytes = QUERIES_PER_SET * 8;
    const size = timing.sets.length * setBytes;
    const resolved = this.gpu.createBuffer({
      label: "relaxvm timestamps",
      size,
      usage: QUERY_RESOLVE | COPY_SRC,
    });
    const read = this.gpu.createBuffer({
      label: "relaxvm timestamps read back",
      size,
      usage: MAP_READ | COPY_DST,
    });
    timing.sets.forEach((set, i) => {
      const queries = Math.min(QUERIES_PER_SET, 2 * count - i * QUERIES_PER_SET);
      encoder.resolveQuerySet(set, 0, queries, resolved, i * setBytes);
    });
    encoder.copyBufferToBuffer(resolved, 0, read, 0, size);
    this.#recorded++;
    this.flush();
    const now = performance.now();
    const at = timing.submittedAt;
    for (let k = at.length - 1; k >= 0 && Number.isNaN(at[k]); k--) at[k] = now;
    let stamps: BigUint64Array;
    try {
      await this.checkErrors();
      await read.mapAsync(GPUMapMode.READ, 0, size);
      stamps = new BigUint64Array(read.getMappedRange(0, size).slice(0));
      read.unmap();
    } finally {
      read.destroy();
      resolved.destroy();
      for (const set of timing.sets) set.destroy();
    }
    let first = stamps[0];
    for (let k = 0; k < count; k++) if (stamps[2 * k] < first) first = stamps[2 * k];
    return timing.tags.map((tag, k) => ({
      tag,
      startNs: Number(stamps[2 * k] - first),
      endNs: Number(stamps[2 * k + 1] - first),
      submittedAtMs: timing.submittedAt[k],
    }));
  }

  /** Records a buffer-to-buffer copy (offsets and size multiples of 4, ranges not overlapping). */
  copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, nbytes: number): void {
    this.openScope();
    const encoder = this.#encoderNow();
    if (this.#pass !== null) {
      this.#pass.end();
      this.#pass = null;
    }
    encoder.copyBufferToBuffer(src, srcOffset, dst, dstOffset, nbytes);
    this.#recorded++;
  }

  /**
   * Destroys `buffer` once no recorded-but-unsubmitted command can use it:
   * now when nothing is pending, else right after the next submit.
   */
  destroyAfterSubmit(buffer: GPUBuffer): void {
    if (this.#recorded === 0) buffer.destroy();
    else this.#destroyLater.push(buffer);
  }

  /**
   * Submits the recorded commands, if any, without waiting, and closes the
   * error scopes; their outcome is reported by the next `checkErrors()`.
   */
  flush(): void {
    if (this.#encoder !== null) {
      if (this.#pass !== null) {
        this.#pass.end();
        this.#pass = null;
      }
      const commands = this.#encoder.finish();
      this.#encoder = null;
      this.gpu.queue.submit([commands]);
      this.#submits++;
      const timing = this.#timing;
      if (timing !== null) {
        const now = performance.now();
        const at = timing.submittedAt;
        for (let k = at.length - 1; k >= 0 && Number.isNaN(at[k]); k--) at[k] = now;
      }
      this.#recorded = 0;
      for (const b of this.#destroyLater) b.destroy();
      this.#destroyLater = [];
    }
    if (this.#scopeOpen) {
      this.#scopeOpen = false;
      // Popped in the reverse order of pushing: internal, validation, out-of-memory.
      for (let i = 0; i < 3; i++) this.#track(this.gpu.popErrorScope());
    }
  }

  /**
   * Resolves once every closed error scope has reported; rejects with the
   * first error found since the last check (and forgets it, so the device
   * stays usable for the next batch).
   */
  async checkErrors(): Promise<void> {
    if (this.#inFlightScopes > 0) {
      if (this.#idle === null) {
        let resolve!: () => void;
        const promise = new Promise<void>((r) => resolve = r);
        this.#idle = { promise, resolve };
      }
      await this.#idle.promise;
    }
    const e = this.#firstError;
    this.#firstError = null;
    if (e !== null) throw e;
  }

  /** Marks the device lost: every later check rejects. */
  lose(message: string): void {
    this.#record(new WebGPUError("device-lost", message));
  }

  #encoderNow(): GPUCommandEncoder {
    if (this.#encoder === null) this.#encoder = this.gpu.createCommandEncoder();
    return this.#encoder;
  }

  #track(scope: Promise<GPUError | null>): void {
    this.#inFlightScopes++;
    scope.then(
      (e) => this.#record(e),
      (e) => this.#record(e as Error),
    ).finally(() => {
      if (--this.#inFlightScopes > 0) return;
      const idle = this.#idle;
      this.#idle = null;
      idle?.resolve();
    });
  }

  #record(e: GPUError | Error | null): void {
    if (e === null || this.#firstError !== null) return;
    if (e instanceof WebGPUError) {
      this.#firstError = e;
      return;
    }
    const kind = e instanceof GPUOutOfMemoryError
      ? "out-of-memory"
      : e instanceof GPUValidationError
      ? "validation"
      : "internal";
    this.#firstError = new WebGPUError(kind, e.message);
  }
}
