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
 * scratch needed is bounded by blocking (tens of MiB at most, whatever the
 * shapes), so the 4 GiB limit of 32-bit WebAssembly never applies to
 * tensors; the memory is declared with a 2 GiB maximum so that every byte
 * address is a non-negative int32.
 *
 * Given back: a WebAssembly memory cannot shrink, so a memory that grew
 * past `TRIM_BYTES` (a large product's or attention's scratch, the region of
 * sealed weights' copies) is dropped once the kernels are idle for
 * `TRIM_IDLE_MS` with no weight copy live, and the next kernel call starts
 * on a fresh one (`trimCpuKernelMemory`). Kernel calls are synchronous, so
 * between them nothing addresses the memory but the copies (resident.ts
 * says when none is left) and the worker pool, which is stopped with it
 * and started again on the new memory by the next call that wants it.
 * And a kernel call's scratch counts against the calling VM's
 * `maxMemoryBytes` for as long as the call runs: scratch that would pass it
 * is not taken, and the operator runs in TypeScript (`scratchFor`).
 *
 * Threads: where memory can be shared (thread_pool.ts), the memory is a
 * shared one and a pool of `threads - 1` workers (`cpu(id, { threads })`)
 * is started the first time a kernel runs and used at once: until its
 * workers have started, the calling thread takes every block. The pool stops after
 * `POOL_IDLE_MS` without work, so that a script's process can exit (a
 * worker blocked waiting for work would keep Deno alive), and starts again
 * on the next call.
 *
 * @module
 */

import { shared } from "../../../ground/shared.ts";
import { cpu, cpuThreadSetting } from "../../../devices/cpu_device.ts";
import { activeAllocators } from "../../../devices/allocation_context.ts";
import type { MemoryImport } from "./emitter.ts";
import { gemmModuleBytes } from "./gemm_module.ts";
import { CONTROL_BYTES, ThreadPool, threadsAvailable } from "./thread_pool.ts";

/**
 * Which CPU kernels run: `"auto"` (default) takes WebAssembly for work large
 * enough to repay a call into it (and the worker pool for work large
 * enough to repay a hand-off) and TypeScript for the rest; `"wasm"` takes
 * WebAssembly, and the pool, for every size they cover (tests use it to run
 * the operator suite on that path); `"typescript"` never uses WebAssembly.
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
  /** Threads a large kernel runs on now (1 until the pool is ready). */
  threads: number;
  /** Threads asked for (`cpu(id, { threads })`). */
  threadsRequested: number;
  /** Why the kernels run on one thread although more were asked for, when they do. */
  threadsReason: string | null;
}

/**
 * `gemm_tiles`' signature: `(ap, bp, cp, mTiles, nPanels, kc, lda, ldb, ldc,
 * accumulate)` (gemm_module.ts).
 */
export type GemmTiles = (
  ap: number,
  bp: number,
  cp: number,
  mTiles: number,
  nPanels: number,
  kc: number,
  lda: number,
  ldb: number,
  ldc: number,
  accumulate: number,
) => void;

/** The exported kernel functions of gemm_module.ts. */
export interface GemmExports {
  gemm_tiles: GemmTiles;
  dot_rows(xp: number, wp: number, op: number, rows: number, Kp: number): void;
  /** `gemm_tiles` with tiles of 1 … 5 rows (`MR` - 1): the last rows of a product. */
  gemm_tiles_1: GemmTiles;
  gemm_tiles_2: GemmTiles;
  gemm_tiles_3: GemmTiles;
  gemm_tiles_4: GemmTiles;
  gemm_tiles_5: GemmTiles;
  /** B's full column panels from a row-major copy of B (gemm_module.ts). */
  pack_panels(src: number, dst: number, K: number, lds: number, nPanels: number): void;
  /** A convolution's windows as B's panels from a padded input (windows_module.ts). */
  pack_windows(
    src: number,
    dst: number,
    table: number,
    K: number,
    n: number,
    ox: number,
    OW: number,
    skip: number,
  ): void;
  /** A convolution's bias and epilogue over rows of C (epilogue_module.ts). */
  conv_epilogue(
    cp: number,
    rows: number,
    ldc: number,
    bytes: number,
    bp: number,
    sp: number,
    nSteps: number,
  ): void;
  dot_panels(xp: number, wp: number, op: number, rows: number, Kp: number): void;
  gelu(xp: number, op: number, bytes: number): void;
}

/** One instance of the kernels and the memory it addresses. */
export interface KernelSpace {
  readonly exports: GemmExports;
  readonly memory: WebAssembly.Memory;
  /** Float32 view of the whole memory, remade after it grows (growing detaches the old buffer). */
  view: Float32Array | null;
}

/**
 * The compiled kernels: the instance the worker pool shares (this object)
 * and `local`, an instance on an ordinary memory for work done on the
 * calling thread alone. Two because copying into a shared memory is slower:
 * V8 copies into a `SharedArrayBuffer` with relaxed atomic stores (a 64 MiB
 * `TypedArray.set` in 256 KiB pieces measured 6.5 GB/s into a shared
 * memory, 9.9 into an ordinary one), and a one-thread GEMV is bound by that
 * copy.
 */
export interface WasmKernels extends KernelSpace {
  readonly simd: "relaxed-simd" | "simd128";
  /** The module the workers instantiate on `memory`. */
  readonly module: WebAssembly.Module;
  /** Whether `memory` is shared (workers can use it). */
  readonly shared: boolean;
  /** The instance on an ordinary memory (this object itself when `memory` is not shared). */
  readonly local: KernelSpace;
}

const PAGE = 65536;
/** 2 GiB: byte addresses stay non-negative int32s. */
const MAX_PAGES = 32768;
/** The pool stops after this long without work. */
export const POOL_IDLE_MS = 300;
/**
 * A kernel memory grown past this (64 MiB) is dropped when the kernels have
 * been idle `TRIM_IDLE_MS` and no weight copy lives in it; one at most this
 * size is kept, so that steady work does not pay a fresh memory's growth.
 */
export const TRIM_BYTES = 64 * 2 ** 20;
/** Idle time before a memory past `TRIM_BYTES` is dropped. */
export const TRIM_IDLE_MS = 300;
/** Scratch below this (1 MiB: the row kernels' chunks) is not checked against the VM's limit. */
const SCRATCH_CHECK_BYTES = 2 ** 20;
/** Bytes at the start of the memory that are not scratch (the pool's control block). */
export const SCRATCH_BASE_BYTES = CONTROL_BYTES;
/**
 * Where sealed weights' copies start, in bytes (resident.ts's region): every
 * kernel's scratch stays below (`scratchFor`).
 */
export const RESIDENT_BASE = 512 * 2 ** 20;
/** The memory's maximum (2 GiB): the copies' region never passes it. */
export const RESIDENT_END = MAX_PAGES * PAGE;

interface State {
  mode: CpuKernelMode;
  kernels: WasmKernels | null;
  tried: boolean;
  reason: string | null;
  pool: ThreadPool | null;
  /** The start in progress, if any. */
  starting: Promise<ThreadPool | null> | null;
  /** Why the pool could not start (kept so that it is not tried on every call). */
  threadsReason: string | null;
  idleTimer: number | null;
  /** The kernels the pool runs on (a trimmed memory's pool is stopped). */
  poolKernels: WasmKernels | null;
  /** The timer that drops a memory grown past `TRIM_BYTES`, when armed. */
  trimTimer: number | null;
  /** Whether no weight copy lives in the shared memory (resident.ts says; none: true). */
  copiesGone: () => boolean;
  /** Memories dropped so far (for tests and `cpuKernelMemory`). */
  trims: number;
}

/** One state per realm, shared by every copy of the library (as the VM's eval refusal is). */
const state: State = shared("relaxvm.cpuWasm.v1", () => ({
  mode: "auto",
  kernels: null,
  tried: false,
  reason: null,
  pool: null,
  starting: null,
  threadsReason: null,
  idleTimer: null,
  poolKernels: null,
  trimTimer: null,
  copiesGone: () => true,
  trims: 0,
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
  return {
    mode: state.mode,
    simd: k?.simd ?? null,
    reason: state.reason,
    threads: state.pool?.threads ?? 1,
    threadsRequested: cpuThreadSetting(),
    threadsReason: state.threadsReason,
  };
}

/**
 * Forgets the compiled kernels and any refusal, so the next kernel compiles
 * them again. For tests that simulate an engine refusing WebAssembly.
 */
export function forgetCpuKernels(): void {
  stopPool();
  if (state.trimTimer !== null) clearTimeout(state.trimTimer);
  state.trimTimer = null;
  state.threadsReason = null;
  state.kernels = null;
  state.tried = false;
  state.reason = null;
}

/**
 * The module `emit` writes for the kernels' memory (`env.memory`, up to 2
 * GiB; shared or not), compiled; null where it does not validate. The one
 * way a kernel module is compiled: gemm_module.ts's here, the others'
 * through `kernelModule`.
 */
function compileModule(
  emit: (memory: MemoryImport) => Uint8Array<ArrayBuffer>,
  shared: boolean,
): WebAssembly.Module | null {
  const bytes = emit({ module: "env", name: "memory", minPages: 1, maxPages: MAX_PAGES, shared });
  if (!WebAssembly.validate(bytes)) return null;
  return new WebAssembly.Module(bytes);
}

function compile(relaxed: boolean, shared: boolean): WebAssembly.Module | null {
  return compileModule((memory) => gemmModuleBytes(relaxed, memory), shared);
}

/**
 * A second kernel module beside gemm_module.ts's, on the calling thread's
 * memory: `emit` is compiled once (on an ordinary memory), the first time
 * it is wanted, and instantiated once per kernel space (a trimmed memory's
 * fresh space instantiates it again). The function returned gives its
 * exports on `space`, or null where it does not compile or instantiate
 * (then the operator runs in TypeScript).
 */
export function kernelModule<T>(
  emit: (memory: MemoryImport) => Uint8Array<ArrayBuffer>,
): (space: KernelSpace) => T | null {
  let compiled: WebAssembly.Module | null | undefined;
  const instances = new WeakMap<KernelSpace, T | null>();
  return (space) => {
    let e = instances.get(space);
    if (e === undefined) {
      // The gemm's module compiled here, so this one should too; if not, TypeScript.
      try {
        compiled ??= compileModule(emit, false);
        e = compiled === null ? null : new WebAssembly.Instance(compiled, {
          env: { memory: space.memory },
        }).exports as unknown as T;
      } catch {
        e = null;
      }
      instances.set(space, e);
    }
    return e;
  };
}

function loadKernels(): WasmKernels | null {
  if (state.tried) return state.kernels;
  state.tried = true;
  try {
    if (typeof WebAssembly !== "object") throw new Error("this engine has no WebAssembly");
    const available = threadsAvailable();
    let shared = available.ok;
    if (!shared) state.threadsReason = available.why;
    // A shared memory reserves its whole maximum up front; where that address space cannot be
    // had (a 32-bit browser), take an ordinary memory and one thread.
    let memory: WebAssembly.Memory;
    try {
      memory = new WebAssembly.Memory({ initial: 1, maximum: MAX_PAGES, shared });
    } catch (e) {
      if (!shared || !(e instanceof RangeError)) throw e;
      shared = false;
      state.threadsReason = `a shared memory could not be reserved: ${e.message}`;
      memory = new WebAssembly.Memory({ initial: 1, maximum: MAX_PAGES });
    }
    let simd: "relaxed-simd" | "simd128" = "relaxed-simd";
    let module = compile(true, shared);
    if (module === null) {
      simd = "simd128";
      module = compile(false, shared);
    }
    if (module === null) throw new Error("this engine does not support WebAssembly SIMD128");
    let localModule: WebAssembly.Module | null = null;
    if (shared) {
      localModule = compile(simd === "relaxed-simd", false);
      if (localModule === null) throw new Error("the kernels validate on a shared memory only");
    }
    state.kernels = instantiate(module, localModule, memory, simd, shared);
  } catch (e) {
    state.reason = e instanceof Error ? e.message : String(e);
    console.warn(`relaxvm: CPU kernels run in TypeScript, not WebAssembly: ${state.reason}`);
  }
  return state.kernels;
}

/** The kernels on `memory` (and a fresh ordinary memory for `local` when `memory` is shared). */
function instantiate(
  module: WebAssembly.Module,
  localModule: WebAssembly.Module | null,
  memory: WebAssembly.Memory,
  simd: "relaxed-simd" | "simd128",
  shared: boolean,
): WasmKernels {
  const instance = new WebAssembly.Instance(module, { env: { memory } });
  const exports = instance.exports as unknown as GemmExports;
  let local: (KernelSpace & { module: WebAssembly.Module }) | null = null;
  if (localModule !== null) {
    const localMemory = new WebAssembly.Memory({ initial: 1, maximum: MAX_PAGES });
    const inst = new WebAssembly.Instance(localModule, { env: { memory: localMemory } });
    local = {
      exports: inst.exports as unknown as GemmExports,
      memory: localMemory,
      view: null,
      module: localModule,
    };
  }
  const k: { -readonly [P in keyof WasmKernels]: WasmKernels[P] } = {
    exports,
    memory,
    view: null,
    simd,
    module,
    shared,
    local: local as KernelSpace,
  };
  if (local === null) k.local = k;
  return k;
}

/** Bytes the kernels' memories hold now: what `trimCpuKernelMemory` gives back. */
export interface CpuKernelMemory {
  /** The memory the worker pool shares (and the sealed weights' copies live in). */
  sharedBytes: number;
  /** The calling thread's own memory (0 where it is the shared one, or nothing is compiled). */
  localBytes: number;
  /** Memories dropped so far in this realm. */
  trims: number;
}

/** The kernels' memory sizes now (nothing is compiled for it). */
export function cpuKernelMemory(): CpuKernelMemory {
  const k = state.kernels;
  return {
    sharedBytes: k?.memory.buffer.byteLength ?? 0,
    localBytes: k === null || k.local === k ? 0 : k.local.memory.buffer.byteLength,
    trims: state.trims,
  };
}

/**
 * Called by resident.ts: whether no weight copy lives in the kernels'
 * memory (a memory holding one is never dropped).
 */
export function setCopiesGone(gone: () => boolean): void {
  state.copiesGone = gone;
}

/**
 * Drops each kernel memory grown past `TRIM_BYTES` (both, at most) and puts
 * fresh one-page memories in their place, unless a weight copy lives in the
 * shared one; stops the worker pool with it. Returns whether it dropped
 * anything. Runs by itself `TRIM_IDLE_MS` after a memory grows past the
 * bound, or after the last copy is given back; safe at any time between
 * kernel calls, which are synchronous.
 */
export function trimCpuKernelMemory(): boolean {
  if (state.trimTimer !== null) clearTimeout(state.trimTimer);
  state.trimTimer = null;
  const k = state.kernels;
  if (k === null) return false;
  const big = (m: WebAssembly.Memory) => m.buffer.byteLength > TRIM_BYTES;
  if (!big(k.memory) && !big(k.local.memory)) return false;
  if (!state.copiesGone()) return false;
  stopPool();
  const memory = new WebAssembly.Memory({ initial: 1, maximum: MAX_PAGES, shared: k.shared });
  const localModule = k.local === k ? null : (k.local as { module?: WebAssembly.Module }).module!;
  state.kernels = instantiate(k.module, localModule, memory, k.simd, k.shared);
  state.trims++;
  return true;
}

/** Arms the trim timer (unless armed): the kernels' memory is dropped after `TRIM_IDLE_MS`. */
export function requestTrim(): void {
  if (state.trimTimer !== null || state.kernels === null) return;
  const id = setTimeout(() => {
    state.trimTimer = null;
    trimCpuKernelMemory();
  }, TRIM_IDLE_MS) as unknown as number;
  state.trimTimer = id;
  unrefTimer?.(id);
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
 * `bytes` bytes, or null where it cannot grow that far (past its 2 GiB
 * maximum, or a browser short of address space): the one place the memory
 * grows. Views made before a call that grew the memory are detached: take a
 * new one after each call.
 */
export function grownView(space: KernelSpace, bytes: number): Float32Array | null {
  const have = space.memory.buffer.byteLength;
  if (bytes > have) {
    if (bytes > MAX_PAGES * PAGE) return null;
    try {
      space.memory.grow(Math.ceil((bytes - have) / PAGE));
    } catch (e) {
      if (e instanceof RangeError) return null; // out of memory or address space
      throw e;
    }
    space.view = null;
    if (space.memory.buffer.byteLength > TRIM_BYTES) requestTrim();
  }
  if (space.view === null || space.view.buffer !== space.memory.buffer) {
    space.view = new Float32Array(space.memory.buffer);
  }
  return space.view;
}

/**
 * The view of the kernels' whole memory now (after a kernel call: the one
 * made before it may be detached); `grownView`, throwing a `RangeError`
 * where the memory cannot grow to `bytes`.
 */
export function scratchView(space: KernelSpace, bytes = 0): Float32Array {
  const view = grownView(space, bytes);
  if (view === null) {
    throw new RangeError(`The CPU kernels' memory cannot grow to ${bytes} bytes`);
  }
  return view;
}

/**
 * The view for a kernel call's scratch of `bytes` (from address 0), or null
 * where the operator should run in TypeScript instead: the scratch would
 * reach the sealed weights' copies (`RESIDENT_BASE`, or a lower `limit`),
 * pass the calling VM's `maxMemoryBytes` (counted as a block of that VM
 * while the call runs: what its tensors hold plus this scratch), or the
 * memory cannot grow that far.
 */
export function scratchFor(
  space: KernelSpace,
  bytes: number,
  limit = RESIDENT_BASE,
): Float32Array | null {
  if (bytes > Math.min(limit, RESIDENT_BASE) || !withinVMLimit(bytes)) return null;
  return grownView(space, bytes);
}

/**
 * Whether `bytes` more fit the running VM's memory limit now. Scratch below
 * `SCRATCH_CHECK_BYTES` (the row kernels' chunks) is not asked about.
 */
function withinVMLimit(bytes: number): boolean {
  if (bytes < SCRATCH_CHECK_BYTES) return true;
  // The VM's MemoryLimit (devices/allocation_context.ts's `ActiveLimit`), as resident.ts reads it.
  const limit = activeAllocators()?.limit;
  if (limit === undefined) return true;
  try {
    // Counted and given back at once: the scratch lives only while this synchronous call runs.
    // Taking may give the VM's weight copies back (they only save time); a copy this call already
    // holds the address of keeps its bytes until another copy is written, which cannot happen
    // before the call ends.
    limit.take(bytes, cpu(), bytes);
  } catch (e) {
    if (e instanceof RangeError) return false;
    throw e;
  }
  limit.give(bytes);
  return true;
}

/**
 * The pool to split a kernel call over, or null to run it on the calling
 * thread (one thread asked for, or threads unavailable). Starts the pool
 * when there is none: it is usable at once, its workers joining jobs as
 * they start. Keeps a running pool alive for `POOL_IDLE_MS` more.
 */
export function poolFor(k: WasmKernels): ThreadPool | null {
  const want = cpuThreadSetting();
  let pool = state.pool;
  if (pool !== null && (pool.threads !== want || state.poolKernels !== k)) {
    stopPool();
    pool = null;
  }
  // A pool that failed to start (threadsReason) is not tried again on every call.
  if (want > 1 && k.shared && pool === null && state.threadsReason === null) {
    startPool(k, want);
    return state.pool;
  }
  if (pool !== null) armIdleTimer();
  return pool;
}

/**
 * Starts the worker pool now if threads are asked for and available, and
 * resolves with the threads a large kernel will use. Kernels never wait
 * for the pool; tests and benchmarks call this to measure the threaded path
 * from the first call.
 */
export async function cpuThreadsReady(): Promise<number> {
  const k = loadKernels();
  if (k === null) return 1;
  poolFor(k);
  if (state.starting !== null) await state.starting;
  return state.pool?.threads ?? 1;
}

/** Blocks of kernel calls the running pool's workers have taken (0 without a pool): for tests. */
export function cpuPoolWorkerBlocks(): number {
  return state.pool?.workerBlocks ?? 0;
}

function startPool(k: WasmKernels, threads: number): void {
  let opened: { pool: ThreadPool; ready: Promise<void> };
  try {
    opened = ThreadPool.open(k.module, k.memory, threads);
  } catch (e) {
    state.threadsReason = e instanceof Error ? e.message : String(e);
    return;
  }
  const { pool, ready } = opened;
  // Used from now on: workers join its jobs as they start (thread_pool.ts).
  state.pool = pool;
  state.poolKernels = k;
  state.threadsReason = null;
  armIdleTimer();
  const starting = ready.then(
    () => {
      if (state.starting === starting) state.starting = null;
      return state.pool === pool ? pool : null;
    },
    (e) => {
      if (state.starting === starting) state.starting = null;
      if (state.pool === pool) {
        stopPool();
        state.threadsReason = e instanceof Error ? e.message : String(e);
      }
      return null;
    },
  );
  state.starting = starting;
}

function stopPool(): void {
  if (state.idleTimer !== null) clearTimeout(state.idleTimer);
  state.idleTimer = null;
  state.pool?.close();
  state.pool = null;
  state.poolKernels = null;
  state.starting = null;
}

/** Deno's `unrefTimer`, so that the idle timer alone does not keep a process alive. */
const unrefTimer = (globalThis as { Deno?: { unrefTimer?: (id: number) => void } }).Deno
  ?.unrefTimer;

function armIdleTimer(): void {
  if (state.idleTimer !== null) clearTimeout(state.idleTimer);
  // A number in browsers and Deno (the type says Node's Timeout when Node's types are loaded).
  const id = setTimeout(stopPool, POOL_IDLE_MS) as unknown as number;
  state.idleTimer = id;
  unrefTimer?.(id);
}

/**
 * One line for `CpuDevice.description` and the profiler: what computes, on how many threads
 * (`CpuKernelHost.describeKernels`, installed by kernels/install.ts).
 */
export function describeCpuKernelRuntime(): string {
  if (state.mode === "typescript") return "TypeScript kernels (setCpuKernelMode)";
  if (state.reason !== null) return `TypeScript kernels (${state.reason})`;
  if (state.kernels === null) return "WebAssembly kernels not compiled yet";
  const want = cpuThreadSetting();
  const threads = want === 1
    ? "1 thread"
    : state.threadsReason !== null
    ? `1 thread (${state.threadsReason})`
    : `${want} threads`;
  return `WebAssembly ${state.kernels.simd} kernels, ${threads}`;
}
