/**
 * Staging buffers for reading results back (`MAP_READ | COPY_DST`), kept for
 * reuse: creating a mappable buffer per read costs an allocation and a
 * zero-fill, which is noticeable for the 64 MiB results benchmarks read.
 *
 * A buffer returns to the pool only after it has been unmapped, so one that
 * is still being mapped by an earlier read can never be handed out again.
 *
 * @module
 */

/** Keep at most this many bytes of idle staging buffers. */
const MAX_POOLED_BYTES = 256 * 1024 * 1024;

/** A pool of mappable staging buffers keyed by size. */
export class ReadbackPool {
  readonly #gpu: GPUDevice;
  readonly #free = new Map<number, GPUBuffer[]>();
  #pooledBytes = 0;

  /** A pool for `gpu`. */
  constructor(gpu: GPUDevice) {
    this.#gpu = gpu;
  }

  /** A staging buffer of at least `nbytes` (rounded to a size class). */
  acquire(nbytes: number): GPUBuffer {
    const size = sizeClass(nbytes);
    const pooled = this.#free.get(size)?.pop();
    if (pooled !== undefined) {
      this.#pooledBytes -= size;
      return pooled;
    }
    return this.#gpu.createBuffer({
      label: "relaxvm readback",
      size,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
  }

  /** Returns an unmapped staging buffer, or destroys it when the pool is full. */
  release(buffer: GPUBuffer): void {
    const size = buffer.size;
    if (this.#pooledBytes + size > MAX_POOLED_BYTES) {
      buffer.destroy();
      return;
    }
    let list = this.#free.get(size);
    if (list === undefined) {
      list = [];
      this.#free.set(size, list);
    }
    list.push(buffer);
    this.#pooledBytes += size;
  }
}

/** Powers of two from 256 bytes, so a few buffers serve reads of every size. */
function sizeClass(nbytes: number): number {
  return Math.max(256, 2 ** Math.ceil(Math.log2(nbytes)));
}
