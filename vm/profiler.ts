/**
 * `Profiler`: what `vm.profile` attaches to the invocation it profiles
 * (`Invocation.probe`, vm/invocation.ts). The interpreter reports every
 * `Call` of that invocation to it, on the generic loop, between the user's
 * instrument's "before" and "after" calls (vm/interpreter.ts); other
 * invocations of the VM, and the VM's instrument, are not touched, so there
 * is nothing to restore when the call ends or fails.
 *
 * Per call it reads the host clock (`performance.now()`) and the VM's
 * allocators' counters (`servedBytes`, `allocatedBytes`) before and after,
 * and tells each GPU device's timer which call its kernels belong to
 * (`Device.startTimer`: WebGPU timestamp queries). The cost is about a
 * microsecond per call on top of the generic loop, so small calls look
 * slower than they run unprofiled; compare calls with each other, and time
 * the whole function with `time_evaluator`.
 *
 * @module
 */

import type { Device, DeviceTimer } from "../devices/device.ts";
import { describeCpuKernels } from "../devices/cpu_device.ts";
import type { MemoryScope } from "../devices/memory_scope.ts";
import type { ProgramData } from "../program/program_data.ts";
import type { CallProbe } from "./invocation.ts";
import { type Instr, instrText, type LoadedFunction } from "./loaded_function.ts";
import { type ProfiledCall, type ProfiledKernel, ProfileReport } from "./profile_report.ts";

/** Host bytes a recorded call is counted as (its record and its row of the report). */
const RECORD_BYTES = 512;

/** A call being or having been profiled. */
class Record {
  readonly id: number;
  readonly parent: Record | null;
  readonly depth: number;
  readonly fn: LoadedFunction;
  readonly ins: Instr;
  readonly kind: "packed" | "vm";
  /** Set last in `before`, so the bookkeeping is not part of the call's time. */
  start = 0;
  readonly served0: number;
  readonly allocated0: number;
  end = NaN;
  served = 0;
  allocated = 0;
  childMs = 0;
  failed = false;
  gpuSelfNs = 0;
  gpuNs = 0;

  constructor(
    id: number,
    parent: Record | null,
    fn: LoadedFunction,
    ins: Instr,
    kind: "packed" | "vm",
    served0: number,
    allocated0: number,
  ) {
    this.id = id;
    this.parent = parent;
    this.depth = parent === null ? 0 : parent.depth + 1;
    this.fn = fn;
    this.ins = ins;
    this.kind = kind;
    this.served0 = served0;
    this.allocated0 = allocated0;
  }
}

/** Collects the calls of one invocation; `finish()` makes the report. */
export class Profiler implements CallProbe {
  readonly #program: ProgramData;
  readonly #scope: MemoryScope;
  readonly #isVMFunction: (name: string) => boolean;
  readonly #records: Record[] = [];
  /** Calls that started and have not ended, innermost last. */
  readonly #open: Record[] = [];
  readonly #timers: { device: Device; timer: DeviceTimer }[] = [];
  readonly #unavailable: string[] = [];
  #t0 = 0;

  /**
   * A profiler for a VM running `program` with the allocators of `scope`;
   * `isVMFunction` tells VM functions from packed ones by name.
   */
  constructor(
    program: ProgramData,
    scope: MemoryScope,
    isVMFunction: (name: string) => boolean,
  ) {
    this.#program = program;
    this.#scope = scope;
    this.#isVMFunction = isVMFunction;
  }

  /** Whether the profiled VM has a CPU device (the report then says which CPU kernels ran). */
  #hasCpu = false;

  /** Starts the clock and the GPU timers of `devices`. */
  start(devices: readonly Device[]): void {
    this.#hasCpu = devices.some((d) => d.kind === "cpu");
    for (const device of devices) {
      const timer = device.startTimer();
      if (typeof timer === "string") this.#unavailable.push(timer);
      else if (timer !== null) this.#timers.push({ device, timer });
    }
    this.#t0 = performance.now();
  }

  /** Bytes served and newly allocated by the VM's allocators so far, on all devices. */
  #counters(): [number, number] {
    let served = 0, allocated = 0;
    for (const a of this.#scope.allocators()) {
      const s = a.stats();
      served += s.servedBytes;
      allocated += s.allocatedBytes;
    }
    return [served, allocated];
  }

  #tag(tag: number): void {
    for (const t of this.#timers) t.timer.setTag(tag);
  }

  before(fn: LoadedFunction, ins: Instr): unknown {
    // Every call is recorded: a program of endless calls would grow the profile without
    // bound (1 GB per 3 million calls), so records count against the VM's memory limit.
    try {
      this.#scope.limit.take(RECORD_BYTES, this.#scope.devices[0], RECORD_BYTES);
    } catch (e) {
      throw new RangeError(
        `profile: recording call ${this.#records.length + 1} (${RECORD_BYTES} bytes each): ${
          (e as Error).message
        }; profile a shorter call`,
      );
    }
    const parent = this.#open.at(-1) ?? null;
    const [served, allocated] = this.#counters();
    const kind = this.#isVMFunction(ins.fnName) ? "vm" : "packed";
    const record = new Record(
      this.#records.length,
      parent,
      fn,
      ins,
      kind,
      served,
      allocated,
    );
    this.#records.push(record);
    this.#open.push(record);
    this.#tag(record.id);
    record.start = performance.now();
    return record;
  }

  after(token: unknown, failed: boolean): void {
    const end = performance.now();
    const record = token as Record;
    record.end = end;
    record.failed = failed;
    const [served, allocated] = this.#counters();
    record.served = served - record.served0;
    record.allocated = allocated - record.allocated0;
    if (record.parent !== null) record.parent.childMs += end - record.start;
    const open = this.#open;
    const at = open.lastIndexOf(record);
    if (at >= 0) open.splice(at, 1);
    this.#tag(open.at(-1)?.id ?? -1);
  }

  /**
   * Stops the GPU timers (reading their timestamps back: one wait per
   * timed device) and makes the report. `callMs` is the call's wall time;
   * `inputs` what moved to the device before it.
   */
  async finish(
    functionName: string,
    callMs: number,
    inputs: { tensors: number; bytes: number; device: string },
  ): Promise<ProfileReport> {
    const records = this.#records;
    this.#scope.limit.give(records.length * RECORD_BYTES); // the report is the caller's now
    const kernels: ProfiledKernel[] = [];
    const timed: string[] = [];
    let gpuTotalNs = 0;
    for (const { device, timer } of this.#timers) {
      let list;
      try {
        list = await timer.finish();
      } catch (e) {
        this.#unavailable.push(`${device}: reading its timestamps failed (${String(e)})`);
        continue;
      }
      timed.push(String(device));
      // The GPU's clock on the host's: the earliest offset at which no kernel starts before it
      // was submitted.
      let offset = -Infinity;
      for (const k of list) offset = Math.max(offset, k.submittedAtMs - k.startNs / 1e6);
      for (const k of list) {
        const ns = Math.max(0, k.endNs - k.startNs);
        gpuTotalNs += ns;
        const record = k.tag >= 0 ? records[k.tag] : undefined;
        if (record !== undefined) {
          record.gpuSelfNs += ns;
          for (let r: Record | null = record; r !== null; r = r.parent) r.gpuNs += ns;
        }
        kernels.push({
          device: String(device),
          call: record?.id ?? -1,
          startMs: offset + k.startNs / 1e6 - this.#t0,
          durationMs: ns / 1e6,
        });
      }
    }
    const gpuTimed = timed.length > 0;
    const calls: ProfiledCall[] = records.map((r) => {
      const durationMs = Number.isNaN(r.end) ? 0 : r.end - r.start;
      return {
        id: r.id,
        parent: r.parent?.id ?? -1,
        depth: r.depth,
        functionName: r.fn.info.name,
        pc: r.ins.index - r.fn.info.start,
        instruction: instrText(this.#program, r.ins),
        callee: r.ins.fnName,
        kind: r.kind,
        startMs: r.start - this.#t0,
        durationMs,
        selfMs: Math.max(0, durationMs - r.childMs),
        bytes: r.served,
        newBytes: r.allocated,
        gpuSelfMs: gpuTimed ? r.gpuSelfNs / 1e6 : null,
        gpuMs: gpuTimed ? r.gpuNs / 1e6 : null,
        failed: r.failed,
      };
    });
    return new ProfileReport({
      functionName,
      callMs,
      calls,
      kernels,
      gpu: {
        timed,
        unavailable: this.#unavailable,
        kernels: kernels.length,
        totalMs: gpuTotalNs / 1e6,
      },
      inputs,
      cpuKernels: this.#hasCpu ? describeCpuKernels() : null,
    });
  }
}
