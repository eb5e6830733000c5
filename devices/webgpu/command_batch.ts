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
 * This file is browser-safe: no `Deno.*`.
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

/** The open encoder of one `GPUDevice`, with submission and error tracking. */
export class CommandBatch {
  /** The WebGPU device commands are recorded for. */
  readonly gpu: GPUDevice;
  #encoder: GPUCommandEncoder | null = null;
  #pass: GPUComputePassEncoder | null = null;
  #recorded = 0;
  #destroyLater: GPUBuffer[] = [];
  #scopeOpen = false;
  #inFlightScopes = new Set<Promise<unknown>>();
  #firstError: WebGPUError | null = null;
  #submits = 0;
  #dispatches = 0;

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

  /** Records a compute dispatch of `[x, y]` workgroups. */
  dispatch(pipeline: GPUComputePipeline, bindGroup: GPUBindGroup, x: number, y = 1): void {
    this.openScope();
    if (this.#pass === null) this.#pass = this.#encoderNow().beginComputePass();
    this.#pass.setPipeline(pipeline);
    this.#pass.setBindGroup(0, bindGroup);
    this.#pass.dispatchWorkgroups(x, y);
    this.#recorded++;
    this.#dispatches++;
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
    while (this.#inFlightScopes.size > 0) await Promise.all(this.#inFlightScopes);
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
    const p = scope.then(
      (e) => this.#record(e),
      (e) => this.#record(e as Error),
    ).finally(() => this.#inFlightScopes.delete(p));
    this.#inFlightScopes.add(p);
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
