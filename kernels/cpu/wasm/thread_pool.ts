/**
 * The CPU kernels' worker pool: persistent workers sharing the kernels'
 * WebAssembly.Memory, each running its share of a kernel call.
 *
 * Protocol. The first 256 bytes of the memory are a control block of
 * int32s: `[0]` a generation counter, `[1]` how many workers finished the
 * current job, `[2]` the job's kind (0 = exit), `[3..13]` its arguments,
 * `[14]` 1 when the workers alone run the job, `[15]` set by a worker whose
 * share threw.
 * The calling thread writes the job, bumps the generation and notifies;
 * every worker wakes (`Atomics.wait` on the generation), runs its share,
 * counts itself done and notifies; the caller runs share 0 meanwhile, then
 * waits for the count. Workers are started once and stay blocked in
 * `Atomics.wait` between calls, so a call costs a wake-up (tens of
 * microseconds), not a worker start.
 *
 * The split lives in the worker source below and in `runShare` (the same
 * arithmetic): a `gemm_tiles` job is split by tile rows, each share walking
 * its rows in L2-sized blocks; a `dot_rows` job by groups of weight rows.
 *
 * Where it runs. Deno always has `SharedArrayBuffer` and workers; a browser
 * has them only on a cross-origin-isolated page. Elsewhere (or when a
 * worker cannot start, e.g. a CSP without `worker-src blob:`) the kernels
 * run on the calling thread alone. The worker source is a string turned
 * into a `blob:` URL, so bundles need no second file.
 *
 * This file is browser-safe: no `Deno.*`.
 *
 * @module
 */

/** Bytes at the start of the memory reserved for the control block. */
export const CONTROL_BYTES = 256;

/** Job kinds. */
export const Job = { exit: 0, gemm: 1, dot: 2 } as const;

/**
 * Runs share `t` of `threads` of a job whose kind and arguments are in
 * `ctl` (the control block). This exact function is also the body the
 * workers run: its source is copied into the worker script, so it must use
 * nothing but its arguments.
 */
// deno-lint-ignore no-explicit-any
export function runShare(ex: any, ctl: Int32Array, t: number, threads: number): void {
  const kind = ctl[2];
  if (ctl[14] === 1) {
    // Workers only (the caller is copying the next operand meanwhile): worker t of threads - 1.
    t -= 1;
    threads -= 1;
  }
  if (kind === 1) {
    // gemm_tiles(ap, bp, cp, mTiles, nPanels, K, ldc) by tile rows, blocks of mct tile rows.
    const ap = ctl[3], bp = ctl[4], cp = ctl[5], mTiles = ctl[6], nPanels = ctl[7];
    const K = ctl[8], ldc = ctl[9], mct = ctl[10], MR = ctl[11];
    const t0 = Math.floor(mTiles * t / threads), t1 = Math.floor(mTiles * (t + 1) / threads);
    for (let i = t0; i < t1; i += mct) {
      const n = Math.min(mct, t1 - i);
      ex.gemm_tiles(ap + i * K * MR * 4, bp, cp + i * MR * ldc * 4, n, nPanels, K, ldc);
    }
  } else if (kind === 2) {
    // dot_rows(xp, wp, op, rows, Kp) by groups of `group` weight rows.
    const xp = ctl[3], wp = ctl[4], op = ctl[5], rows = ctl[6], Kp = ctl[7], group = ctl[8];
    const groups = rows / group;
    const g0 = Math.floor(groups * t / threads), g1 = Math.floor(groups * (t + 1) / threads);
    if (g1 > g0) {
      ex.dot_rows(xp, wp + g0 * group * Kp * 4, op + g0 * group * 4, (g1 - g0) * group, Kp);
    }
  }
}

/** The worker script: instantiate the kernels on the shared memory, then serve jobs until exit. */
const WORKER_SOURCE = `
const runShare = ${runShare.toString()};
onmessage = (e) => {
  const { module, memory, index, threads } = e.data;
  const ex = new WebAssembly.Instance(module, { env: { memory } }).exports;
  const ctl = new Int32Array(memory.buffer, 0, ${CONTROL_BYTES / 4});
  let seen = Atomics.load(ctl, 0);
  postMessage("ready");
  for (;;) {
    Atomics.wait(ctl, 0, seen);
    const now = Atomics.load(ctl, 0);
    if (now === seen) continue;
    seen = now;
    if (ctl[2] === 0) break;
    try { runShare(ex, ctl, index, threads); } catch (err) { ctl[15] = 1; }
    Atomics.add(ctl, 1, 1);
    Atomics.notify(ctl, 1);
  }
  close();
};
`;

/** A started pool of `threads - 1` workers (the calling thread is share 0). */
export class ThreadPool {
  /** Threads that run each job, the caller included. */
  readonly threads: number;
  readonly #workers: Worker[];
  readonly #ctl: Int32Array;
  readonly #canWait: boolean;

  private constructor(threads: number, workers: Worker[], ctl: Int32Array) {
    this.threads = threads;
    this.#workers = workers;
    this.#ctl = ctl;
    this.#canWait = mainThreadCanWait(ctl);
  }

  /**
   * Starts `threads - 1` workers on `memory` (shared) with `module`, and
   * resolves once all are ready; rejects if one cannot start.
   */
  static async start(
    module: WebAssembly.Module,
    memory: WebAssembly.Memory,
    threads: number,
  ): Promise<ThreadPool> {
    const url = URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "text/javascript" }));
    const workers: Worker[] = [];
    try {
      const ready: Promise<void>[] = [];
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
        w.postMessage({ module, memory, index, threads });
      }
      await Promise.all(ready);
    } catch (e) {
      for (const w of workers) w.terminate();
      throw e;
    } finally {
      URL.revokeObjectURL(url);
    }
    return new ThreadPool(threads, workers, new Int32Array(memory.buffer, 0, CONTROL_BYTES / 4));
  }

  /**
   * Runs a job of `kind` with `args` on every thread and returns when all
   * are done. `ex` is the calling thread's instance of the kernels.
   */
  run(ex: unknown, kind: number, args: readonly number[]): void {
    this.start(kind, args, false);
    runShare(ex, this.#ctl, 0, this.threads);
    this.wait();
  }

  /**
   * Hands a job to the workers and returns at once; `wait()` returns when
   * they are done. With `workersOnly`, the workers split the whole job
   * among themselves (the caller does something else meanwhile); without,
   * share 0 is left for the caller to run.
   */
  start(kind: number, args: readonly number[], workersOnly: boolean): void {
    const ctl = this.#ctl;
    ctl[2] = kind;
    for (let i = 0; i < args.length; i++) ctl[3 + i] = args[i];
    ctl[14] = workersOnly ? 1 : 0;
    ctl[15] = 0;
    Atomics.store(ctl, 1, 0);
    Atomics.add(ctl, 0, 1);
    Atomics.notify(ctl, 0);
  }

  /** Waits until every worker finished the job `start` handed out. */
  wait(): void {
    const ctl = this.#ctl;
    const others = this.threads - 1;
    for (;;) {
      const done = Atomics.load(ctl, 1);
      if (done >= others) break;
      if (this.#canWait) Atomics.wait(ctl, 1, done, 1000);
    }
    if (ctl[15] !== 0) throw new Error("a CPU kernel worker failed while running its share");
  }

  /** Stops the workers. */
  close(): void {
    const ctl = this.#ctl;
    ctl[2] = Job.exit;
    Atomics.add(ctl, 0, 1);
    Atomics.notify(ctl, 0);
    for (const w of this.#workers) w.terminate();
  }
}

/** Whether `Atomics.wait` may block this thread (Deno's main thread yes, a browser's no). */
function mainThreadCanWait(ctl: Int32Array): boolean {
  try {
    Atomics.wait(ctl, 15, 12345, 0); // returns "not-equal" or "timed-out" where allowed
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
