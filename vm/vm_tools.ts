/**
 * TVM's tools on a VM (vm/virtual_machine.ts): `time_evaluator` (timing a
 * function over many runs) and `profile` (one run, with where its time and
 * memory went).
 *
 * @module
 */

import { releaseValue } from "../ground/object.ts";
import type { ProgramData } from "../program/program_data.ts";
import type { Calls } from "./calls.ts";
import type { PlacedInputs } from "./input_placement.ts";
import { Profiler } from "./profiler.ts";
import type { ProfileReport } from "./profile_report.ts";
import type { TimeEvaluatorOptions, TimingResult } from "./vm_options.ts";

/** The most runs or measurements `time_evaluator` takes: 2^31 - 1. */
const MAX_TIMED_RUNS = 2 ** 31 - 1;

/** `vm.time_evaluator(name, options)`. */
export function timeEvaluator(
  calls: Calls,
  name: string,
  options: TimeEvaluatorOptions,
): (...args: unknown[]) => Promise<TimingResult> {
  const number = options.number ?? 1, repeat = options.repeat ?? 1;
  const count = (v: number) => Number.isSafeInteger(v) && v >= 1 && v <= MAX_TIMED_RUNS;
  if (!count(number) || !count(repeat)) {
    throw new RangeError(
      `time_evaluator: number and repeat must be integers from 1 to ${MAX_TIMED_RUNS}, got ${
        String(number)
      } and ${String(repeat)}`,
    );
  }
  // A name made by save_function times the saved function with its bound arguments.
  const saved = calls.saved.get(name);
  const index = calls.vmFunctionIndex(saved?.name ?? name);
  return async (...given: unknown[]) => {
    if (calls.disposed) throw calls.disposedError(name);
    const savedArgs = saved !== undefined && given.length === 0;
    const results: number[] = [];
    calls.callStarts(name);
    let placed: PlacedInputs | null = null;
    try {
      // Moved once for all runs (`moveInputs`): the runs time the function, not the uploads.
      placed = savedArgs ? null : calls.place(saved?.name ?? name, given, true);
      const args = savedArgs ? saved.args : placed?.args ?? given;
      // Runs that return at once resume on microtasks, which starve timers and I/O: the loop
      // yields a macrotask about every 20 ms, and stops when the VM's signal aborts.
      let lastYield = performance.now();
      for (let r = 0; r < repeat; r++) {
        let t0 = performance.now();
        for (let n = 0; n < number; n++) {
          const out = await calls.interp.invoke(calls.limits, index, args);
          // A function may return one of its arguments, which the caller still owns.
          if (!args.includes(out)) releaseValue(out);
          calls.flush();
          const now = performance.now();
          if (now - lastYield > 20) {
            await new Promise((resolve) => setTimeout(resolve, 0));
            lastYield = performance.now();
            t0 += lastYield - now; // the pause is not the function's time
            calls.checkAborted(name);
          }
        }
        await Promise.all(calls.devices.map((d) => d.synchronize()));
        results.push((performance.now() - t0) / number);
      }
    } finally {
      placed?.finish();
      calls.callEnds();
    }
    const sorted = [...results].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return {
      mean: results.reduce((a, b) => a + b, 0) / results.length,
      median: sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2,
      min: sorted[0],
      max: sorted[sorted.length - 1],
      results,
    };
  };
}

/** `vm.profile(name, ...args)`, running on `program` (the one the interpreter runs). */
export async function profileCall(
  calls: Calls,
  program: ProgramData,
  name: string,
  args: unknown[],
): Promise<ProfileReport> {
  const saved = calls.saved.get(name);
  const useSaved = saved !== undefined && args.length === 0;
  const fnName = useSaved ? saved.name : name;
  const index = calls.vmFunctionIndex(fnName);
  calls.callStarts(fnName);
  let placed: PlacedInputs | null;
  try {
    placed = useSaved ? null : calls.place(fnName, args, false);
  } catch (e) {
    calls.callEnds();
    throw e;
  }
  const callArgs = useSaved ? saved.args : placed?.args ?? args;
  const ex = calls.executable;
  const profiler = new Profiler(program, calls.state, (callee) => {
    const i = ex.functionIndex(callee);
    return i >= 0 && ex.functions[i].kind === "vm";
  });
  profiler.start(calls.devices);
  const t0 = performance.now();
  let callMs = 0;
  let failure: { error: unknown } | null = null;
  try {
    const out = await calls.interp.invoke(calls.limits, index, callArgs, profiler);
    callMs = performance.now() - t0;
    releaseValue(out);
  } catch (e) {
    callMs = performance.now() - t0;
    failure = { error: e };
  } finally {
    calls.flush();
    placed?.finish();
    calls.callEnds();
  }
  // Also after a failure: the GPU timers must stop.
  const report = await profiler.finish(fnName, callMs, {
    tensors: placed?.count ?? 0,
    bytes: placed?.bytes ?? 0,
    device: String(calls.devices[0]),
  });
  if (failure !== null) throw failure.error;
  return report;
}
