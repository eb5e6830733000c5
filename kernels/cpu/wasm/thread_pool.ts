/**
 * The CPU kernels' worker pool: persistent workers sharing the kernels'
 * WebAssembly.Memory, taking blocks of a kernel call as they come.
 *
 * Protocol. The first 256 bytes of the memory are a control block of
 * int32s (`Ctl`): a generation counter, the job's kind (0 = exit), its
 * number of blocks, the claim counter, how many blocks are finished, its
 * arguments, and an error flag. The calling thread publishes a job (claims
 * closed, arguments and counts written, claims opened, generation bumped,
 * workers notified), then claims blocks itself like any worker, and returns
 * once every block is finished.
 *
 * Why blocks are claimed rather than split in fixed shares: on a loaded
 * machine (this one is shared by several engineers) a worker can wait
 * milliseconds to be scheduled after `Atomics.notify`. With fixed shares
 * the caller would wait for it; with claiming, the caller takes the blocks
 * the sleeping worker has not, and waits at most for the one block each
 * worker is running. A worker that wakes after the job is done finds no
 * block and goes back to sleep. Between jobs a worker spins for a moment
 * (`poolSpin.workerUs`, 50 µs) before it sleeps, so that products that
 * follow each other at once do not pay a wake-up each; and the calling
 * thread spins (`poolSpin.callerUs`, 0.1 ms) for the workers' last blocks
 * before it waits, since waking it costs about that. The worker's spin was
 * 1 ms, for a model's products a few hundred microseconds of other ops
 * apart (bench/small_rows_bench.ts: a `[16, 384] @ [384, 384]ᵀ` after 0.3
 * ms of other work, 77 µs with 0.2 ms, 57 µs with 1 ms), but a spinning
 * worker holds a core the calling thread's own work between products
 * (depthwise convolutions, elementwise ops, copies) then lacks whenever
 * other processes want the cores too: on the shared 2-core machine at load
 * 3–6 (bench/pool_spin_bench.ts, interleaved, median ms), 1 ms against 50
 * µs made PP-OCRv4's detector 85 against 61, its recognizer 133 against
 * 94 and MiniLM at batch 1 (16 sentences) 591 against 411; 20 µs and 200
 * µs measured between.
 *
 * Block sizes are the kernels' (kernels/cpu/wasm/gemm.ts): `gemm_tiles`
 * over a few tile rows (at most an L2-sized block of A) and every block of
 * k, `pack_panels` over a few of B's column panels, or `dot_rows` over
 * a block of a packed weight already in the shared memory (`Job.dot`,
 * `dot_panels`: a sealed weight's copy, resident.ts), or a few channel
 * planes of a depthwise convolution (`Job.depthwise`, depthwise.ts). `runBlock` is the
 * one function both sides run: its source is copied into the worker script.
 *
 * Where it runs. Deno always has `SharedArrayBuffer` and workers; a browser
 * has them only on a cross-origin-isolated page. Elsewhere (or when a
 * worker cannot start, e.g. a CSP without `worker-src blob:`) the kernels
 * run on the calling thread alone. The worker source is a string turned
 * into a `blob:` URL, so bundles need no second file.
 *
 * @module
 */

/** Bytes at the start of the memory reserved for the control block. */
export const CONTROL_BYTES = 256;

/** Job kinds. */
export const Job = {
  exit: 0,
  gemm: 1,
  dot: 2,
  gemmPanels: 3,
  packPanels: 4,
  packWindows: 5,
  epilogue: 6,
  depthwise: 7,
  padPlanes: 8,
} as const;

/**
 * Each job's arguments by name: the int32 slot of the control block each
 * goes to (`Ctl.args` on). The one layout the writers (`jobArgs`, in
 * gemm.ts) and the reader (`runBlock`, on every thread) both use; the
 * worker script gets it as JSON. A product (`Job.gemm`, `Job.gemmPanels`)
 * is `gemm_tiles(a, b, c, tiles, panels, kc, lda, K, ldc, accumulate)` per
 * block of k; `Job.packPanels` is `pack_panels(src, dst, K, lds, panels)`;
 * `Job.dot` is `dot_panels(xp, wp, op, rows, Kp)` (gemm_module.ts).
 */
export const JOB_ARGS = {
  /** Products: A, B's panels, C (byte addresses), full tile rows, panels, K, block of k, strides of A and C, tile rows (job 1) or panels (job 3) a block, the tile, the tail rows; for a convolution's windows read in place (`gemm_windows`, table not 0: B's panels unused), the padded input, the kernel elements' and the panels' offset tables (byte addresses). */
  gemm: {
    ap: 5,
    bp: 6,
    cp: 7,
    fullTiles: 8,
    nPanels: 9,
    K: 10,
    kc: 11,
    lda: 12,
    ldc: 13,
    per: 14,
    MR: 15,
    NR: 16,
    tail: 17,
    src: 18,
    table: 19,
    bases: 20,
  },
  /** B's rows at `src` packed into panels at `dst` (byte addresses): K, row stride, panels, panels a block, the panel width. */
  packPanels: { src: 5, dst: 6, K: 7, lds: 8, nPanels: 9, per: 10, NR: 11 },
  /** A convolution's windows (windows_module.ts): the padded input where panel 0's windows start, the panels, the offset table (byte addresses), K, panels, panels a block, panel 0's first output (row-major), the output row's width, the bytes from one output row's end to the next's start, the panel width. */
  packWindows: {
    src: 5,
    dst: 6,
    table: 7,
    K: 8,
    nPanels: 9,
    per: 10,
    col0: 11,
    OW: 12,
    skip: 13,
    NR: 14,
  },
  /** A convolution's bias and epilogue (epilogue_module.ts): C's first row, rows, C's row stride (floats), bytes a row, the rows' biases, the step table (byte addresses), its steps, rows a block. */
  epilogue: { cp: 5, rows: 6, ldc: 7, bytes: 8, bias: 9, steps: 10, nSteps: 11, per: 12 },
  /** A depthwise convolution (depthwise_module.ts): its geometry and scratch (byte addresses), bytes of scratch a block, planes, planes a block, output channels, input channels, the window, the outputs' offset in a block's scratch and their bytes, a zero float, the step table (byte addresses) and its steps. */
  depthwise: {
    desc: 5,
    scr: 6,
    scrBytes: 7,
    planes: 8,
    per: 9,
    M: 10,
    C: 11,
    K: 12,
    outOff: 13,
    outBytes: 14,
    zero: 15,
    steps: 16,
    nSteps: 17,
  },
  /** A convolution's input zero-padded from a plain copy (windows_module.ts's `pad_planes`): the copy's first value and the padded planes (byte addresses), planes, planes a block, rows a plane, bytes a row (written), the bytes between the values copied, the copy's row and plane strides, the padded planes' row and plane strides, the first value's offset in a padded plane (bytes). */
  padPlanes: {
    src: 5,
    dst: 6,
    planes: 7,
    per: 8,
    rows: 9,
    rowBytes: 10,
    srcStep: 11,
    srcRow: 12,
    srcPlane: 13,
    dstRow: 14,
    dstPlane: 15,
    dataOff: 16,
  },
  /** x, the packed weight, the outputs (byte addresses), its rows, K padded, rows a block (a multiple of 4). */
  dot: { xp: 5, wp: 6, op: 7, rows: 8, Kp: 9, br: 10 },
} as const;

/** The job kinds `JOB_ARGS` lays out (`Job.gemmPanels` is laid out as `Job.gemm`). */
export type JobLayout = keyof typeof JOB_ARGS;

/**
 * The argument list of a job laid out as `layout` (`JOB_ARGS`), from its
 * arguments by name, for `ThreadPool.run` and `runAlone`.
 */
export function jobArgs<L extends JobLayout>(
  layout: L,
  named: { readonly [K in keyof typeof JOB_ARGS[L]]: number },
): number[] {
  const out: number[] = [];
  for (const [name, slot] of JOB_SLOTS[layout]) {
    out[slot - Ctl.args] = (named as Record<string, number>)[name];
  }
  return out;
}

/** `JOB_ARGS` as lists, made once: `jobArgs` runs on every kernel call. */
const JOB_SLOTS = Object.fromEntries(
  Object.entries(JOB_ARGS).map(([layout, slots]) => [layout, Object.entries(slots)]),
) as Record<JobLayout, [string, number][]>;

/** Int32 slots of the control block. */
const Ctl = {
  generation: 0,
  kind: 1,
  blocks: 2,
  next: 3,
  finished: 4,
  /** Arguments: `args .. error - 1`. */
  args: 5,
  error: 24,
  /** Microseconds a worker spins after a job before it sleeps (`poolSpin.workerUs`). */
  spin: 25,
  /** The open pool's number (0 once closed): a worker of another pool exits. */
  epoch: 26,
} as const;

/** The number of the next pool opened (pools on one memory follow each other). */
let nextEpoch = 1;

/** A claim counter value no block index reaches: claims made while a job is being written. */
const CLOSED = 1 << 30;

/**
 * How long the pool's threads spin before they sleep, a mutable object so
 * that bench/small_rows_bench.ts can compare settings in one process.
 */
export const poolSpin = {
  /** Microseconds a worker keeps checking for the next job after one. */
  workerUs: 50,
  /** Microseconds the calling thread checks for the workers' last blocks before it waits. */
  callerUs: 100,
};

/**
 * Runs block `i` of the job in `ctl`. This exact function is also the body
 * the workers run (its source is copied into the worker script), so it must
 * use nothing but its arguments: `slots` is `JOB_ARGS`, which the worker
 * script passes as JSON (a parameter, so that a bundle's minifier cannot
 * rename it apart from the worker's name for it). The kind is slot 1
 * (`Ctl.kind`), the job kinds `Job`'s.
 */
export function runBlock(
  // deno-lint-ignore no-explicit-any
  ex: any,
  ctl: Int32Array,
  i: number,
  slots: typeof JOB_ARGS,
): void {
  const kind = ctl[1];
  if (kind === 1 || kind === 3) {
    // A product (gemm.ts) over every block of k: gemm_tiles per block, the tail tile of the
    // last `tail` rows by gemm_tiles_<tail>. Job 1 splits the full tile rows in blocks of
    // `per`, the last block taking the tail too; job 3 (few rows) splits the column panels in
    // blocks of `per`, each with every row.
    const g = slots.gemm;
    const ap = ctl[g.ap], bp = ctl[g.bp], cp = ctl[g.cp], fullTiles = ctl[g.fullTiles];
    const nPanels = ctl[g.nPanels], K = ctl[g.K], kcb = ctl[g.kc], lda = ctl[g.lda];
    const ldc = ctl[g.ldc], per = ctl[g.per], MR = ctl[g.MR], NR = ctl[g.NR], tail = ctl[g.tail];
    let t0 = 0, nt = fullTiles, p0 = 0, np = nPanels, withTail = tail > 0;
    if (kind === 1) {
      t0 = i * per;
      nt = Math.min(per, fullTiles - t0);
      withTail = tail > 0 && t0 + nt >= fullTiles;
    } else {
      p0 = i * per;
      np = Math.min(per, nPanels - p0);
    }
    const a = ap + t0 * MR * lda * 4, b = bp + p0 * K * NR * 4;
    const c = cp + (t0 * MR * ldc + p0 * NR) * 4;
    const aTail = ap + fullTiles * MR * lda * 4, cTail = cp + (fullTiles * MR * ldc + p0 * NR) * 4;
    const table = ctl[g.table];
    for (let k0 = 0; k0 < K; k0 += kcb) {
      const kc = Math.min(kcb, K - k0), acc = k0 > 0 ? 1 : 0;
      if (table !== 0) {
        // B read in place from a convolution's padded input (gemm_windows).
        const src = ctl[g.src], t = table + k0 * 4, bases = ctl[g.bases] + p0 * 4;
        if (nt > 0) ex.gemm_windows(a + k0 * 4, src, t, bases, c, nt, np, kc, lda, ldc, acc);
        if (withTail) {
          ex["gemm_windows_" + tail](
            aTail + k0 * 4,
            src,
            t,
            bases,
            cTail,
            1,
            np,
            kc,
            lda,
            ldc,
            acc,
          );
        }
        continue;
      }
      if (nt > 0) ex.gemm_tiles(a + k0 * 4, b + k0 * NR * 4, c, nt, np, kc, lda, K, ldc, acc);
      if (withTail) {
        ex["gemm_tiles_" + tail](
          aTail + k0 * 4,
          b + k0 * NR * 4,
          cTail,
          1,
          np,
          kc,
          lda,
          K,
          ldc,
          acc,
        );
      }
    }
  } else if (kind === 4) {
    // pack_panels over panels [i·per, (i+1)·per).
    const p = slots.packPanels;
    const src = ctl[p.src], dst = ctl[p.dst], K = ctl[p.K], lds = ctl[p.lds];
    const nPanels = ctl[p.nPanels], per = ctl[p.per], NR = ctl[p.NR];
    const p0 = i * per, n = Math.min(per, nPanels - p0);
    ex.pack_panels(src + p0 * NR * 4, dst + p0 * K * NR * 4, K, lds, n);
  } else if (kind === 5) {
    // pack_windows over panels [i·per, (i+1)·per): where the block's first panel reads from.
    const w = slots.packWindows;
    const K = ctl[w.K], per = ctl[w.per], NR = ctl[w.NR], OW = ctl[w.OW], skip = ctl[w.skip];
    const p0 = i * per, n = Math.min(per, ctl[w.nPanels] - p0);
    const col = ctl[w.col0] + p0 * NR, rows = Math.floor(col / OW), ox = col - rows * OW;
    const src = ctl[w.src] + col * 4 + rows * skip;
    ex.pack_windows(src, ctl[w.dst] + p0 * K * NR * 4, ctl[w.table], K, n, ox, OW, skip);
  } else if (kind === 6) {
    // conv_epilogue over rows [i·per, (i+1)·per).
    const e = slots.epilogue;
    const per = ctl[e.per], r0 = i * per, n = Math.min(per, ctl[e.rows] - r0), ldc = ctl[e.ldc];
    const cp = ctl[e.cp] + r0 * ldc * 4, bias = ctl[e.bias] + r0 * 4;
    ex.conv_epilogue(cp, n, ldc, ctl[e.bytes], bias, ctl[e.steps], ctl[e.nSteps]);
  } else if (kind === 7) {
    // A depthwise convolution's planes [i·per, (i+1)·per), in block i's scratch, zeroed first:
    // each plane's input copied in, convolved, its epilogue applied there (conv_epilogue), its
    // outputs copied out.
    const d = slots.depthwise;
    const desc = ctl[d.desc], scr = ctl[d.scr] + i * ctl[d.scrBytes], per = ctl[d.per];
    const M = ctl[d.M], C = ctl[d.C], perGroup = M / C, conv = ex["dw" + ctl[d.K]];
    const outAt = scr + ctl[d.outOff], outBytes = ctl[d.outBytes], nSteps = ctl[d.nSteps];
    const zero = ctl[d.zero], steps = ctl[d.steps];
    const p1 = Math.min(ctl[d.planes], (i + 1) * per);
    ex.dw_zero(desc, scr);
    for (let p = i * per; p < p1; p++) {
      const n = Math.floor(p / M), m = p - n * M;
      ex.dw_in(desc, scr, n * C + Math.floor(m / perGroup));
      conv(desc, scr, m);
      if (nSteps > 0) ex.conv_epilogue(outAt, 1, 0, outBytes, zero, steps, nSteps);
      ex.dw_out(desc, scr, p);
    }
  } else if (kind === 8) {
    // pad_planes over planes [i·per, (i+1)·per).
    const d = slots.padPlanes;
    const per = ctl[d.per], p0 = i * per, n = Math.min(per, ctl[d.planes] - p0);
    const srcPlane = ctl[d.srcPlane], dstPlane = ctl[d.dstPlane];
    ex.pad_planes(
      ctl[d.src] + p0 * srcPlane,
      ctl[d.dst] + p0 * dstPlane,
      n,
      ctl[d.rows],
      ctl[d.rowBytes],
      ctl[d.srcStep],
      ctl[d.srcRow],
      srcPlane,
      ctl[d.dstRow],
      dstPlane,
      ctl[d.dataOff],
    );
  } else if (kind === 2) {
    // dot_panels over weight rows [i·br, (i+1)·br).
    const d = slots.dot;
    const xp = ctl[d.xp], wp = ctl[d.wp], op = ctl[d.op], rows = ctl[d.rows], Kp = ctl[d.Kp];
    const br = ctl[d.br];
    const r0 = i * br, n = Math.min(br, rows - r0);
    ex.dot_panels(xp, wp + r0 * Kp * 4, op + r0 * 4, n, Kp);
  }
}

/**
 * Runs `blocks` blocks of a job of `kind` with `args` on the calling thread
 * alone, through the same `runBlock` the pool's threads run.
 */
export function runAlone(ex: unknown, kind: number, args: readonly number[], blocks: number): void {
  const ctl = new Int32Array(CONTROL_BYTES / 4);
  ctl[Ctl.kind] = kind;
  ctl.set(args, Ctl.args);
  ctl[Ctl.blocks] = blocks;
  for (let i = 0; i < blocks; i++) runBlock(ex, ctl, i, JOB_ARGS);
}

/** The worker script: instantiate the kernels on the shared memory, then claim blocks until exit. */
const WORKER_SOURCE = `
const JOB_ARGS = ${JSON.stringify(JOB_ARGS)};
const runBlock = ${runBlock.toString()};
onmessage = (e) => {
  const { module, memory, epoch } = e.data;
  const ex = new WebAssembly.Instance(module, { env: { memory } }).exports;
  const ctl = new Int32Array(memory.buffer, 0, ${CONTROL_BYTES / 4});
  let seen = Atomics.load(ctl, ${Ctl.generation});
  // Read after the generation: a pool closed before this worker started is seen here, one
  // closed later by the generation it bumps.
  if (Atomics.load(ctl, ${Ctl.epoch}) !== epoch) { postMessage("closed"); close(); return; }
  postMessage("ready");
  for (;;) {
    let now = Atomics.load(ctl, ${Ctl.generation});
    if (now === seen) {
      const until = performance.now() + Atomics.load(ctl, ${Ctl.spin}) / 1000;
      while (now === seen && performance.now() < until) now = Atomics.load(ctl, ${Ctl.generation});
      if (now === seen) {
        Atomics.wait(ctl, ${Ctl.generation}, seen);
        continue;
      }
    }
    seen = now;
    // The kind first: a job's kind is written after its pool's epoch, so a worker that reads a
    // later pool's kind reads that pool's epoch too, and leaves.
    if (Atomics.load(ctl, ${Ctl.kind}) === 0) break;
    if (Atomics.load(ctl, ${Ctl.epoch}) !== epoch) break;
    for (;;) {
      const i = Atomics.add(ctl, ${Ctl.next}, 1);
      if (i >= Atomics.load(ctl, ${Ctl.blocks})) break;
      try { runBlock(ex, ctl, i, JOB_ARGS); } catch (err) { Atomics.store(ctl, ${Ctl.error}, 1); }
      Atomics.add(ctl, ${Ctl.finished}, 1);
      Atomics.notify(ctl, ${Ctl.finished});
    }
  }
  close();
};
`;

/** A started pool of `threads - 1` workers (the calling thread is the last one). */
export class ThreadPool {
  /** Threads that run each job, the caller included. */
  readonly threads: number;
  readonly #ctl: Int32Array;
  readonly #canWait: boolean;
  /** Blocks the workers (not the calling thread) have run, over every job: for tests. */
  workerBlocks = 0;

  private constructor(threads: number, ctl: Int32Array) {
    this.threads = threads;
    this.#ctl = ctl;
    this.#canWait = mainThreadCanWait(ctl);
  }

  /**
   * Starts `threads - 1` workers on `memory` (shared) with `module` and
   * returns the pool at once, with a promise that resolves once every
   * worker is ready and rejects if one cannot start. The pool runs jobs
   * from the start: a worker not yet running claims no block, so the
   * calling thread takes them (a model called in a loop of `await`s never
   * lets the event loop take the workers' "ready" messages, so a pool that
   * waited for them would never be used there). Throws if a worker cannot
   * even be made (a CSP without `worker-src blob:`).
   */
  static open(
    module: WebAssembly.Module,
    memory: WebAssembly.Memory,
    threads: number,
  ): { pool: ThreadPool; ready: Promise<void> } {
    const url = URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "text/javascript" }));
    const ctl = new Int32Array(memory.buffer, 0, CONTROL_BYTES / 4);
    const workers: Worker[] = [];
    const ready: Promise<void>[] = [];
    const epoch = nextEpoch++;
    Atomics.store(ctl, Ctl.epoch, epoch);
    try {
      for (let index = 1; index < threads; index++) {
        const w = new Worker(url, { type: "module" });
        workers.push(w);
        ready.push(
          new Promise((resolve, reject) => {
            w.onmessage = () => resolve();
            w.onerror = (e) => {
              e.preventDefault();
              reject(new Error(`a CPU kernel worker failed to start: ${e.message}`));
            };
          }),
        );
        w.postMessage({ module, memory, epoch });
      }
    } catch (e) {
      exit(ctl);
      for (const w of workers) w.terminate();
      URL.revokeObjectURL(url);
      throw e;
    }
    const pool = new ThreadPool(threads, ctl);
    const settled = Promise.all(ready).finally(() => URL.revokeObjectURL(url));
    return { pool, ready: settled.then(() => {}) };
  }

  /**
   * Runs `blocks` blocks of a job of `kind` with `args` on every thread, and
   * returns when all are finished. `ex` is the calling thread's instance of
   * the kernels.
   */
  run(ex: unknown, kind: number, args: readonly number[], blocks: number): void {
    const ctl = this.#ctl;
    Atomics.store(ctl, Ctl.next, CLOSED); // late claims of the last job see no block
    Atomics.store(ctl, Ctl.kind, kind);
    for (let i = 0; i < args.length; i++) ctl[Ctl.args + i] = args[i];
    Atomics.store(ctl, Ctl.blocks, blocks);
    Atomics.store(ctl, Ctl.finished, 0);
    Atomics.store(ctl, Ctl.error, 0);
    Atomics.store(ctl, Ctl.spin, poolSpin.workerUs);
    Atomics.store(ctl, Ctl.next, 0);
    Atomics.add(ctl, Ctl.generation, 1);
    Atomics.notify(ctl, Ctl.generation);
    let mine = 0;
    for (;;) {
      const i = Atomics.add(ctl, Ctl.next, 1);
      if (i >= blocks) break;
      runBlock(ex, ctl, i, JOB_ARGS);
      Atomics.add(ctl, Ctl.finished, 1);
      mine++;
    }
    this.workerBlocks += blocks - mine;
    let waitFrom = -1;
    for (;;) {
      const done = Atomics.load(ctl, Ctl.finished);
      if (done >= blocks) break;
      if (!this.#canWait) continue;
      const now = performance.now();
      if (waitFrom < 0) waitFrom = now + poolSpin.callerUs / 1000;
      if (now >= waitFrom) Atomics.wait(ctl, Ctl.finished, done, 1);
    }
    if (Atomics.load(ctl, Ctl.error) !== 0) {
      throw new Error("a CPU kernel worker failed while running its block");
    }
  }

  /** Stops the workers (each closes itself, also one that has not started yet). */
  close(): void {
    exit(this.#ctl);
  }
}

/**
 * Tells every worker to close: those running by the generation, those not
 * started yet by the epoch (a worker that read the generation after the
 * exit would otherwise wait for a next job forever, and keep Deno alive).
 * Workers are not terminated: one killed in the middle of a block of the
 * next pool's job (an old worker can claim one in the moment before it
 * reads the epoch) would leave that job waiting forever; run to the end,
 * the block is computed right, as by any worker.
 */
function exit(ctl: Int32Array): void {
  Atomics.store(ctl, Ctl.epoch, 0);
  Atomics.store(ctl, Ctl.next, CLOSED);
  Atomics.store(ctl, Ctl.kind, Job.exit);
  Atomics.add(ctl, Ctl.generation, 1);
  Atomics.notify(ctl, Ctl.generation);
}

/** Whether `Atomics.wait` may block this thread (Deno's main thread yes, a browser's no). */
function mainThreadCanWait(ctl: Int32Array): boolean {
  try {
    Atomics.wait(ctl, 63, 12345, 0); // returns "not-equal" or "timed-out" where allowed
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether this realm can share memory with workers: `SharedArrayBuffer`,
 * `Worker` and, in a browser, a cross-origin-isolated page.
 */
export function threadsAvailable(): { ok: boolean; why: string } {
  const g = globalThis as { crossOriginIsolated?: boolean };
  if (typeof SharedArrayBuffer !== "function") {
    return { ok: false, why: "SharedArrayBuffer is not available" };
  }
  if (g.crossOriginIsolated === false) {
    return { ok: false, why: "the page is not cross-origin isolated" };
  }
  if (typeof Worker !== "function") return { ok: false, why: "workers are not available" };
  return { ok: true, why: "" };
}
