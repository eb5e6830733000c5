/**
 * Where the CPU's WebAssembly kernels come from at run time, and which path
 * a CPU kernel takes.
 *
 * The module of gemm_module.ts is emitted, validated and compiled the first
 * time a kernel wants it, at the best level the engine accepts: relaxed
 * SIMD (fused multiply-add), else SIMD128. Where neither validates, or
 * compiling is refused (a page whose Content-Security-Policy lacks
 * `'wasm-unsafe-eval'`), the TypeScript kernels run everything, and the
 * reason is printed once with `console.warn` and kept in
 * `cpuKernelInfo().reason`.
 *
 * Memory: this first version copies operands into one WebAssembly.Memory
 * owned by the kernels (packing them on the way, which a BLIS product does
 * anyway) and copies results out; tensors still live in ArrayBuffers. The
 * scratch needed is bounded by blocking (a few MiB for any shape), so the
 * 4 GiB limit of 32-bit WebAssembly never applies to tensors.
 *
 * This file is browser-safe: no `Deno.*`.
 *
 * @module
 */

import { shared } from "../../../ground/shared.ts";
import { gemmModuleBytes } from "./gemm_module.ts";

/**
 * Which CPU kernels run: `"auto"` (default) takes WebAssembly for work large
 * enough to repay a call into it and TypeScript for the rest; `"wasm"`
 * takes WebAssembly for every size it covers (tests use it to run the
 * operator suite on that path); `"typescript"` never uses WebAssembly.
 */
export type CpuKernelMode = "auto" | "wasm" | "typescript";

/** What `cpuKernelInfo()` reports. */
export interface CpuKernelInfo {
  /** The mode set by `setCpuKernelMode`. */
  mode: CpuKernelMode;
  /** The instruction set of the compiled kernels, or null when they are not available (yet). */
  simd: "relaxed-simd" | "simd128" | null;
  /** Why WebAssembly is not used, when it is not. */
  reason: string | null;
}

/** The exported kernel functions of gemm_module.ts. */
export interface GemmExports {
  gemm_tiles(
    ap: number,
    bp: number,
    cp: number,
    mTiles: number,
    nPanels: number,
    K: number,
    ldc: number,
  ): void;
  dot_rows(xp: number, wp: number, op: number, rows: number, Kp: number): void;
}

/** The compiled kernels and the memory they address. */
export interface WasmKernels {
  readonly exports: GemmExports;
  readonly memory: WebAssembly.Memory;
  readonly simd: "relaxed-simd" | "simd128";
}

const PAGE = 65536;

interface State {
  mode: CpuKernelMode;
  kernels: WasmKernels | null;
  tried: boolean;
  reason: string | null;
  /** Float32 view of the whole memory, remade after it grows (growing detaches the old buffer). */
  view: Float32Array | null;
}

/** One state per realm, shared by every copy of the library (as the VM's eval refusal is). */
const state: State = shared("relaxvm.cpuWasm.v1", () => ({
  mode: "auto",
  kernels: null,
  tried: false,
  reason: null,
  view: null,
}));

/** Selects the CPU kernel path for the whole realm (see `CpuKernelMode`). */
export function setCpuKernelMode(mode: CpuKernelMode): void {
  if (mode !== "auto" && mode !== "wasm" && mode !== "typescript") {
    throw new TypeError(`Unknown CPU kernel mode ${JSON.stringify(mode)}`);
  }
  state.mode = mode;
}

/** The current CPU kernel mode. */
export function cpuKernelMode(): CpuKernelMode {
  return state.mode;
}

/** Which CPU kernels run here and why. Compiles the WebAssembly kernels if not yet tried. */
export function cpuKernelInfo(): CpuKernelInfo {
  const k = state.mode === "typescript" ? state.kernels : loadKernels();
  return { mode: state.mode, simd: k?.simd ?? null, reason: state.reason };
}

/**
 * Forgets the compiled kernels and any refusal, so the next kernel compiles
 * them again. For tests that simulate an engine refusing WebAssembly.
 */
export function forgetCpuKernels(): void {
  state.kernels = null;
  state.tried = false;
  state.reason = null;
  state.view = null;
}

function compile(relaxed: boolean): WebAssembly.Module | null {
  const bytes = gemmModuleBytes(relaxed, { module: "env", name: "memory", minPages: 1 });
  if (!WebAssembly.validate(bytes)) return null;
  return new WebAssembly.Module(bytes);
}

function loadKernels(): WasmKernels | null {
  if (state.tried) return state.kernels;
  state.tried = true;
  try {
    if (typeof WebAssembly !== "object") throw new Error("this engine has no WebAssembly");
    let simd: "relaxed-simd" | "simd128" = "relaxed-simd";
    let module = compile(true);
    if (module === null) {
      simd = "simd128";
      module = compile(false);
    }
    if (module === null) throw new Error("this engine does not support WebAssembly SIMD128");
    const memory = new WebAssembly.Memory({ initial: 1 });
    const instance = new WebAssembly.Instance(module, { env: { memory } });
    state.kernels = { exports: instance.exports as unknown as GemmExports, memory, simd };
  } catch (e) {
    state.reason = `relaxvm: CPU kernels run in TypeScript, not WebAssembly: ${
      e instanceof Error ? e.message : String(e)
    }`;
    console.warn(state.reason);
  }
  return state.kernels;
}

/**
 * The WebAssembly kernels for work of `flops` floating-point operations, or
 * null where TypeScript should do it (mode, size, or no WebAssembly).
 */
export function wasmKernelsFor(flops: number, autoThreshold: number): WasmKernels | null {
  const mode = state.mode;
  if (mode === "typescript" || (mode === "auto" && flops < autoThreshold)) return null;
  return loadKernels();
}

/**
 * A float32 view of the kernels' whole memory, grown first to hold at least
 * `bytes` bytes. Views made before a call that grew the memory are detached:
 * take a new one after each call.
 */
export function scratchView(k: WasmKernels, bytes: number): Float32Array {
  const have = k.memory.buffer.byteLength;
  if (bytes > have) {
    k.memory.grow(Math.ceil((bytes - have) / PAGE));
    state.view = null;
  }
  if (state.view === null || state.view.buffer !== k.memory.buffer) {
    state.view = new Float32Array(k.memory.buffer);
  }
  return state.view;
}
