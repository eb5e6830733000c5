/**
 * `ProfileReport`: what `vm.profile(name, ...args)` resolves to (TVM's
 * `relax.VirtualMachine.profile` and the Relay profiler VM). It holds every
 * `Call` the profiled invocation ran, nested VM calls included, with its wall
 * time, the bytes it allocated and, on a WebGPU device with timestamp
 * queries, the GPU time of the kernels it recorded; and it aggregates them
 * per function and per instruction, prints them as a table, and writes a
 * Chrome trace (`chrome://tracing`, Perfetto).
 *
 * @module
 */

import { formatBytes, INSPECT } from "../ground/inspect.ts";
import { printable } from "../ground/printable.ts";

/** One `Call` the profiled invocation ran. */
export interface ProfiledCall {
  /** Its index in `ProfileReport.calls` (calls are in the order they started). */
  readonly id: number;
  /** The call it ran inside (a VM function's `Call`, or a packed function that called back), or -1. */
  readonly parent: number;
  /** Nesting: 0 for the calls of the profiled function itself. */
  readonly depth: number;
  /** The VM function whose instruction made the call. */
  readonly functionName: string;
  /** The instruction's index in that function. */
  readonly pc: number;
  /** The instruction as `as_text()` prints it. */
  readonly instruction: string;
  /** The function called. */
  readonly callee: string;
  /** Whether the callee is a packed function or a VM function of the executable. */
  readonly kind: "packed" | "vm";
  /** When it started, in milliseconds after the profiled call started. */
  readonly startMs: number;
  /** Wall time until it returned (or its Promise settled), calls inside it included. */
  readonly durationMs: number;
  /** `durationMs` less the calls inside it. */
  readonly selfMs: number;
  /** Bytes of tensor and storage blocks allocated meanwhile, from the pool or new (calls inside included). */
  readonly bytes: number;
  /** Of those, bytes newly obtained from the device (the rest came from the pool). */
  readonly newBytes: number;
  /** GPU time of the kernels it recorded itself, in milliseconds; null where not measured. */
  readonly gpuSelfMs: number | null;
  /** GPU time of the kernels it and the calls inside it recorded; null where not measured. */
  readonly gpuMs: number | null;
  /** Whether it threw (or its Promise rejected). */
  readonly failed: boolean;
}

/** A kernel timed on a GPU with timestamp queries. */
export interface ProfiledKernel {
  /** The device that ran it. */
  readonly device: string;
  /** The call that recorded it (`ProfiledCall.id`), or -1. */
  readonly call: number;
  /**
   * When it started, in milliseconds after the profiled call started: the
   * GPU's clock, placed on the host's at the earliest time consistent with
   * every kernel starting after its submission.
   */
  readonly startMs: number;
  /** Its GPU time, in milliseconds. */
  readonly durationMs: number;
}

/** One row of `byFunction()` or `byInstruction()`. */
export interface ProfileRow {
  /** The callee (`byFunction`), or `@function[pc]` (`byInstruction`). */
  readonly name: string;
  /** The callee's kind. */
  readonly kind: "packed" | "vm";
  /** `byInstruction`: the instruction's text; `byFunction`: "". */
  readonly instruction: string;
  /** Calls counted. */
  readonly calls: number;
  /** Wall time of those calls, calls inside them included, in milliseconds. */
  readonly totalMs: number;
  /** Wall time less the calls inside them. */
  readonly selfMs: number;
  /** The shortest call. */
  readonly minMs: number;
  /** The longest call. */
  readonly maxMs: number;
  /** `selfMs` as a percentage of the profiled call's wall time. */
  readonly percent: number;
  /** Bytes allocated by the calls themselves (not by calls inside them). */
  readonly bytes: number;
  /** Of those, bytes newly obtained from the device. */
  readonly newBytes: number;
  /** GPU time of the kernels the calls recorded themselves; null where not measured. */
  readonly gpuMs: number | null;
}

/** What the report knows about GPU time. */
export interface ProfileGpuSummary {
  /** The devices whose kernels were timed. */
  readonly timed: readonly string[];
  /** For each GPU that could not be timed, why. */
  readonly unavailable: readonly string[];
  /** Kernels timed. */
  readonly kernels: number;
  /** Their GPU time together, in milliseconds. */
  readonly totalMs: number;
}

/** One event of a Chrome trace (the Trace Event Format). */
export interface ChromeTraceEvent {
  /** Name shown on the slice. */
  name: string;
  /** Category. */
  cat?: string;
  /** `"X"`: a complete event (`ts` and `dur`); `"M"`: metadata (thread and process names). */
  ph: "X" | "M";
  /** Start, in microseconds. */
  ts: number;
  /** Duration, in microseconds (`"X"` events). */
  dur?: number;
  /** Process: a group of rows of the timeline. */
  pid: number;
  /** Thread: one row of the timeline. */
  tid: number;
  /** Shown when the slice is selected. */
  args?: Record<string, unknown>;
}

/** A Chrome trace: `JSON.stringify` it and open it in `chrome://tracing` or ui.perfetto.dev. */
export interface ChromeTrace {
  /** The events. */
  traceEvents: ChromeTraceEvent[];
  /** How the viewer shows times. */
  displayTimeUnit: "ms";
}

/** What `Profiler` hands to the report. */
export interface ProfileData {
  readonly functionName: string;
  readonly callMs: number;
  readonly calls: readonly ProfiledCall[];
  readonly kernels: readonly ProfiledKernel[];
  readonly gpu: ProfileGpuSummary;
  readonly inputs: { readonly tensors: number; readonly bytes: number; readonly device: string };
  /** Which kernels computed on the CPU (`CpuDevice.description`), when the VM has a CPU device. */
  readonly cpuKernels?: string | null;
}

/** Milliseconds with three decimals. */
const ms = (x: number) => x.toFixed(3);

/**
 * The profile of one call (`vm.profile`). `table()` (also `toString()`)
 * prints it, `byFunction()` and `byInstruction()` give the rows, `calls`
 * every call, and `chromeTrace()` a trace for `chrome://tracing` or
 * Perfetto.
 *
 * @example
 * ```ts
 * import { ExecBuilder, tensor, VirtualMachine } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("main", { num_inputs: 1 }, () => {
 *   ib.emit_call("vm.op.exp", [ib.r(0)], { dst: ib.r(1) });
 *   ib.emit_call("vm.op.add", [ib.r(1), ib.r(1)], { dst: ib.r(2) });
 *   ib.emit_ret(ib.r(2));
 * });
 * const vm = new VirtualMachine(ib.get());
 * using x = tensor([1, 2, 3]);
 * const report = await vm.profile("main", x);
 * assertEquals(report.byFunction().map((r) => [r.name, r.calls]).sort(), [["vm.op.add", 1], ["vm.op.exp", 1]]);
 * console.log(report.table());
 * const trace = JSON.stringify(report.chromeTrace()); // save it, open it in ui.perfetto.dev
 * ```
 */
export class ProfileReport {
  /** The profiled VM function. */
  readonly functionName: string;
  /** Wall time of the call, from its start until it returned, in milliseconds. */
  readonly callMs: number;
  /** Every `Call` it ran, in the order they started. */
  readonly calls: readonly ProfiledCall[];
  /** Kernels timed on a GPU, in the order they were recorded. */
  readonly kernels: readonly ProfiledKernel[];
  /** GPU time, and why it is missing where it is. */
  readonly gpu: ProfileGpuSummary;
  /** CPU tensors the call's arguments moved to the VM's device before it started (`moveInputs`). */
  readonly inputs: { readonly tensors: number; readonly bytes: number; readonly device: string };
  /**
   * Which kernels computed on the CPU, e.g. `"WebAssembly relaxed-simd
   * kernels, 2 threads"` (or why TypeScript, or one thread); null when the VM
   * has no CPU device.
   */
  readonly cpuKernels: string | null;

  /**
   * Made by `vm.profile`.
   *
   * @ignore
   */
  constructor(data: ProfileData) {
    this.functionName = data.functionName;
    this.callMs = data.callMs;
    this.calls = data.calls;
    this.kernels = data.kernels;
    this.gpu = data.gpu;
    this.cpuKernels = data.cpuKernels ?? null;
    this.inputs = data.inputs;
  }

  /** Whether GPU time was measured. */
  get #gpuTimed(): boolean {
    return this.gpu.timed.length > 0;
  }

  /**
   * One row per function called (packed or VM), most self time first. A
   * VM function's `totalMs` includes the calls it made; `selfMs` (and the
   * bytes and GPU time) count each call once, where it was made, so the
   * rows add up to the profile.
   */
  byFunction(): ProfileRow[] {
    return this.#rows((c) => c.callee, () => "");
  }

  /** One row per instruction that made calls (`@function[pc]`), most self time first. */
  byInstruction(): ProfileRow[] {
    return this.#rows((c) => `@${c.functionName}[${c.pc}]`, (c) => c.instruction);
  }

  #rows(key: (c: ProfiledCall) => string, text: (c: ProfiledCall) => string): ProfileRow[] {
    const groups = new Map<string, ProfiledCall[]>();
    for (const c of this.calls) {
      const k = key(c);
      let list = groups.get(k);
      if (list === undefined) groups.set(k, list = []);
      list.push(c);
    }
    const childBytes = new Map<number, { bytes: number; newBytes: number }>();
    for (const c of this.calls) {
      if (c.parent < 0) continue;
      const b = childBytes.get(c.parent) ?? { bytes: 0, newBytes: 0 };
      b.bytes += c.bytes;
      b.newBytes += c.newBytes;
      childBytes.set(c.parent, b);
    }
    const rows: ProfileRow[] = [];
    for (const [name, list] of groups) {
      let totalMs = 0, selfMs = 0, bytes = 0, newBytes = 0, gpu = 0;
      let minMs = Infinity, maxMs = 0;
      for (const c of list) {
        totalMs += c.durationMs;
        selfMs += c.selfMs;
        minMs = Math.min(minMs, c.durationMs);
        maxMs = Math.max(maxMs, c.durationMs);
        const inner = childBytes.get(c.id);
        bytes += c.bytes - (inner?.bytes ?? 0);
        newBytes += c.newBytes - (inner?.newBytes ?? 0);
        gpu += c.gpuSelfMs ?? 0;
      }
      rows.push({
        name,
        kind: list[0].kind,
        instruction: text(list[0]),
        calls: list.length,
        totalMs,
        selfMs,
        minMs,
        maxMs,
        percent: this.callMs > 0 ? (100 * selfMs) / this.callMs : 0,
        bytes,
        newBytes,
        gpuMs: this.#gpuTimed ? gpu : null,
      });
    }
    return rows.sort((a, b) => b.selfMs - a.selfMs || a.name.localeCompare(b.name));
  }

  /**
   * The report as text: a summary line, then the rows of `byFunction()` and
   * of `byInstruction()` as aligned tables.
   */
  table(): string {
    const gpu = this.#gpuTimed;
    const lines = [this.#summary()];
    if (this.inputs.tensors > 0) {
      lines.push(
        `Inputs moved to ${this.inputs.device} before the call: ${this.inputs.tensors} tensor${
          this.inputs.tensors === 1 ? "" : "s"
        }, ${formatBytes(this.inputs.bytes)}`,
      );
    }
    if (this.cpuKernels !== null) lines.push(`CPU: ${this.cpuKernels}`);
    for (const reason of this.gpu.unavailable) lines.push(`GPU time not measured: ${reason}`);
    const gpuHead = gpu ? ["GPU ms"] : [];
    const byFunction = this.byFunction().map((r) => [
      printable(r.name),
      r.kind,
      String(r.calls),
      ms(r.totalMs),
      ms(r.selfMs),
      ms(r.totalMs / r.calls),
      `${r.percent.toFixed(1)}%`,
      formatBytes(r.bytes),
      formatBytes(r.newBytes),
      ...(gpu ? [ms(r.gpuMs ?? 0)] : []),
    ]);
    lines.push(
      "",
      "By function (self: without the calls it made; a VM function's total includes them)",
      ...layout(
        [
          "function",
          "kind",
          "calls",
          "total ms",
          "self ms",
          "mean ms",
          "self %",
          "allocated",
          "new",
          ...gpuHead,
        ],
        byFunction,
        2,
      ),
    );
    const byInstruction = this.byInstruction().map((r) => [
      printable(r.name),
      printable(r.instruction.replace(/\s+/g, " ")),
      String(r.calls),
      ms(r.totalMs),
      ms(r.selfMs),
      formatBytes(r.bytes),
      ...(gpu ? [ms(r.gpuMs ?? 0)] : []),
    ]);
    lines.push(
      "",
      "By instruction",
      ...layout(
        ["where", "instruction", "calls", "total ms", "self ms", "allocated", ...gpuHead],
        byInstruction,
        2,
      ),
    );
    return lines.join("\n");
  }

  /** `table()`. */
  toString(): string {
    return this.table();
  }

  #summary(): string {
    const n = this.calls.length;
    const top = this.calls.filter((c) => c.parent < 0);
    const bytes = top.reduce((a, c) => a + c.bytes, 0);
    const newBytes = top.reduce((a, c) => a + c.newBytes, 0);
    let gpu = "";
    if (this.#gpuTimed) {
      gpu = `; GPU ${ms(this.gpu.totalMs)} ms in ${this.gpu.kernels} kernel${
        this.gpu.kernels === 1 ? "" : "s"
      } on ${this.gpu.timed.join(", ")}`;
    }
    return `Profile of @${printable(this.functionName)}: ${ms(this.callMs)} ms, ${n} call${
      n === 1 ? "" : "s"
    }${gpu}; ${formatBytes(bytes)} allocated, ${formatBytes(newBytes)} of it new from the device`;
  }

  /**
   * The profile as a Chrome trace (Trace Event Format): on one row the
   * profiled call and every call inside it, nested as they ran; on one row
   * per timed GPU, its kernels, named after the call that recorded them.
   * Times in microseconds from the start of the call.
   * `JSON.stringify` it and open it in `chrome://tracing` or
   * https://ui.perfetto.dev.
   */
  chromeTrace(): ChromeTrace {
    const pid = 1, host = 1;
    const us = (x: number) => Math.round(x * 1000 * 1000) / 1000;
    const events: ChromeTraceEvent[] = [
      { name: "process_name", ph: "M", ts: 0, pid, tid: 0, args: { name: "relaxvm" } },
      { name: "thread_name", ph: "M", ts: 0, pid, tid: host, args: { name: "VM calls (host)" } },
      {
        name: `@${this.functionName}`,
        cat: "vm function",
        ph: "X",
        ts: 0,
        dur: us(this.callMs),
        pid,
        tid: host,
        args: { profiled: true },
      },
    ];
    for (const c of this.calls) {
      const args: Record<string, unknown> = {
        function: `@${c.functionName}`,
        pc: c.pc,
        instruction: c.instruction,
        allocatedBytes: c.bytes,
        newBytes: c.newBytes,
      };
      if (c.gpuMs !== null) args.gpuMs = c.gpuMs;
      if (c.failed) args.failed = true;
      events.push({
        name: c.callee,
        cat: c.kind === "vm" ? "vm function" : "packed function",
        ph: "X",
        ts: us(c.startMs),
        dur: us(c.durationMs),
        pid,
        tid: host,
        args,
      });
    }
    this.gpu.timed.forEach((device, i) => {
      const tid = 2 + i;
      events.push({
        name: "thread_name",
        ph: "M",
        ts: 0,
        pid,
        tid,
        args: { name: `${device} (GPU clock)` },
      });
      for (const k of this.kernels) {
        if (k.device !== device) continue;
        const call = k.call >= 0 ? this.calls[k.call] : undefined;
        events.push({
          name: call?.callee ?? "kernel",
          cat: "gpu",
          ph: "X",
          ts: us(k.startMs),
          dur: us(k.durationMs),
          pid,
          tid,
          args: call === undefined
            ? {}
            : { call: call.id, function: `@${call.functionName}`, pc: call.pc },
        });
      }
    });
    return { traceEvents: events, displayTimeUnit: "ms" };
  }

  /**
   * Shown by `console.log` and `deno repl`: the summary line and the table.
   */
  [INSPECT](): string {
    return this.table();
  }
}

/** Columns padded to their widest cell: text left-aligned, numbers right-aligned. */
function layout(head: string[], rows: string[][], gap: number): string[] {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const numeric = head.map((_, i) =>
    rows.length > 0 && rows.every((r) => /^-?[\d.]+( \w+|%)?$/.test(r[i]))
  );
  const line = (cells: string[]) =>
    cells.map((c, i) => numeric[i] ? c.padStart(widths[i]) : c.padEnd(widths[i]))
      .join(" ".repeat(gap)).trimEnd();
  return [line(head), ...rows.map(line)];
}
