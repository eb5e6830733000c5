/**
 * Uniform buffers and bind groups, reused across dispatches.
 *
 * Uniform buffers are immutable and keyed by their contents. A kernel's
 * uniforms (shapes, strides, offsets, sizes) repeat whenever the same program
 * runs again, so a VM function called in a loop finds both its uniform
 * buffers and its bind groups ready. Immutability also removes a hazard: a
 * uniform buffer rewritten with `queue.writeBuffer` while an earlier dispatch
 * that reads it is still being encoded would be seen by that dispatch with the
 * *new* contents, since the write runs on the queue before the encoder is
 * submitted. Contents are filled through `mappedAtCreation`, which involves no
 * queue at all.
 *
 * Bind groups are keyed by layout and the identity of every buffer bound.
 * When a buffer is destroyed, `forget()` drops the bind groups that name it,
 * so a later buffer cannot be confused with it.
 *
 * @module
 */

import type { CommandBatch } from "./command_batch.ts";
import type { CachedLayout } from "./pipeline_cache.ts";

/** How many distinct uniform buffers to keep; the least recently used goes first. */
const MAX_UNIFORMS = 4096;
/** The size of every uniform buffer (all kernel structs are smaller; see `uniform`). */
export const UNIFORM_BYTES = 256;
/** How many bind groups to keep. */
const MAX_BIND_GROUPS = 8192;

/** Caches uniform buffers by contents and bind groups by the buffers they bind. */
export class BindingCache {
  readonly #gpu: GPUDevice;
  readonly #batch: CommandBatch;
  readonly #ids = new WeakMap<GPUBuffer, number>();
  #nextId = 1;
  readonly #uniforms = new Map<string, GPUBuffer>();
  readonly #groups = new Map<string, GPUBindGroup>();
  /** Bind group keys naming each buffer id, for `forget`. */
  readonly #groupsOf = new Map<number, Set<string>>();

  /** A cache for buffers of `batch.gpu`. */
  constructor(batch: CommandBatch) {
    this.#gpu = batch.gpu;
    this.#batch = batch;
  }

  /** Number of cached bind groups (for tests). */
  get bindGroupCount(): number {
    return this.#groups.size;
  }

  /** A uniform buffer holding exactly `words`. */
  uniform(words: Uint32Array): GPUBuffer {
    const key = words.join(",");
    let buf = this.#uniforms.get(key);
    if (buf !== undefined) {
      // Refresh its place in the least-recently-used order.
      this.#uniforms.delete(key);
      this.#uniforms.set(key, buf);
      return buf;
    }
    // Every uniform buffer is at least UNIFORM_BYTES long, whatever its struct needs.
    // wgpu (as in Deno 2.9) checks a dispatch against the minimum binding sizes of the
    // *first* pipeline set in a compute pass among those sharing a layout, not of the
    // current one: after a kernel whose struct is 36 bytes, binding a 32-byte uniform
    // for an 8-field kernel fails validation. One size for all sidesteps that.
    const size = Math.max(UNIFORM_BYTES, Math.ceil(words.byteLength / 16) * 16);
    buf = this.#gpu.createBuffer({
      label: "relaxvm uniforms",
      size,
      usage: GPUBufferUsage.UNIFORM,
      mappedAtCreation: true,
    });
    new Uint32Array(buf.getMappedRange()).set(words);
    buf.unmap();
    this.#uniforms.set(key, buf);
    if (this.#uniforms.size > MAX_UNIFORMS) {
      const [oldKey, old] = this.#uniforms.entries().next().value!;
      this.#uniforms.delete(oldKey);
      this.forget(old);
      // It may be bound by a dispatch recorded in the open encoder.
      this.#batch.destroyAfterSubmit(old);
    }
    return buf;
  }

  /** A bind group of `layout` binding `buffers` in order (storage buffers, then the uniform). */
  bindGroup(layout: CachedLayout, buffers: readonly GPUBuffer[]): GPUBindGroup {
    let key = layout.key;
    for (const b of buffers) key += `:${this.#id(b)}`;
    let group = this.#groups.get(key);
    if (group !== undefined) return group;
    group = this.#gpu.createBindGroup({
      layout: layout.bindGroupLayout,
      entries: buffers.map((buffer, binding) => ({ binding, resource: { buffer } })),
    });
    this.#groups.set(key, group);
    for (const b of buffers) {
      const id = this.#id(b);
      let keys = this.#groupsOf.get(id);
      if (keys === undefined) {
        keys = new Set();
        this.#groupsOf.set(id, keys);
      }
      keys.add(key);
    }
    if (this.#groups.size > MAX_BIND_GROUPS) {
      // Dropping a bind group is harmless: encoded commands keep what they use alive.
      const oldKey = this.#groups.keys().next().value!;
      this.#groups.delete(oldKey);
      for (const id of oldKey.split(":").slice(1)) this.#groupsOf.get(Number(id))?.delete(oldKey);
    }
    return group;
  }

  /** Drops every bind group that binds `buffer` (called before it is destroyed). */
  forget(buffer: GPUBuffer): void {
    const id = this.#ids.get(buffer);
    if (id === undefined) return;
    const keys = this.#groupsOf.get(id);
    if (keys !== undefined) {
      for (const k of keys) this.#groups.delete(k);
      this.#groupsOf.delete(id);
    }
    this.#ids.delete(buffer);
  }

  #id(buffer: GPUBuffer): number {
    let id = this.#ids.get(buffer);
    if (id === undefined) {
      id = this.#nextId++;
      this.#ids.set(buffer, id);
    }
    return id;
  }
}
