/**
 * The program layer between op glue and the GPU: a `Program` names a WGSL
 * shader (by a key that determines its source), its uniforms and how many
 * workgroups to launch; `runProgram` fetches the cached pipeline, uniform
 * buffer and bind group and records one dispatch in the open encoder.
 *
 * Shared WGSL conventions used by every template family:
 *
 * - Tensors are bound as whole buffers; each tensor's element offset within
 *   its buffer travels in the uniforms. Binding at an offset would need
 *   `minStorageBufferOffsetAlignment` (32 to 256 bytes), which tensors placed
 *   by `alloc_tensor` need not respect.
 * - Workgroups are counted linearly; `dispatchSize` folds more than 65535 of
 *   them into a 2-D grid and `linearWorkgroup` recovers the index.
 *
 * @module
 */

import type { TensorDType } from "../../ground/dtype.ts";
import type { NDArray } from "../ndarray.ts";
import type { BindingCache } from "./binding_cache.ts";
import { type CommandBatch, dispatchSize } from "./command_batch.ts";
import type { PipelineCache } from "./pipeline_cache.ts";

/** What kernels record into: a WebGPU device's encoder and caches (`kernelContext(device)`). */
export interface GPUContext {
  /** The open encoder. */
  readonly batch: CommandBatch;
  /** Compiled pipelines. */
  readonly pipelines: PipelineCache;
  /** Uniform buffers and bind groups. */
  readonly bindings: BindingCache;
}

/** One kernel launch, before it is bound to buffers. */
export interface Program {
  /** Names the shader; equal keys must mean equal sources. */
  readonly key: string;
  /** Builds the WGSL source (entry point `main`); called once per key. */
  readonly source: () => string;
  /** Number of read-only storage inputs (bindings `0..inputs-1`). */
  readonly inputs: number;
  /** Number of read-write outputs after the inputs; default 1. */
  readonly outputs?: number;
  /** The uniform words, bound last; omitted when the shader has none. */
  readonly uniforms?: Uint32Array;
  /** Workgroups to launch; 0 launches nothing. */
  readonly workgroups: number;
}

/** Records `program` over `buffers` (inputs, then outputs) in the open encoder. */
export function runProgram(ctx: GPUContext, program: Program, buffers: readonly GPUBuffer[]): void {
  if (program.workgroups === 0) return;
  ctx.batch.openScope();
  const uniform = program.uniforms !== undefined;
  const layout = ctx.pipelines.layout({
    inputs: program.inputs,
    outputs: program.outputs ?? 1,
    uniform,
  });
  const pipeline = ctx.pipelines.pipeline(program.key, program.source, layout);
  const bound = uniform ? [...buffers, ctx.bindings.uniform(program.uniforms!)] : buffers;
  const group = ctx.bindings.bindGroup(layout, bound);
  const [x, y] = dispatchSize(program.workgroups);
  ctx.batch.dispatch(pipeline, group, x, y);
}

/** Collects uniform words: unsigned, signed and float values, 4 bytes each. */
export class Uniforms {
  #words: number[] = [];
  static readonly #f32 = new Float32Array(1);
  static readonly #u32 = new Uint32Array(Uniforms.#f32.buffer);

  /** Appends an unsigned integer. */
  u32(v: number): this {
    this.#words.push(v >>> 0);
    return this;
  }

  /** Appends several unsigned integers. */
  u32s(vs: readonly number[]): this {
    for (const v of vs) this.#words.push(v >>> 0);
    return this;
  }

  /** Appends a float, read back in WGSL with `bitcast<f32>(...)`. */
  f32(v: number): this {
    Uniforms.#f32[0] = v;
    this.#words.push(Uniforms.#u32[0]);
    return this;
  }

  /** The words collected. */
  words(): Uint32Array {
    return new Uint32Array(this.#words);
  }
}

/** The WGSL scalar type storing a dtype on the GPU. */
export function wgslType(dtype: TensorDType): "f32" | "i32" | "u32" {
  switch (dtype) {
    case "float32":
      return "f32";
    case "int32":
      return "i32";
    case "uint32":
      return "u32";
    default:
      throw new TypeError(
        `WebGPU kernels support float32, int32 and uint32 tensors, not ${dtype}`,
      );
  }
}

/** The tensor's GPU buffer. */
export function bufferOf(t: NDArray): GPUBuffer {
  return t.block as GPUBuffer;
}

/** The tensor's offset in its buffer, in elements of its (4-byte) dtype. */
export function elementOffset(t: NDArray): number {
  if (t.byteOffset % 4 !== 0) {
    throw new RangeError(`${t} starts at byte ${t.byteOffset}, not a multiple of 4`);
  }
  return t.byteOffset / 4;
}

/** WGSL declaring the uniform struct `u` with one `u32` field per name. */
export function uniformStruct(fields: readonly string[], binding: number): string {
  const body = fields.map((f) => `  ${f}: u32,`).join("\n");
  return `struct Uniforms {\n${body}\n}\n@group(0) @binding(${binding}) var<uniform> u: Uniforms;\n`;
}

/** WGSL declaring storage binding `binding` named `name` holding `array<type>`. */
export function storage(binding: number, name: string, type: string, writable: boolean): string {
  const access = writable ? "read_write" : "read";
  return `@group(0) @binding(${binding}) var<storage, ${access}> ${name}: array<${type}>;\n`;
}

/**
 * The workgroup size of relaxvm's 1-D kernels (a thread per element, or a
 * workgroup per row): 64 threads is a multiple of every GPU's SIMD width (32
 * on NVIDIA, 32 or 64 on AMD, 8–32 elsewhere), within WebGPU's guaranteed
 * `maxComputeInvocationsPerWorkgroup` (256), and small enough that short rows
 * still fill a workgroup. One constant, so a kernel that needs another size
 * says so where it differs.
 */
export const WORKGROUP_SIZE = 64;

/**
 * WGSL for the `main` signature of a 1-D kernel of `size` workgroup threads,
 * with `wg` (linear workgroup index) and `lid` in scope.
 */
export function mainHeader(size: number): string {
  return `@compute @workgroup_size(${size})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let wg = wid.y * nwg.x + wid.x;
`;
}

/** Number of workgroups of `size` threads covering `n` items. */
export function groupsFor(n: number, size: number): number {
  return Math.ceil(n / size);
}
