/**
 * The option and result types of `VirtualMachine` (vm/virtual_machine.ts):
 * what `new VirtualMachine(ex, devices, options)` accepts, what `vm.with`,
 * `loadReport` and `time_evaluator` give back.
 *
 * @module
 */

import type { AllocatorKind } from "../devices/allocator.ts";
import type { NDArray } from "../devices/ndarray.ts";
import { TensorCache, type TensorCacheRoot } from "../devices/tensor_cache.ts";
import { printable } from "../ground/printable.ts";
import type { PackedFunc } from "../ground/registry.ts";
import {
  type CallLimits,
  checkCount,
  checkYieldInterval,
  DEFAULT_MAX_CALL_DEPTH,
  DEFAULT_MAX_STACK_SLOTS,
  DEFAULT_YIELD_INTERVAL_MS,
  NO_LIMITS,
  type ResolvedLimits,
  resolveLimits,
} from "./invocation.ts";

/**
 * Options of `new VirtualMachine`. Besides how the VM runs code, they set
 * the limits every call gets (see docs/security.md): the
 * defaults of `fuel`, `timeoutMs` and `signal` (`CallLimits`, which
 * `vm.with(...)` overrides per call), how deep and how large one call's stack
 * may grow, and how much memory the VM may hold.
 */
export interface VirtualMachineOptions extends CallLimits {
  /** `"pooled"` (default): reuse freed blocks; `"naive"`: allocate and free each time. */
  allocator?: AllocatorKind;
  /**
   * How the VM runs code; the three forms give the same results, errors,
   * releases and memory figures.
   *
   * `"compiled"` (default): TVM's compiled VM for JavaScript. Each VM
   * function is written out at load as one JavaScript function whose
   * registers are locals. On `bench/dispatch_bench.ts` (1000 trivial calls)
   * it runs at about 0.6 ns per call, within 1.2× of hand-written
   * straight-line JS, against 3.7 ns for `"specialized"`, for the same load
   * time, and reaches full speed sooner; for programs whose time goes to
   * kernels it changes little. A call that waits on a Promise finishes on
   * the function's specialized loop, written when it first happens.
   *
   * `"specialized"`: the interpreter, with each function's loop written out as
   * JavaScript at load.
   *
   * `"generic"`: the one generic loop of the interpreter, for comparison and
   * debugging (about 5× slower than `"specialized"` per call).
   *
   * Every form falls back to the generic loop, with the same results, for
   * calls made while an instrument is set (and a profiled call), for
   * functions too large for V8 to optimize or whose releases are too many to
   * write out, and where `new Function` is forbidden (a Content Security
   * Policy without `unsafe-eval`).
   *
   * @example
   * ```ts
   * import { ExecBuilder, VirtualMachine } from "@relaxvm/relaxvm";
   * import { assertEquals } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("id", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
   * const vm = new VirtualMachine(ib.get(), undefined, { execution: "generic" });
   * assertEquals(await vm.invoke("id", 7), 7);
   * ```
   */
  execution?: Execution;
  /**
   * @deprecated Use `execution`: `mode: "compiled"` is `execution:
   * "compiled"`, `mode: "interpret"` is `execution: "specialized"` (or
   * `"generic"` with `dispatch: "generic"`). Without `execution`, a VM given
   * `mode` or `dispatch` runs as before they were deprecated: `mode`
   * defaults to `"interpret"` and `dispatch` to `"specialized"`.
   *
   * `"interpret"`: run functions on the interpreter.
   *
   * `"compiled"`: TVM's compiled VM for JavaScript. Each VM function is
   * written out at load as one JavaScript function whose registers are
   * locals, with the interpreter's semantics (results, releases and memory
   * figures, `VMError`s, recursion, closures). Use it for programs of many
   * small calls, whose time goes to dispatch: on the benchmark of 1000
   * trivial calls it runs within 1.2× of hand-written straight-line JS,
   * against 7× for the interpreter. For programs whose time goes to kernels
   * it changes little. At load it costs a little more than the interpreter
   * (writing the source), and V8 then takes a few hundred milliseconds of
   * running to optimize a large function. It falls back to the interpreter,
   * with the same results, for calls made while an instrument is set (and
   * for a profiled call), for
   * the rest of a call after a packed function returned a Promise, for
   * functions too large for V8 to optimize or whose releases are too many to
   * write out, and where `new Function` is forbidden (a Content Security
   * Policy without `unsafe-eval`).
   */
  mode?: "interpret" | "compiled";
  /**
   * Whether CPU tensor arguments move to the VM's first device when that is
   * not the CPU (TVM's `set_input` behaviour): `true` (default) copies them
   * there at each call — counted in `memory_stats()`, freed after their last
   * use — so a VM made for a GPU computes on the GPU whatever the caller
   * passes. `false` passes arguments as they are: operators then run on the
   * device their operands are on (for a VM of several devices that takes
   * some inputs on the CPU on purpose). Tensors inside arrays move too;
   * `save_function` and `set_input` move theirs once, when called.
   */
  moveInputs?: boolean;
  /**
   * @deprecated Use `execution` (see `mode`).
   *
   * How the interpreter dispatches: `"specialized"` (default) writes each
   * function's loop out as JavaScript at load, falling back to the generic
   * loop where that is impossible; `"generic"` always uses the one generic
   * loop (same results, slower; for comparison and debugging).
   */
  dispatch?: "specialized" | "generic";
  /**
   * Deepest nesting of VM function calls within one call from the user
   * (calls parked on a Promise count for their own call only). Default 1000.
   */
  maxCallDepth?: number;
  /**
   * Register slots the frames of one call from the user may hold together
   * (a frame has a slot per register and per distinct operand of its
   * function): bounds the memory of deep recursion through functions with
   * large register files. Default 2^24 (128 MiB of slots).
   */
  maxStackSlots?: number;
  /**
   * Milliseconds a call runs before it yields to the event loop, and then
   * again after each yield: the loops of the VM are synchronous, so without
   * it a program that loops lets no timer, I/O or `abort` event of the
   * process run until it returns, and an `AbortSignal` aborted by a timer
   * (or a request that closed) could not stop it. A call checks at its
   * backward jumps and VM function calls, so an abort from any event lands
   * within about this interval (twice it in recursion without a loop, which
   * yields at calls; plus the instruction that runs: one kernel is not
   * interrupted). Each yield waits one macrotask: `setTimeout(0)` in
   * Deno, Node and Bun (the timers' granularity: a millisecond or two, which
   * is what yielding costs a long call; see docs/security.md),
   * a `MessageChannel` message in browsers. A call that returns sooner never
   * yields, and one that yielded gives the same results and spends the same
   * fuel. `0` or `Infinity`: never yield (a looping call then holds the
   * process until its fuel or timeout stops it). Default 20.
   *
   * @example
   * ```ts
   * import { ExecBuilder, VirtualMachine, VMError } from "@relaxvm/relaxvm";
   * import { assertRejects } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("spin", { num_inputs: 1 }, () => {
   *   ib.emit_goto(1);
   *   ib.emit_goto(-1);
   *   ib.emit_ret(ib.r(0));
   * });
   * const vm = new VirtualMachine(ib.get(), undefined, { yieldIntervalMs: 10 });
   * const controller = new AbortController();
   * setTimeout(() => controller.abort(), 20); // runs: the loop yields
   * await assertRejects(() => vm.with({ signal: controller.signal }).invoke("spin", 0), VMError, "Aborted");
   * ```
   */
  yieldIntervalMs?: number;
  /**
   * Bytes of device memory the VM may hold at once, on all its devices
   * together: live tensors and storages, and blocks its pools keep for reuse
   * (which it gives back before refusing a request). A request past it fails
   * with a `VMError` naming the request and the limit, before any memory is
   * touched. Default 1 GiB.
   */
  maxMemoryBytes?: number;
  /**
   * Packed functions of this VM alone, found before the process-wide
   * registry: what TVM keeps in an executable's imported library, such as
   * the compiled kernels of one model (`loadTVMPackage` passes its host
   * functions here). Two VMs may each call their own `add`.
   */
  functions?: ReadonlyMap<string, PackedFunc> | Readonly<Record<string, PackedFunc>>;
  /**
   * The tensor cache the VM's programs read and write
   * (`vm.builtin.tensor_cache.*`, `param_*_from_cache`). Default: the VM's
   * own, empty at first and cleared when the VM is disposed, so programs of
   * different VMs (tenants) never see each other's weights. Pass one
   * `TensorCache` to several VMs to share it on purpose, or
   * `TensorCache.host` for the process-wide one. Tensors a VM's programs load
   * count against that VM's `maxMemoryBytes`.
   */
  tensorCache?: TensorCache;
  /**
   * What the VM's programs may read with `vm.builtin.tensor_cache.load`:
   * directories (paths or `file:` URLs) and URL prefixes, each granting
   * itself and what is under it, opaque URLs (`blob:`, `data:`) granting
   * exactly themselves, and loader functions (`TensorCacheLoader`) granting
   * what they serve. Default: nothing, so a program names no file or URL
   * the host did not grant: a load of anything else fails with a `VMError`
   * naming the location as the program wrote it and nothing about it. An
   * index's shards must lie under the root that granted the index.
   *
   * ```ts ignore
   * new VirtualMachine(ex, cpu(), { tensorCacheRoots: ["./weights/"] });
   * ```
   */
  tensorCacheRoots?: readonly TensorCacheRoot[];
}

/** The memory a VM may hold by default (`maxMemoryBytes`): 1 GiB. */
export const DEFAULT_MAX_MEMORY_BYTES = 2 ** 30;

/**
 * A VM seen through per-call limits, made by `vm.with(limits)`: the same
 * calls as the VM, each one under those limits.
 */
export interface LimitedVirtualMachine {
  /** `vm.invoke(name, ...args)` under the limits. */
  invoke<T = unknown>(name: string, ...args: unknown[]): Promise<T>;
  /** `vm.invokeTensor(name, ...args)` under the limits. */
  invokeTensor(name: string, ...args: unknown[]): Promise<NDArray>;
  /** `vm.get(name)` under the limits. */
  get<T = unknown>(name: string): (...args: unknown[]) => Promise<T>;
  /** `vm.invoke_closure(closure, ...args)` under the limits. */
  invoke_closure<T = unknown>(closure: unknown, ...args: unknown[]): Promise<T>;
}

/** How one VM function of a loaded executable runs (`loadReport`). */
export interface FunctionLoadReport {
  /** The function's name. */
  readonly name: string;
  /** Its instructions. */
  readonly instructions: number;
  /** Its code words. */
  readonly words: number;
  /**
   * `"compiled"` (compiled mode), `"specialized"` (specialized dispatch) or
   * `"generic"` (the generic loop): the form a call without an instrument
   * starts in. In compiled mode a function that could not be compiled shows
   * `"generic"` until its first call writes its specialized loop.
   */
  readonly runsAs: "compiled" | "specialized" | "generic";
  /** Characters of JavaScript generated for it at load (all forms together). */
  readonly sourceLength: number;
}

/** Options of `time_evaluator`. */
export interface TimeEvaluatorOptions {
  /** Runs per measurement (the time is their mean). Default 1. */
  number?: number;
  /** Measurements. Default 1. */
  repeat?: number;
}

/** What a `time_evaluator` function resolves to; times in milliseconds per run. */
export interface TimingResult {
  /** Mean of the per-repeat times. */
  mean: number;
  /** Median of the per-repeat times. */
  median: number;
  /** Fastest repeat. */
  min: number;
  /** Slowest repeat. */
  max: number;
  /** One entry per repeat. */
  results: number[];
}

/** `VirtualMachineOptions.functions` as a map, each entry checked to be a function. */
export function ownFunctions(
  functions: VirtualMachineOptions["functions"],
): ReadonlyMap<string, PackedFunc> {
  if (functions === undefined) return new Map();
  const entries = functions instanceof Map
    ? [...functions.entries()]
    : Object.entries(functions as Readonly<Record<string, PackedFunc>>);
  for (const [name, f] of entries) {
    if (typeof f !== "function") {
      throw new TypeError(`functions: "${printable(name)}" must be a function, got ${typeof f}`);
    }
  }
  return new Map(entries);
}

/**
 * How a VM runs code (`VirtualMachineOptions.execution`): `"compiled"`
 * (default), `"specialized"` or `"generic"`.
 */
export type Execution = "compiled" | "specialized" | "generic";

/** The execution form in the terms of the interpreter: the mode, and the loop a frame runs on. */
export interface ExecutionForm {
  readonly mode: "interpret" | "compiled";
  readonly dispatch: "specialized" | "generic";
}

/** The default execution form, chosen on `bench/dispatch_bench.ts` (see `execution`). */
export const DEFAULT_EXECUTION: Execution = "compiled";

const FORMS: Readonly<Record<Execution, ExecutionForm>> = {
  compiled: { mode: "compiled", dispatch: "specialized" },
  specialized: { mode: "interpret", dispatch: "specialized" },
  generic: { mode: "interpret", dispatch: "generic" },
};

/**
 * The execution form `options` ask for: `execution`, or the deprecated
 * `mode` and `dispatch` with their old defaults, or the default. A
 * `TypeError` for an unknown name, or for `execution` given with either of
 * the options it replaces.
 */
export function executionForm(options: VirtualMachineOptions): ExecutionForm {
  const { execution, mode, dispatch } = options;
  if (execution !== undefined) {
    if (mode !== undefined || dispatch !== undefined) {
      throw new TypeError(
        "execution replaces the deprecated mode and dispatch options: give execution alone",
      );
    }
    if (!Object.hasOwn(FORMS, execution)) {
      throw new TypeError(
        `Unknown execution "${
          printable(String(execution))
        }": use "compiled", "specialized" or "generic"`,
      );
    }
    return FORMS[execution];
  }
  if (mode === undefined && dispatch === undefined) return FORMS[DEFAULT_EXECUTION];
  const m = mode ?? "interpret", d = dispatch ?? "specialized";
  if (m !== "interpret" && m !== "compiled") {
    throw new TypeError(`Unknown mode "${m}": use "interpret" or "compiled"`);
  }
  if (d !== "specialized" && d !== "generic") {
    throw new TypeError(`Unknown dispatch "${d}": use "specialized" or "generic"`);
  }
  return { mode: m, dispatch: d };
}

/** `VirtualMachineOptions` checked, with their defaults filled in (`checkedOptions`). */
export interface CheckedOptions extends ExecutionForm {
  readonly allocator: AllocatorKind;
  readonly maxMemoryBytes: number;
  readonly limits: ResolvedLimits;
  readonly moveInputs: boolean;
  readonly own: ReadonlyMap<string, PackedFunc>;
  readonly tensorCache: TensorCache | null;
  readonly roots: readonly TensorCacheRoot[];
}

/**
 * The options a `VirtualMachine` is made with, checked before it holds anything: a
 * `TypeError` (a `RangeError` for a number out of range) for the first wrong one.
 */
export function checkedOptions(options: VirtualMachineOptions): CheckedOptions {
  const allocator = options.allocator ?? "pooled";
  if (allocator !== "pooled" && allocator !== "naive") {
    throw new TypeError(`Unknown allocator "${allocator}": use "pooled" or "naive"`);
  }
  const { mode, dispatch } = executionForm(options);
  const maxMemoryBytes = options.maxMemoryBytes ?? DEFAULT_MAX_MEMORY_BYTES;
  if (!(typeof maxMemoryBytes === "number" && maxMemoryBytes >= 0)) {
    throw new RangeError(
      `maxMemoryBytes must be a non-negative number of bytes, got ${String(maxMemoryBytes)}`,
    );
  }
  const limits = resolveLimits(options, {
    ...NO_LIMITS,
    maxCallDepth: checkCount("maxCallDepth", options.maxCallDepth ?? DEFAULT_MAX_CALL_DEPTH),
    maxStackSlots: checkCount("maxStackSlots", options.maxStackSlots ?? DEFAULT_MAX_STACK_SLOTS),
    yieldIntervalMs: checkYieldInterval(options.yieldIntervalMs ?? DEFAULT_YIELD_INTERVAL_MS),
  });
  const moveInputs = options.moveInputs ?? true;
  if (typeof moveInputs !== "boolean") {
    throw new TypeError(`moveInputs must be true or false, got ${String(moveInputs)}`);
  }
  const own = ownFunctions(options.functions);
  const tensorCache = options.tensorCache ?? null;
  if (tensorCache !== null && !(tensorCache instanceof TensorCache)) {
    throw new TypeError("tensorCache must be a TensorCache");
  }
  const roots = options.tensorCacheRoots ?? [];
  if (
    !Array.isArray(roots) ||
    !roots.every((r) => typeof r === "string" || r instanceof URL || typeof r === "function")
  ) {
    throw new TypeError("tensorCacheRoots must be an array of paths, URLs and loader functions");
  }
  return {
    allocator,
    mode,
    dispatch,
    maxMemoryBytes,
    limits,
    moveInputs,
    own,
    tensorCache,
    roots: Object.freeze([...roots]),
  };
}
