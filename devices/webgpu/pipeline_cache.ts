/**
 * Compiled pipelines, cached by everything that changes them: the program key
 * (which names everything baked into the WGSL source: op, dtypes, rank,
 * variant; shapes and offsets are not baked in, they travel in a uniform) and
 * the bind group layout.
 *
 * Every kernel uses the same binding convention, so layouts are explicit and
 * shared rather than `layout: "auto"`: binding `0..inputs-1` are read-only
 * storage buffers, the next `outputs` bindings are read-write storage buffers,
 * and a uniform buffer follows when the program has uniforms. An explicit
 * layout also means one bind group serves every pipeline of that layout (an
 * "auto" layout is private to its pipeline), and bindings the shader happens
 * not to use are not stripped away.
 *
 * @module
 */

/**
 * Declarations appended to every shader: values WGSL cannot spell as
 * constants. Chromium's shader compiler (Tint) evaluates a constant
 * expression such as `bitcast<f32>(0xff800000u)` when it creates the module
 * and rejects a result that is not finite ("value -inf cannot be
 * represented as 'f32'"); naga (Deno) accepts it. A private variable is
 * read at run time, so `bitcast<f32>(NEG_INF_BITS)` is -infinity in both
 * (kernels/webgpu/workgroup_reduce.ts's `NEG_INF_F32`), and likewise NaN.
 * Appended, not prepended, so compiler messages keep the kernel's line
 * numbers.
 */
export const SHARED_DECLARATIONS = "\nvar<private> NEG_INF_BITS: u32 = 0xff800000u;\n" +
  "var<private> NAN_BITS: u32 = 0x7fc00000u;\n";

/** The shape of a kernel's bindings. */
export interface BindingSignature {
  /** Read-only storage buffers, bindings `0..inputs-1`. */
  readonly inputs: number;
  /** Read-write storage buffers after the inputs. */
  readonly outputs: number;
  /** Whether a uniform buffer follows the storage buffers. */
  readonly uniform: boolean;
}

/** A key naming a binding signature, e.g. `2r1w+u`. */
export function signatureKey(sig: BindingSignature): string {
  return `${sig.inputs}r${sig.outputs}w${sig.uniform ? "+u" : ""}`;
}

/** A bind group layout with the pipeline layout made from it. */
export interface CachedLayout {
  /** `signatureKey` of the signature. */
  readonly key: string;
  /** The bind group layout. */
  readonly bindGroupLayout: GPUBindGroupLayout;
  /** A pipeline layout holding just that bind group layout. */
  readonly pipelineLayout: GPUPipelineLayout;
}

/** Compiles WGSL once per (source, layout) and keeps the result. */
export class PipelineCache {
  readonly #gpu: GPUDevice;
  readonly #layouts = new Map<string, CachedLayout>();
  readonly #pipelines = new Map<string, GPUComputePipeline>();
  #compiles = 0;

  /** A cache for pipelines of `gpu`. */
  constructor(gpu: GPUDevice) {
    this.#gpu = gpu;
  }

  /** Shader compilations so far (cache misses). */
  get compileCount(): number {
    return this.#compiles;
  }

  /** The layout for a binding signature. */
  layout(sig: BindingSignature): CachedLayout {
    const key = signatureKey(sig);
    let cached = this.#layouts.get(key);
    if (cached === undefined) {
      const entries: GPUBindGroupLayoutEntry[] = [];
      for (let i = 0; i < sig.inputs + sig.outputs; i++) {
        entries.push({
          binding: i,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: i < sig.inputs ? "read-only-storage" : "storage" },
        });
      }
      if (sig.uniform) {
        entries.push({
          binding: sig.inputs + sig.outputs,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: "uniform" },
        });
      }
      const bindGroupLayout = this.#gpu.createBindGroupLayout({ label: key, entries });
      const pipelineLayout = this.#gpu.createPipelineLayout({
        label: key,
        bindGroupLayouts: [bindGroupLayout],
      });
      cached = { key, bindGroupLayout, pipelineLayout };
      this.#layouts.set(key, cached);
    }
    return cached;
  }

  /**
   * The pipeline for the program named `key` (entry point `main`) with
   * `layout`. `key` must determine the source completely; `makeSource` runs
   * only on a miss, so a warm dispatch never builds or hashes a whole shader.
   * A shader that fails to compile yields an invalid pipeline plus a
   * validation error in the open error scope, which the next read reports.
   */
  pipeline(key: string, makeSource: () => string, layout: CachedLayout): GPUComputePipeline {
    const fullKey = `${layout.key}|${key}`;
    let p = this.#pipelines.get(fullKey);
    if (p === undefined) {
      const label = key;
      const module = this.#gpu.createShaderModule({
        label,
        code: makeSource() + SHARED_DECLARATIONS,
      });
      p = this.#gpu.createComputePipeline({
        label,
        layout: layout.pipelineLayout,
        compute: { module, entryPoint: "main" },
      });
      this.#pipelines.set(fullKey, p);
      this.#compiles++;
    }
    return p;
  }
}
