/**
 * The WebGPU device: tensor memory in `GPUBuffer`s, kernels recorded into one
 * open command encoder (devices/webgpu/command_batch.ts) and submitted by
 * `flush()` or by a read, so a whole VM call costs a single wait for the GPU.
 *
 * It calls no `Deno.*`: it only checks whether `globalThis.Deno` exists, to
 * pick how results are read back.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../../ground/brand.ts";
import { shared } from "../../ground/shared.ts";
import { BindingCache } from "./binding_cache.ts";
import { byteCopyProgram } from "./byte_copy.ts";
import { WebGPUError } from "../../ground/errors.ts";
import { CommandBatch } from "./command_batch.ts";
import { PipelineCache } from "./pipeline_cache.ts";
import { type GPUContext, runProgram } from "./kernel_program.ts";
import { ReadbackPool } from "./readback_pool.ts";
import { Device, type DeviceTimer, DLDeviceType } from "../device.ts";

/**
 * Usage of every tensor buffer: bound to kernels, and the source and target
 * of copies. Spelled as numbers (STORAGE | COPY_SRC | COPY_DST) because
 * `GPUBufferUsage` does not exist in runtimes without WebGPU, and importing
 * this module there must still work.
 */
const TENSOR_USAGE = 0x80 | 0x04 | 0x08;

/** Whether `getMappedRange` of a READ mapping returns a private copy (Deno does; see `readBlock`). */
const PRIVATE_READ_MAPPINGS =
  typeof (globalThis as { Deno?: { version?: { deno?: string } } }).Deno?.version?.deno ===
    "string";

/** Rounds up to a multiple of 4, the granularity of WebGPU copies. */
function ceil4(n: number): number {
  return Math.ceil(n / 4) * 4;
}

/**
 * Where a WebGPU device keeps the function that returns its kernel context
 * (set by `WebGPUDevice`'s static block). A `Symbol.for` key, so that the
 * kernels of another copy of the library reach the context of a device this
 * copy made (ground/shared.ts).
 */
const CONTEXT: unique symbol = Symbol.for("relaxvm.webgpu.kernelContext.v1") as never;

const WEBGPU_DEVICE_BRAND = brandKey("WebGPUDevice");

/**
 * A WebGPU device. Obtain one with `await webgpu()`.
 *
 * Blocks are `GPUBuffer`s. Every operation on them is recorded or queued in
 * program order and nothing waits for the GPU except `readBlock` (behind
 * `NDArray.data()`), which first submits all recorded work.
 *
 * @example Run a VM call on the GPU: recorded, submitted once, read back
 * ```ts
 * import { ExecBuilder, type NDArray, tensor, VirtualMachine, webgpu } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * // Needs a WebGPU adapter (Deno on Linux finds a software one). Runs as a
 * // script; the doc tests only type-check it, as the GPU tests run elsewhere.
 * if (import.meta.main) {
 *   const gpu = await webgpu();
 *   const ib = new ExecBuilder();
 *   ib.function("main", { num_inputs: 1 }, () => {
 *     ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
 *     ib.emit_call("vm.op.multiply", [ib.r(1), ib.r(0)], { dst: ib.r(2) });
 *     ib.emit_ret(ib.r(2));
 *   });
 *   const vm = new VirtualMachine(ib.get(), gpu);
 *   using x = tensor([1, 2, 3], { device: gpu });
 *   const before = gpu.submitCount;
 *   using y = await vm.invoke("main", x) as NDArray; // (x + x) * x
 *   assertEquals(gpu.submitCount, before + 1); // two kernels, one submit at the end of the call
 *   assertEquals([...await y.data()], [2, 8, 18]);
 * }
 * ```
 */
export class WebGPUDevice extends Device {
  static {
    brand(this, WEBGPU_DEVICE_BRAND);
  }

  /**
   * True for a `WebGPUDevice` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is WebGPUDevice {
    return typeof v === "object" && v !== null && (v as Branded)[WEBGPU_DEVICE_BRAND] === true;
  }

  /** Always `"webgpu"`. */
  readonly kind = "webgpu" as const;
  /** The adapter the device came from. */
  readonly adapter: GPUAdapter;
  /** The underlying WebGPU device. */
  readonly gpu: GPUDevice;
  readonly #context: GPUContext;
  readonly #batch: CommandBatch;
  /** Whether `queue.writeBuffer` was called since the last submit (`submitStagedWrites`). */
  #stagedWrites = false;
  readonly #readback: ReadbackPool;
  readonly #maxAllocation: number;
  #lost: string | null = null;

  /** Use `await webgpu(id)` instead. */
  constructor(id: number, adapter: GPUAdapter, gpu: GPUDevice) {
    super(id);
    this.adapter = adapter;
    this.gpu = gpu;
    this.#batch = new CommandBatch(gpu);
    this.#context = {
      batch: this.#batch,
      pipelines: new PipelineCache(gpu),
      bindings: new BindingCache(this.#batch),
    };
    this.#readback = new ReadbackPool(gpu);
    // Kernels bind whole buffers as storage, so a block may not exceed the binding limit either.
    this.#maxAllocation = Math.min(
      gpu.limits.maxBufferSize,
      gpu.limits.maxStorageBufferBindingSize,
    );
    gpu.lost.then((info) => {
      this.#lost = info.message || info.reason || "unknown reason";
      this.#batch.lose(this.#lost);
      this.leaveDeviceList();
    });
  }

  /** 15, DLPack's kDLWebGPU. */
  get deviceType(): number {
    return DLDeviceType.WebGPU;
  }

  /** The largest buffer that can also be bound whole as storage. */
  get maxAllocationBytes(): number {
    return this.#maxAllocation;
  }

  /**
   * Whether the device has WGSL's `f16` type (`enable f16;`): true when the
   * adapter offers the `shader-f16` feature, which `webgpu()` then requests.
   * relaxvm's own float16 support does not need it — float16 tensors are
   * stored, copied, moved and cast bit by bit on every adapter, and
   * operators compute in float32 — it is for WGSL kernels of your own
   * (packed functions that run on this device's `gpu`).
   */
  get shaderF16(): boolean {
    return this.gpu.features.has("shader-f16");
  }

  /** Command buffers submitted so far: one per `flush()` or read that found work recorded. */
  get submitCount(): number {
    return this.#batch.submitCount;
  }

  /** Kernel dispatches recorded so far. */
  get dispatchCount(): number {
    return this.#batch.dispatchCount;
  }

  /** True while recorded work waits in the open encoder. */
  get pending(): boolean {
    return this.#batch.pending;
  }

  /**
   * A zero-filled `GPUBuffer` usable as storage and as a copy source and target.
   *
   * @ignore
   */
  createBlock(nbytes: number): GPUBuffer {
    this.#batch.openScope();
    // At least 16 bytes: a `vec4` kernel needs that much bound, and wgpu may hold a later
    // kernel in the same compute pass to the first one's minimum (see binding_cache.ts).
    return this.gpu.createBuffer({
      label: "relaxvm tensor",
      size: Math.max(16, ceil4(nbytes)),
      usage: TENSOR_USAGE,
    });
  }

  /**
   * Destroys a block. A naive allocator destroys an intermediate result as
   * soon as its last reader is *recorded*, long before that reader runs; the
   * batch therefore delays `destroy()` until the recorded work is submitted.
   *
   * @ignore
   */
  destroyBlock(block: unknown): void {
    const buffer = block as GPUBuffer;
    this.#context.bindings.forget(buffer);
    this.#batch.destroyAfterSubmit(buffer);
  }

  /**
   * Uploads `bytes` in program order.
   *
   * The rule: while recorded work is pending, the bytes go through the
   * encoder (a staging buffer plus a recorded copy), because
   * `queue.writeBuffer` would land *before* that work, which may still read
   * the old contents or write the same bytes. With nothing pending,
   * `queue.writeBuffer` is in order already and avoids the staging buffer.
   * Unaligned ranges use the byte-copy kernel (copies need 4-byte alignment).
   *
   * @ignore
   */
  writeBlock(block: unknown, byteOffset: number, bytes: Uint8Array): void {
    const dst = block as GPUBuffer;
    const n = bytes.byteLength;
    if (n === 0) return;
    this.#batch.openScope();
    const aligned = byteOffset % 4 === 0 && n % 4 === 0;
    if (aligned && !this.#batch.pending) {
      this.gpu.queue.writeBuffer(dst, byteOffset, bytes as Uint8Array<ArrayBuffer>);
      this.#stagedWrites = true;
      return;
    }
    const staging = this.gpu.createBuffer({
      label: "relaxvm upload",
      size: Math.max(16, ceil4(n)),
      usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.STORAGE,
      mappedAtCreation: true,
    });
    new Uint8Array(staging.getMappedRange(), 0, n).set(bytes);
    staging.unmap();
    if (aligned) this.#batch.copy(staging, 0, dst, byteOffset, n);
    else runProgram(this.#context, byteCopyProgram(0, byteOffset, n), [staging, dst]);
    this.#batch.destroyAfterSubmit(staging);
  }

  /**
   * Reads bytes back: records a copy into a mappable staging buffer, submits
   * everything recorded so far, reports any error WebGPU raised for the
   * batch, then waits for the mapping. This is the only place that waits.
   *
   * @ignore
   */
  async readBlock(block: unknown, byteOffset: number, nbytes: number): Promise<Uint8Array> {
    this.#assertAlive();
    if (nbytes === 0) {
      this.flush();
      await this.#batch.checkErrors();
      return new Uint8Array(0);
    }
    // Copies need 4-byte alignment: read the enclosing words and slice.
    const lo = byteOffset - (byteOffset % 4);
    const size = ceil4(byteOffset + nbytes) - lo;
    const staging = this.#readback.acquire(size);
    this.#batch.copy(block as GPUBuffer, lo, staging, 0, size);
    this.flush();
    try {
      await this.#batch.checkErrors();
      await staging.mapAsync(GPUMapMode.READ, 0, size);
    } catch (e) {
      staging.destroy();
      throw this.#lost !== null ? new WebGPUError("device-lost", this.#lost) : e;
    }
    const mapped = staging.getMappedRange(0, size);
    // unmap() detaches the mapped range, so its bytes must leave it first. Browsers map
    // the buffer's memory itself and need a copy (`slice`). Deno already copies a range
    // mapped for reading into a private ArrayBuffer, so `transfer()` keeps that copy
    // without a second one: 40 ms saved per 64 MiB read on the machine this was measured
    // on. tests/webgpu/device_suite.ts checks that a transferred range keeps its bytes
    // after the staging buffer is mapped again, in case a later Deno maps in place.
    const bytes = PRIVATE_READ_MAPPINGS
      ? new Uint8Array(mapped.transfer(), byteOffset - lo, nbytes)
      : new Uint8Array(mapped.slice(byteOffset - lo, byteOffset - lo + nbytes));
    staging.unmap();
    this.#readback.release(staging);
    return bytes;
  }

  /**
   * Copies between blocks, recorded in order with the kernels.
   *
   * @ignore
   */
  copyBlock(
    src: unknown,
    srcOffset: number,
    dst: unknown,
    dstOffset: number,
    nbytes: number,
  ): void {
    if (nbytes === 0) return;
    const s = src as GPUBuffer, d = dst as GPUBuffer;
    if (s === d) {
      // Same-buffer copies are invalid when ranges overlap, and a kernel cannot bind one
      // buffer as both input and output: go through a temporary.
      const tmp = this.createBlock(nbytes + 8);
      this.copyBlock(s, srcOffset, tmp, srcOffset % 4, nbytes);
      this.copyBlock(tmp, srcOffset % 4, d, dstOffset, nbytes);
      this.#batch.destroyAfterSubmit(tmp);
      return;
    }
    if (srcOffset % 4 === 0 && dstOffset % 4 === 0 && nbytes % 4 === 0) {
      this.#batch.copy(s, srcOffset, d, dstOffset, nbytes);
    } else {
      runProgram(this.#context, byteCopyProgram(srcOffset, dstOffset, nbytes), [s, d]);
    }
  }

  /** Submits the recorded work without waiting (the VM calls it when a call ends). */
  override flush(): void {
    const submits = this.#batch.submitCount;
    this.#batch.flush();
    // Any submit carries the staged writes with it.
    if (this.#batch.submitCount !== submits) this.#stagedWrites = false;
  }

  /**
   * Submits the `queue.writeBuffer` copies made since the last submit (with
   * the recorded work, if any), so WebGPU can free its staging for them.
   * An empty submit is not counted in `submitCount`.
   *
   * @ignore
   */
  override submitStagedWrites(): void {
    if (!this.#stagedWrites) return;
    if (this.#batch.pending) this.flush();
    else this.gpu.queue.submit([]);
    this.#stagedWrites = false;
  }

  /**
   * Submits recorded work and resolves once the GPU has finished it (for
   * timing); rejects with any error WebGPU reported for it.
   */
  override async synchronize(): Promise<void> {
    this.#assertAlive();
    this.flush();
    await this.#batch.checkErrors();
    await this.gpu.queue.onSubmittedWorkDone();
  }

  /**
   * Times the kernels recorded from now on with WebGPU timestamp queries
   * (for `vm.profile`): each dispatch runs in a compute pass of its own
   * that records when it starts and ends on the GPU. Says why not where the
   * device lacks the `timestamp-query` feature (`webgpu()` requests it
   * whenever the adapter offers it) or a timing is already running.
   *
   * @ignore
   */
  override startTimer(): DeviceTimer | string {
    if (!this.gpu.features.has("timestamp-query")) {
      return `${this} has no timestamp queries (the adapter does not offer "timestamp-query")`;
    }
    const batch = this.#batch;
    // Work recorded before the timing starts is submitted untimed.
    batch.flush();
    if (!batch.startTimestamps()) return `${this} is already timing another profile`;
    let finished = false;
    return {
      setTag: (tag) => batch.setTimestampTag(tag),
      finish: () => {
        if (finished) return Promise.resolve([]);
        finished = true;
        return batch.stopTimestamps();
      },
    };
  }

  #assertAlive(): void {
    if (this.#lost !== null) throw new WebGPUError("device-lost", this.#lost);
  }

  static {
    // The kernels' way in: a symbol-keyed, non-enumerable function rather than a public
    // member keeps the encoder and caches off this class's documented surface.
    Object.defineProperty(this.prototype, CONTEXT, {
      value: function context(this: WebGPUDevice): GPUContext {
        return this.#context;
      },
    });
  }
}

/**
 * What the kernels of a WebGPU device record into: its open encoder, its
 * pipeline cache and its uniform and bind group caches.
 */
export function kernelContext(device: Device): GPUContext {
  const context = (device as unknown as Record<symbol, (() => GPUContext) | undefined>)[CONTEXT];
  if (!(device instanceof WebGPUDevice) || context === undefined) {
    throw new TypeError(`${device} is not a WebGPU device`);
  }
  return context.call(device);
}

/** One device per id in the process, whichever copy of the library asks (ground/shared.ts). */
const devices: Map<number, Promise<WebGPUDevice>> = shared(
  "relaxvm.webgpuDevices.v1",
  () => new Map(),
);

/**
 * The WebGPU device `id`, acquired once and cached. WebGPU cannot enumerate
 * adapters, so every id asks for the default adapter and gets its own
 * `GPUDevice` on it (separate queues and memory, same hardware). Throws a
 * clear error when WebGPU or an adapter is missing. A lost device is dropped
 * from the cache, so the next call acquires a fresh one.
 *
 * @example
 * ```ts
 * import { webgpu } from "@relaxvm/relaxvm";
 * import { assertEquals, assertStrictEquals } from "@std/assert";
 *
 * if (import.meta.main) { // as a script; the doc tests only type-check it
 *   const gpu = await webgpu();
 *   assertStrictEquals(await webgpu(0), gpu);
 *   assertEquals([gpu.kind, gpu.deviceType], ["webgpu", 15]);
 * }
 * ```
 */
export function webgpu(id = 0): Promise<WebGPUDevice> {
  if (!Number.isSafeInteger(id) || id < 0) {
    return Promise.reject(
      new RangeError(`webgpu(): device id must be a non-negative integer, got ${id}`),
    );
  }
  let dev = devices.get(id);
  if (dev === undefined) {
    dev = acquire(id);
    devices.set(id, dev);
    // Do not cache a failure: the next call tries again.
    dev.then(
      (d) => d.gpu.lost.then(() => devices.get(id) === dev && devices.delete(id)),
      () => devices.get(id) === dev && devices.delete(id),
    );
  }
  return dev;
}

async function acquire(id: number): Promise<WebGPUDevice> {
  const gpu = (globalThis.navigator as { gpu?: GPU } | undefined)?.gpu;
  if (gpu === undefined) {
    throw new Error(
      "Cannot acquire WebGPU device: navigator.gpu is not defined (this runtime has no WebGPU; Deno needs no flag since 2.0, browsers need a secure context)",
    );
  }
  const tried: string[] = [];
  let adapter: GPUAdapter | null = null;
  for (
    const options of [{ powerPreference: "high-performance" }, {}] as GPURequestAdapterOptions[]
  ) {
    tried.push(`requestAdapter(${JSON.stringify(options)})`);
    adapter = await gpu.requestAdapter(options);
    if (adapter !== null) break;
  }
  if (adapter === null) {
    throw new Error(
      `Cannot acquire WebGPU device ${id}: no adapter found (tried navigator.gpu.${
        tried.join(" and ")
      })`,
    );
  }
  // Ask for the adapter's own limits where tensors need them; the defaults cap a binding at 128 MiB.
  const a = adapter.limits;
  // shader-f16 can only be had at creation: ask whenever the adapter offers it (see shaderF16).
  // timestamp-query too: vm.profile() times kernels with it (startTimer); it costs nothing unused.
  const requiredFeatures = (["shader-f16", "timestamp-query"] as GPUFeatureName[]).filter((f) =>
    adapter.features.has(f)
  );
  const device = await adapter.requestDevice({
    label: `relaxvm webgpu(${id})`,
    requiredFeatures,
    requiredLimits: {
      maxBufferSize: a.maxBufferSize,
      maxStorageBufferBindingSize: a.maxStorageBufferBindingSize,
      maxStorageBuffersPerShaderStage: a.maxStorageBuffersPerShaderStage,
      maxComputeWorkgroupStorageSize: a.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: a.maxComputeInvocationsPerWorkgroup,
    },
  });
  return new WebGPUDevice(id, adapter, device);
}
