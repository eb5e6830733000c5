/**
 * `VirtualMachine`: loads an executable for a set of devices and runs its
 * functions (seed 002). Loading resolves every packed function by name (one
 * that is not registered fails the calls that reach it, with a `VMError`
 * naming it, and leaves the other functions runnable), moves tensor
 * constants to the VM's first device once, computes liveness, decodes the code for the loop
 * in vm/interpreter.ts and writes out the specialized (vm/specialized_dispatch.ts)
 * or compiled (vm/compiled_mode.ts) form of each function. Loading takes
 * time linear in the code (about 20 to 40 ms per 10,000 instructions once V8
 * has warmed up; bench/construction_bench.ts).
 *
 * @module
 */

import { activateAllocators, activeAllocators } from "../devices/allocation_context.ts";
import type { AllocatorKind, MemoryStats } from "../devices/allocator.ts";
import { cpu } from "../devices/cpu_device.ts";
import type { Device } from "../devices/device.ts";
import { MemoryScope } from "../devices/memory_scope.ts";
import { NDArray } from "../devices/ndarray.ts";
import { TensorCache, type TensorCacheRoot } from "../devices/tensor_cache.ts";
import { Closure } from "../ground/closure.ts";
import { VMError } from "../ground/errors.ts";
import {
  exportValue,
  isVMObject,
  releaseIfUnowned,
  releaseValue,
  retainValue,
} from "../ground/object.ts";
import { ShapeTuple } from "../ground/shape_tuple.ts";
import { Tuple } from "../ground/tuple.ts";
import { formatBytes, INSPECT } from "../ground/inspect.ts";
import { printable } from "../ground/printable.ts";
import { getGlobalFunc, listGlobalFuncNames, type PackedFunc } from "../ground/registry.ts";
import { suggestName } from "../ground/suggest.ts";
import { InstructionCursor } from "../program/decoder.ts";
import type { Executable } from "../program/executable.ts";
import type { ProgramData } from "../program/program_data.ts";
import { formalize } from "../program/formalize.ts";
import { Opcode } from "../program/bytecode.ts";
import { computeReleases } from "../program/liveness.ts";
import {
  checkArgumentsLive,
  type Instrument,
  Interpreter,
  NO_LIMITS,
  reasonOf,
} from "./interpreter.ts";
import {
  type CallLimits,
  checkCount,
  DEFAULT_MAX_CALL_DEPTH,
  DEFAULT_MAX_STACK_SLOTS,
  type ResolvedLimits,
  resolveLimits,
} from "./invocation.ts";
import { copyToDevice, type PlacedInputs, placeInputs } from "./input_placement.ts";
import { loadFunction, type OperandResolver } from "./loaded_function.ts";
import { Profiler } from "./profiler.ts";
import type { ProfileReport } from "./profile_report.ts";

/**
 * Options of `new VirtualMachine`. Besides how the VM runs code, they set
 * the limits every call gets (see the README's "Security model"): the
 * defaults of `fuel`, `timeoutMs` and `signal` (`CallLimits`, which
 * `vm.with(...)` overrides per call), how deep and how large one call's stack
 * may grow, and how much memory the VM may hold.
 */
export interface VirtualMachineOptions extends CallLimits {
  /** `"pooled"` (default): reuse freed blocks; `"naive"`: allocate and free each time. */
  allocator?: AllocatorKind;
  /**
   * `"interpret"` (default): run functions on the interpreter.
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

/** The most runs or measurements `time_evaluator` takes: 2^31 - 1. */
const MAX_TIMED_RUNS = 2 ** 31 - 1;

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

let interpreterOf: (vm: VirtualMachine) => Interpreter;

/**
 * How each VM function of `vm` runs and how much source was generated for
 * it. For tests and benchmarks; not part of the public API.
 */
export function loadReport(vm: VirtualMachine): FunctionLoadReport[] {
  const out: FunctionLoadReport[] = [];
  for (const fn of interpreterOf(vm).functions) {
    if (fn === undefined) continue;
    out.push({
      name: fn.info.name,
      instructions: fn.code.length,
      words: fn.words,
      runsAs: fn.compiled !== null
        ? "compiled"
        : fn.specialized !== null
        ? "specialized"
        : "generic",
      sourceLength: fn.sourceLength,
    });
  }
  return out;
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

/**
 * Runs an executable's functions.
 *
 * @example
 * ```ts
 * import { cpu, ExecBuilder, tensor, VirtualMachine, type NDArray } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("func1", { num_inputs: 2 }, () => {
 *   ib.emit_call("vm.op.multiply", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
 *   ib.emit_ret(ib.r(2));
 * });
 * const vm = new VirtualMachine(ib.get(), cpu());
 * using out = await vm.get("func1")(tensor([1, 2]), tensor([3, 4])) as NDArray;
 * assertEquals([...out.dataSync()], [3, 8]);
 * ```
 *
 * @example Compiled mode: each VM function becomes one JavaScript function
 * ```ts
 * import { ExecBuilder, registerFunc, VirtualMachine } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * registerFunc("demo.add", (a: number, b: number) => a + b, { override: true });
 * registerFunc("demo.lt", (a: number, b: number) => a < b, { override: true });
 * const ib = new ExecBuilder();
 * ib.function("sum_to", { num_inputs: 1 }, () => {
 *   ib.emit_call("demo.add", [ib.imm(0), ib.imm(0)], { dst: ib.r(1) }); // total
 *   ib.emit_call("demo.add", [ib.imm(0), ib.imm(0)], { dst: ib.r(2) }); // i
 *   ib.emit_call("demo.lt", [ib.r(2), ib.r(0)], { dst: ib.r(3) }); // loop: i < n?
 *   ib.emit_if(ib.r(3), 4);
 *   ib.emit_call("demo.add", [ib.r(1), ib.r(2)], { dst: ib.r(1) });
 *   ib.emit_call("demo.add", [ib.r(2), ib.imm(1)], { dst: ib.r(2) });
 *   ib.emit_goto(-4);
 *   ib.emit_ret(ib.r(1));
 * });
 * const vm = new VirtualMachine(ib.get(), undefined, { mode: "compiled" });
 * assertEquals(await vm.invoke("sum_to", 100), 4950);
 * ```
 *
 * @example Limits for code you did not write: fuel, time, cancellation
 * ```ts
 * import { ExecBuilder, VirtualMachine, VMError } from "@relaxvm/relaxvm";
 * import { assertEquals, assertRejects } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("spin", { num_inputs: 1 }, () => {
 *   ib.emit_call("vm.builtin.copy", [ib.r(0)], { dst: ib.r(1) });
 *   ib.emit_goto(-1); // forever
 *   ib.emit_ret(ib.r(1));
 * });
 * ib.function("id", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
 * // Defaults for every call, and a memory limit for the whole VM.
 * const vm = new VirtualMachine(ib.get(), undefined, { timeoutMs: 1000, maxMemoryBytes: 2 ** 26 });
 * // Tighter limits for one call: fuel counts instructions on backward jumps and calls.
 * await assertRejects(() => vm.with({ fuel: 1e6 }).invoke("spin", 1), VMError, "Out of fuel");
 * const controller = new AbortController();
 * controller.abort();
 * await assertRejects(() => vm.with({ signal: controller.signal }).invoke("spin", 1), VMError, "Aborted");
 * assertEquals(await vm.invoke("id", 7), 7); // the VM is fine afterwards
 * ```
 */
export class VirtualMachine {
  /** The executable being run. */
  readonly executable: Executable;
  /** The devices; the first is the default. */
  readonly devices: readonly Device[];
  readonly #state: MemoryScope;
  readonly #interp: Interpreter;
  /** The limits of a call that gives none. */
  readonly #limits: ResolvedLimits;
  readonly #constants: unknown[];
  readonly #functionRefs = new Map<number, Closure>();
  readonly #saved = new Map<
    string,
    { name: string; args: readonly unknown[]; placed: PlacedInputs | null }
  >();
  readonly #inputs = new Map<string, { args: readonly unknown[]; placed: PlacedInputs | null }>();
  /** Where CPU tensor arguments are copied (`moveInputs`), or null: nowhere. */
  readonly #inputTarget: Device | null;
  /** The program the interpreter runs: the executable, or its dense renumbering. */
  readonly #program: ProgramData;
  /** How the VM runs code (its options). */
  readonly #mode: "interpret" | "compiled";
  /** This VM's own packed functions (`functions`), looked up before the registry. */
  readonly #ownFunctions: ReadonlyMap<string, PackedFunc>;
  readonly #dispatch: "specialized" | "generic";
  readonly #outputs = new Map<string, unknown>();
  #disposed = false;
  /** Calls from the user that have not settled yet: `dispose()` frees after the last. */
  #running = 0;
  /** Packed functions the executable names that were not registered when the VM loaded it. */
  readonly #unregistered: string[] = [];

  static {
    interpreterOf = (vm) => vm.#interp;
  }

  /** Loads `ex` for `devices` (default `cpu()`). */
  constructor(
    ex: Executable,
    devices: Device | Device[] = cpu(),
    options: VirtualMachineOptions = {},
  ) {
    const list = Array.isArray(devices) ? [...devices] : [devices];
    if (list.length === 0) throw new TypeError("VirtualMachine needs at least one device");
    const allocator = options.allocator ?? "pooled";
    if (allocator !== "pooled" && allocator !== "naive") {
      throw new TypeError(`Unknown allocator "${allocator}": use "pooled" or "naive"`);
    }
    const mode = options.mode ?? "interpret";
    if (mode !== "interpret" && mode !== "compiled") {
      throw new TypeError(`Unknown mode "${mode}": use "interpret" or "compiled"`);
    }
    const dispatch = options.dispatch ?? "specialized";
    if (dispatch !== "specialized" && dispatch !== "generic") {
      throw new TypeError(`Unknown dispatch "${dispatch}": use "specialized" or "generic"`);
    }
    const maxMemoryBytes = options.maxMemoryBytes ?? DEFAULT_MAX_MEMORY_BYTES;
    if (!(typeof maxMemoryBytes === "number" && maxMemoryBytes >= 0)) {
      throw new RangeError(
        `maxMemoryBytes must be a non-negative number of bytes, got ${String(maxMemoryBytes)}`,
      );
    }
    this.#limits = resolveLimits(options, {
      ...NO_LIMITS,
      maxCallDepth: checkCount("maxCallDepth", options.maxCallDepth ?? DEFAULT_MAX_CALL_DEPTH),
      maxStackSlots: checkCount(
        "maxStackSlots",
        options.maxStackSlots ?? DEFAULT_MAX_STACK_SLOTS,
      ),
    });
    if (ex.disposed) {
      throw new VMError(
        { functionName: "", pc: -1, instruction: "", packedFunc: "" },
        "Cannot run a disposed executable: its constants are released",
      );
    }
    const moveInputs = options.moveInputs ?? true;
    if (typeof moveInputs !== "boolean") {
      throw new TypeError(`moveInputs must be true or false, got ${String(moveInputs)}`);
    }
    this.#ownFunctions = ownFunctions(options.functions);
    this.executable = ex;
    this.devices = Object.freeze(list);
    this.#inputTarget = moveInputs && list[0].kind !== "cpu" ? list[0] : null;
    this.#mode = mode;
    this.#dispatch = dispatch;
    const tensorCache = options.tensorCache ?? null;
    if (tensorCache !== null && !(tensorCache instanceof TensorCache)) {
      throw new TypeError("tensorCache must be a TensorCache");
    }
    const roots = options.tensorCacheRoots ?? [];
    if (
      !Array.isArray(roots) ||
      !roots.every((r) => typeof r === "string" || r instanceof URL || typeof r === "function")
    ) {
      throw new TypeError(
        "tensorCacheRoots must be an array of paths, URLs and loader functions",
      );
    }
    this.#state = new MemoryScope(this.devices, allocator, maxMemoryBytes, tensorCache);
    this.#state.tensorCacheRoots = Object.freeze([...roots]);
    // A file may name a high register once (r(2^24 - 1)) and so ask for a register file far
    // larger than its code: every call would copy it, and liveness would scan it per block.
    // The VM runs such a program renumbered densely (as the builder always does).
    // The renumbered copy holds the constants too; the VM reads them from `ex`, so it lets go.
    const run = sparseRegisters(ex) ? formalize(ex) : ex;
    if (run !== ex) run.dispose();
    this.#program = run;
    this.#interp = new Interpreter(run, this.#state);
    this.#interp.limits = this.#limits;
    const interp = this.#interp;
    this.#state.callSignal = () => interp.currentCallSignal();
    // Between instructions the clock is read on backward jumps and calls only; a large kernel
    // reads it too, before its output is allocated, so straight-line heavy code stops in time.
    this.#state.limit.onLargeBlock = () => interp.checkNow();
    for (const f of ex.functions) {
      if (f.kind === "packed" && this.#packedFunc(f.name) === undefined) {
        this.#unregistered.push(f.name);
      }
    }
    this.#constants = this.#placeConstants();
    const resolver: OperandResolver = {
      constant: (i) => this.#constants[i],
      functionRef: (i) => this.#functionRef(i),
      callee: (i) => this.#callee(i),
      vmState: () => this.#state,
    };
    run.functions.forEach((f, i) => {
      if (f.kind !== "vm") return;
      const releases = run.liveness ? computeReleases(run, f) : null;
      this.#interp.functions[i] = loadFunction(run, f, resolver, releases);
    });
    if (mode === "compiled") {
      this.#interp.compileAll();
      // The interpreter runs a compiled function only after a call in it parked (or when it
      // could not be compiled): its specialized loop is written then, not at load.
      if (dispatch === "specialized") this.#interp.specializeOnDemand();
    } else if (dispatch === "specialized") {
      this.#interp.specializeAll();
    }
  }

  /**
   * Tensor constants move to the first device once, here; the VM holds them
   * for its lifetime. Every tensor constant is pinned: it belongs to the
   * executable (or, moved, to this VM), so a program cannot `kill` it.
   */
  #placeConstants(): unknown[] {
    const target = this.devices[0];
    const previous = activateAllocators(this.#state);
    try {
      return this.executable.constants.map((c) => {
        // An Int constant reaches builtins as a number when that is exact, else as a bigint.
        if (typeof c === "bigint") return Number.isSafeInteger(Number(c)) ? Number(c) : c;
        if (isVMObject(c)) c.pin();
        if (!(c instanceof NDArray) || c.device === target) {
          retainValue(c);
          return c;
        }
        return copyToDevice(c, target).pin().retain();
      });
    } catch (e) {
      throw new VMError(
        { functionName: "", pc: -1, instruction: "", packedFunc: "" },
        `Cannot place the executable's constants on ${target}: ${reasonOf(e)}`,
        { cause: e },
      );
    } finally {
      activateAllocators(previous);
    }
  }

  #functionRef(index: number): Closure {
    let ref = this.#functionRefs.get(index);
    if (ref === undefined) {
      const f = this.executable.functions[index];
      ref = f.kind === "vm"
        ? new Closure(f.name, this.#guardedCallee(index), [], this)
        : new Closure(f.name, this.#callee(index));
      ref.retain();
      this.#functionRefs.set(index, ref);
    }
    return ref;
  }

  #callee(index: number): (...args: unknown[]) => unknown {
    const f = this.executable.functions[index];
    if (f.kind === "packed") return this.#packedFunc(f.name) ?? this.#unregisteredCallee(f.name);
    const interp = this.#interp;
    return (...args: unknown[]) => interp.call(index, args);
  }

  /** The packed function `name`: this VM's own, else the registry's. */
  #packedFunc(name: string): PackedFunc | undefined {
    return this.#ownFunctions.get(name) ?? getGlobalFunc(name);
  }

  /**
   * What a closure of VM function `index` calls: the function, in this VM,
   * unless the VM was disposed or another VM is running (a closure handed
   * from one VM's results to another's program): its call would run under
   * this VM's limits, outside the running call's fuel, clock and signal, so
   * it is refused. A closure runs in the VM that made it
   * (`vm.invoke_closure`, or a program of that VM).
   */
  #guardedCallee(index: number): (...args: unknown[]) => unknown {
    const interp = this.#interp, state = this.#state;
    return (...args: unknown[]) => {
      if (this.#disposed) throw this.#disposedError(index);
      const active = activeAllocators();
      if (active !== null && active !== state) {
        throw new ReferenceError(
          `Closure(${
            printable(this.executable.functions[index].name)
          }) belongs to another VM: a closure runs only in the VM that made it, under that VM's limits`,
        );
      }
      return interp.callClosure(index, args);
    };
  }

  /**
   * What a call of a packed function that was not registered at load runs:
   * the function, if it has been registered since (looked up until found),
   * else a `ReferenceError` that the dispatch loop turns into a `VMError`
   * naming the VM function, instruction and packed function. So an unknown
   * name fails the calls that reach it, in every dispatch form alike, and
   * the executable's other functions run.
   */
  #unregisteredCallee(name: string): (...args: unknown[]) => unknown {
    let found: PackedFunc | undefined;
    return (...args: unknown[]) => {
      found ??= getGlobalFunc(name);
      if (found === undefined) throw new ReferenceError(this.#unknownFunctionReason(name));
      return found(...args);
    };
  }

  /**
   * `Unknown packed function "vm.op.reluu" (did you mean "vm.op.relu"?): …`,
   * listing every other packed function of the executable that is still not
   * registered, so one run finds them all.
   */
  #unknownFunctionReason(name: string): string {
    const quote = (n: string) => `"${printable(n)}"`;
    const guess = suggestName(name, listGlobalFuncNames());
    let reason = `Unknown packed function ${quote(name)}${
      guess === undefined ? "" : ` (did you mean ${quote(guess)}?)`
    }: register it with registerFunc`;
    const others = this.#unregistered.filter((n) =>
      n !== name && this.#packedFunc(n) === undefined
    );
    if (others.length > 0) {
      const shown = others.slice(0, 10).map(quote).join(", ");
      const more = others.length > 10 ? ` and ${others.length - 10} more` : "";
      reason += `; this executable also calls ${shown}${more}, not registered either`;
    }
    return reason;
  }

  #vmFunctionIndex(name: string): number {
    const index = this.executable.functionIndex(name);
    if (index < 0 || this.executable.functions[index].kind !== "vm") {
      throw new VMError(
        { functionName: "", pc: -1, instruction: "", packedFunc: "" },
        `No VM function named "${printable(name)}" (have: ${
          this.executable.function_names.map(printable).join(", ") || "none"
        })`,
      );
    }
    return index;
  }

  /** Throws a VMError unless `name` is a VM function taking `args.length` arguments. */
  #checkArguments(name: string, args: readonly unknown[]): void {
    const want = this.executable.functions[this.#vmFunctionIndex(name)].numArgs;
    if (args.length !== want) {
      throw new VMError(
        { functionName: name, pc: -1, instruction: "", packedFunc: "" },
        `@${name} takes ${want} argument${want === 1 ? "" : "s"}, got ${args.length}`,
      );
    }
  }

  /** Submits queued device work (the end of a VM call). */
  #flush(): void {
    const devices = this.devices;
    for (let i = 0; i < devices.length; i++) devices[i].flush();
  }

  /** Throws a `VMError` naming `what` once the VM is disposed. */
  #checkOpen(what: string): void {
    if (this.#disposed) {
      throw new VMError(
        { functionName: "", pc: -1, instruction: "", packedFunc: "" },
        `${what}: the VM was disposed`,
      );
    }
  }

  /** A call of function `name` (or index) from the user begins; refused once the VM is disposed. */
  #callStarts(name: string | number): void {
    if (this.#disposed) throw this.#disposedError(name);
    this.#running++;
  }

  /** What a call of `name` (or index) gets once the VM is disposed. */
  #disposedError(name: string | number): VMError {
    const what = typeof name === "number" ? this.executable.functions[name].name : name;
    return new VMError(
      { functionName: what, pc: -1, instruction: "", packedFunc: "" },
      `@${printable(what)}: the VM was disposed`,
    );
  }

  /** A call from the user ended: device work is submitted, and a disposed VM freed after the last. */
  #callEnds(): void {
    this.#flush();
    if (--this.#running === 0 && this.#disposed) this.#free();
  }

  /** True once `dispose()` was called: calls are refused from then on. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * Lets go of everything the VM holds: its references to the executable's
   * constants (and the copies it placed on its device), the arguments of
   * `save_function` and `set_input`, the outputs of `invoke_stateful`, and
   * the blocks its allocators keep pooled. Later calls are a `VMError`.
   * Calls still running finish first: the VM frees when the last settles.
   * Results already handed out stay valid and stay the caller's to dispose.
   * A VM dropped without `dispose()` is freed by the garbage collector, later.
   * Calling it twice is harmless.
   *
   * @example
   * ```ts
   * import { ExecBuilder, tensor, VirtualMachine, VMError } from "@relaxvm/relaxvm";
   * import { assertEquals, assertRejects } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("double", { num_inputs: 1 }, () => {
   *   ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
   *   ib.emit_ret(ib.r(1));
   * });
   * const vm = new VirtualMachine(ib.get());
   * using x = tensor([1, 2]);
   * using y = await vm.invoke("double", x) as ReturnType<typeof tensor>;
   * vm.dispose();
   * assertEquals([...y.dataSync()], [2, 4]); // still the caller's
   * await assertRejects(() => vm.invoke("double", x), VMError, "disposed");
   * ```
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    if (this.#running === 0) this.#free();
  }

  /** `using vm = new VirtualMachine(ex)` disposes at the end of the scope. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  #free(): void {
    for (const c of this.#constants.splice(0)) releaseValue(c);
    for (const held of [...this.#saved.values(), ...this.#inputs.values()]) {
      for (const a of held.args) releaseValue(a);
      held.placed?.finish();
    }
    this.#saved.clear();
    this.#inputs.clear();
    for (const out of this.#outputs.values()) releaseValue(out);
    this.#outputs.clear();
    this.#state.clearOwnTensorCache();
    for (const a of this.#state.allocators()) a.close();
  }

  /**
   * `args` with their CPU tensors copied to the VM's first device
   * (`moveInputs`; vm/input_placement.ts), or null when nothing moves. A
   * copy that cannot be made (the memory limit) is a `VMError` naming the
   * function.
   */
  #place(name: string, args: readonly unknown[], holdAll: boolean): PlacedInputs | null {
    const target = this.#inputTarget;
    if (target === null || args.length === 0) return null;
    try {
      return placeInputs(args, target, this.#state, holdAll);
    } catch (e) {
      throw new VMError(
        { functionName: name, pc: -1, instruction: "", packedFunc: "" },
        `Cannot move the arguments of @${printable(name)} to ${target}: ${reasonOf(e)}`,
        { cause: e },
      );
    }
  }

  /** `#callExported` after moving CPU tensor arguments to the VM's device (`moveInputs`). */
  #callPlaced(index: number, args: readonly unknown[], limits: ResolvedLimits): Promise<unknown> {
    if (this.#inputTarget === null) return this.#callExported(index, args, limits);
    let placed: PlacedInputs | null;
    try {
      placed = this.#place(this.executable.functions[index].name, args, false);
    } catch (e) {
      return Promise.reject(e);
    }
    if (placed === null) return this.#callExported(index, args, limits);
    // Settles after the result was handed out: copies it holds belong to the caller then.
    return this.#callExported(index, placed.args, limits).finally(() => placed.finish());
  }

  /**
   * Runs function `index` for the user under `limits`: the result is
   * exported (the user holds it) and device work is submitted. Not an async
   * function: a call that did not suspend settles without an extra await
   * (about 100 ns per invocation), and one that did is chained on its Promise.
   */
  #callExported(index: number, args: readonly unknown[], limits: ResolvedLimits): Promise<unknown> {
    let out: unknown;
    try {
      this.#callStarts(index);
    } catch (e) {
      return Promise.reject(e);
    }
    try {
      out = this.#interp.invoke(limits, index, args);
    } catch (e) {
      this.#callEnds();
      return Promise.reject(e);
    }
    if (out instanceof Promise) {
      return out.then(
        (v) => {
          try {
            return this.#export(index, v);
          } finally {
            this.#callEnds();
          }
        },
        (e) => {
          this.#callEnds();
          throw e;
        },
      );
    }
    try {
      return Promise.resolve(this.#export(index, out));
    } catch (e) {
      return Promise.reject(e);
    } finally {
      this.#callEnds();
    }
  }

  /**
   * Hands a result to the user. A result that holds a freed object (the
   * program killed it, then returned it) or nests too deeply is a `VMError`,
   * and what it holds is released: handing out part of it would leave the
   * rest held forever.
   */
  #export(index: number | string, v: unknown): unknown {
    if (typeof v !== "object" || v === null) return v;
    const problem = resultProblem(v);
    if (problem !== null) {
      const name = typeof index === "string" ? index : this.executable.functions[index].name;
      releaseIfUnowned(v);
      throw new VMError(
        { functionName: name, pc: -1, instruction: "", packedFunc: "" },
        `@${name} returned ${problem}`,
      );
    }
    return exportValue(v);
  }

  #invoke(name: string, args: unknown[], limits: ResolvedLimits): Promise<unknown> {
    if (this.#disposed) return Promise.reject(this.#disposedError(name));
    try {
      const saved = this.#saved.get(name);
      if (saved !== undefined && args.length === 0) {
        return this.#callExported(this.#vmFunctionIndex(saved.name), saved.args, limits);
      }
      return this.#callPlaced(this.#vmFunctionIndex(name), args, limits);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Runs VM function `name` (or a function saved with `save_function`) and
   * resolves to its result. Tensors in the result belong to the caller.
   *
   * The type parameter only states what the caller expects the result to
   * be (a program's result type is not known to TypeScript); it checks
   * nothing. For a tensor, `invokeTensor` checks.
   *
   * @example
   * ```ts
   * import { ExecBuilder, registerFunc, VirtualMachine } from "@relaxvm/relaxvm";
   * import { assertEquals } from "@std/assert";
   *
   * registerFunc("doc.invoke.pair", (a: number) => [a, 2 * a], { override: true });
   * const ib = new ExecBuilder();
   * ib.function("pair", { num_inputs: 1 }, () => {
   *   ib.emit_call("doc.invoke.pair", [ib.r(0)], { dst: ib.r(1) });
   *   ib.emit_ret(ib.r(1));
   * });
   * const vm = new VirtualMachine(ib.get());
   * const [a, b] = await vm.invoke<[number, number]>("pair", 21);
   * assertEquals(a + b, 63);
   * ```
   */
  invoke<T = unknown>(name: string, ...args: unknown[]): Promise<T> {
    return this.#invoke(name, args, this.#limits) as Promise<T>;
  }

  /**
   * `invoke` for a function that returns a tensor: resolves to the
   * `NDArray`, typed, or rejects with a `VMError` saying what the function
   * returned instead (and releases that value).
   *
   * @example
   * ```ts
   * import { ExecBuilder, tensor, VirtualMachine, VMError } from "@relaxvm/relaxvm";
   * import { assertEquals, assertRejects } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("double", { num_inputs: 1 }, () => {
   *   ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
   *   ib.emit_ret(ib.r(1));
   * });
   * ib.function("shape", { num_inputs: 1 }, () => {
   *   ib.emit_call("vm.builtin.shape_of", [ib.r(0)], { dst: ib.r(1) });
   *   ib.emit_ret(ib.r(1));
   * });
   * const vm = new VirtualMachine(ib.get());
   * using x = tensor([1, 2, 3]);
   * using y = await vm.invokeTensor("double", x); // an NDArray, no cast
   * assertEquals([...await y.data()], [2, 4, 6]);
   * await assertRejects(() => vm.invokeTensor("shape", x), VMError, "not a tensor");
   * ```
   */
  invokeTensor(name: string, ...args: unknown[]): Promise<NDArray> {
    return this.#invokeTensor(name, args, this.#limits);
  }

  async #invokeTensor(name: string, args: unknown[], limits: ResolvedLimits): Promise<NDArray> {
    const out = await this.#invoke(name, args, limits);
    if (out instanceof NDArray) return out;
    const what = describeResult(out);
    disposeResult(out);
    throw new VMError(
      { functionName: name, pc: -1, instruction: "", packedFunc: "" },
      `The result is ${what}, not a tensor (NDArray): call invoke() for results of other kinds`,
    );
  }

  /**
   * `vm.get("f")(a, b)` is `vm.invoke("f", a, b)` (Python: `vm["f"](a, b)`).
   * As with `invoke`, the type parameter states the expected result.
   *
   * @example
   * ```ts
   * import { ExecBuilder, VirtualMachine } from "@relaxvm/relaxvm";
   * import { assertEquals } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("id", { num_inputs: 1 }, () => ib.emit_ret(ib.r(0)));
   * const id = new VirtualMachine(ib.get()).get<string>("id");
   * assertEquals((await id("hello")).toUpperCase(), "HELLO");
   * ```
   */
  get<T = unknown>(name: string): (...args: unknown[]) => Promise<T> {
    return this.#get(name, this.#limits) as (...args: unknown[]) => Promise<T>;
  }

  #get(name: string, limits: ResolvedLimits): (...args: unknown[]) => Promise<unknown> {
    if (this.#saved.has(name)) return (...args: unknown[]) => this.#invoke(name, args, limits);
    const index = this.#vmFunctionIndex(name);
    // Resolved once; a function saved later under this name takes over, as with invoke.
    return (...args: unknown[]) =>
      this.#saved.size === 0
        ? this.#callPlaced(index, args, limits)
        : this.#invoke(name, args, limits);
  }

  /**
   * The calls of this VM (`invoke`, `get`, `invoke_closure`) under `limits`
   * instead of the VM's defaults: `fuel` (instructions, counted on backward
   * jumps and calls), `timeoutMs` and `signal` (both also stop a call waiting
   * on a Promise). A call that runs out gives a `VMError` saying which limit
   * stopped it (`Out of fuel`, `Timed out`, `Aborted`), with every frame
   * released; the VM stays usable. A signal here and one in the VM's options
   * both apply.
   *
   * @example
   * ```ts
   * import { ExecBuilder, VirtualMachine, VMError } from "@relaxvm/relaxvm";
   * import { assertRejects } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("loop", { num_inputs: 1 }, () => {
   *   ib.emit_goto(1);
   *   ib.emit_goto(-1); // back and forth forever
   *   ib.emit_ret(ib.r(0));
   * });
   * const vm = new VirtualMachine(ib.get());
   * await assertRejects(() => vm.with({ timeoutMs: 20 }).invoke("loop", 0), VMError, "Timed out");
   * ```
   */
  with(limits: CallLimits): LimitedVirtualMachine {
    const resolved = resolveLimits(limits, this.#limits);
    const shown = Object.entries(limits).filter(([, v]) => v !== undefined).map(([k, v]) =>
      k === "signal" ? "signal" : `${k}: ${String(v)}`
    );
    const limited: LimitedVirtualMachine = {
      invoke: <T>(name: string, ...args: unknown[]) =>
        this.#invoke(name, args, resolved) as Promise<T>,
      invokeTensor: (name, ...args) => this.#invokeTensor(name, args, resolved),
      get: <T>(name: string) => this.#get(name, resolved) as (...args: unknown[]) => Promise<T>,
      invoke_closure: <T>(closure: unknown, ...args: unknown[]) =>
        this.#invokeClosure(closure, args, resolved) as Promise<T>,
    };
    // Shown by console.log as the VM with its limits.
    Object.defineProperty(limited, INSPECT, {
      value: () => `${this[INSPECT]()}.with({ ${shown.join(", ")} })`,
    });
    return limited;
  }

  /**
   * Calls a closure the VM returned (from `vm.builtin.make_closure`). As with
   * `invoke`, the type parameter states the expected result.
   */
  invoke_closure<T = unknown>(closure: unknown, ...args: unknown[]): Promise<T> {
    return this.#invokeClosure(closure, args, this.#limits) as Promise<T>;
  }

  async #invokeClosure(
    closure: unknown,
    args: unknown[],
    limits: ResolvedLimits,
  ): Promise<unknown> {
    if (!(closure instanceof Closure)) {
      throw new VMError(
        { functionName: "", pc: -1, instruction: "", packedFunc: "" },
        "invoke_closure needs a Closure",
      );
    }
    if (closure.owner !== null && closure.owner !== this) {
      throw new VMError(
        { functionName: closure.name, pc: -1, instruction: "", packedFunc: "" },
        `invoke_closure: ${closure} belongs to another VM: call it through the VM that made it, whose limits, memory and tensor cache it uses`,
      );
    }
    if (closure.disposed && closure.captured.length > 0) {
      throw new VMError(
        { functionName: closure.name, pc: -1, instruction: "", packedFunc: "" },
        `invoke_closure: ${closure} was disposed; its captured values are released`,
      );
    }
    this.#callStarts(closure.name);
    let placed: PlacedInputs | null = null;
    try {
      placed = this.#place(closure.name, args, false);
      const placedArgs = placed?.args ?? args;
      return this.#export(
        closure.name,
        await this.#interp.run(limits, () => closure.call(placedArgs)),
      );
    } finally {
      this.#flush();
      placed?.finish();
      this.#callEnds();
    }
  }

  /** Binds `args` to `name` under `saved_name`: `get(saved_name)()` then runs without them. */
  save_function(name: string, saved_name: string, ...args: unknown[]): void {
    this.#checkOpen("save_function");
    this.#checkArguments(name, args);
    checkArgumentsLive(name, args);
    // Moved once, here (TVM's SaveClosure); the VM holds the copies until replaced.
    const placed = this.#place(name, args, true);
    const kept = placed?.args ?? args;
    const old = this.#saved.get(saved_name);
    for (const a of kept) retainValue(a);
    if (old !== undefined) {
      for (const a of old.args) releaseValue(a);
      old.placed?.finish();
    }
    this.#saved.set(saved_name, { name, args: kept, placed });
  }

  /** Calls `fn(func, name, before, ret, args)` before and after every `Call`; `"skip"` before skips it. `null` removes it. */
  set_instrument(fn: Instrument | null): void {
    this.#interp.instrument = fn;
  }

  /** Stores the inputs of `name` for `invoke_stateful`. */
  set_input(name: string, ...args: unknown[]): void {
    this.#checkOpen("set_input");
    this.#checkArguments(name, args);
    checkArgumentsLive(name, args);
    // Moved once, here (TVM's set_input); the VM holds the copies until replaced.
    const placed = this.#place(name, args, true);
    const kept = placed?.args ?? args;
    for (const a of kept) retainValue(a);
    const old = this.#inputs.get(name);
    if (old !== undefined) {
      for (const a of old.args) releaseValue(a);
      old.placed?.finish();
    }
    this.#inputs.set(name, { args: kept, placed });
  }

  /** Runs `name` on the inputs given to `set_input`; read the result with `get_outputs`. */
  async invoke_stateful(name: string): Promise<void> {
    if (this.#disposed) throw this.#disposedError(name);
    const args = this.#inputs.get(name)?.args;
    if (args === undefined) {
      throw new VMError(
        { functionName: name, pc: -1, instruction: "", packedFunc: "" },
        `No inputs set for "${name}": call set_input first`,
      );
    }
    let out: unknown;
    this.#callStarts(name);
    try {
      out = await this.#interp.invoke(this.#limits, this.#vmFunctionIndex(name), args);
    } finally {
      this.#callEnds();
    }
    if (this.#disposed) {
      releaseValue(out); // freed while it ran: nobody can read the output
      return;
    }
    retainValue(out);
    releaseValue(this.#outputs.get(name));
    this.#outputs.set(name, out);
  }

  /** The result of the last `invoke_stateful(name)`. */
  get_outputs(name: string): unknown {
    if (!this.#outputs.has(name)) {
      throw new VMError(
        { functionName: name, pc: -1, instruction: "", packedFunc: "" },
        `No outputs for "${name}": call invoke_stateful first`,
      );
    }
    return this.#export(name, this.#outputs.get(name));
  }

  /** Throws the VM's "Aborted" `VMError` if its default signal (option `signal`) has aborted. */
  #checkAborted(name: string): void {
    const signal = this.#limits.signal;
    if (signal?.aborted) {
      throw new VMError(
        { functionName: name, pc: -1, instruction: "", packedFunc: "" },
        "Aborted by the call's AbortSignal",
        { cause: signal.reason },
      );
    }
  }

  /**
   * An async function that times `name` over `repeat` measurements of
   * `number` runs each (integers up to 2^31 - 1). It yields to the event
   * loop about every 20 ms, outside the measured time, and stops with a
   * `VMError` when the VM's `signal` aborts; each run has the VM's limits.
   */
  time_evaluator(
    name: string,
    options: TimeEvaluatorOptions = {},
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
    const saved = this.#saved.get(name);
    const index = this.#vmFunctionIndex(saved?.name ?? name);
    return async (...given: unknown[]) => {
      if (this.#disposed) throw this.#disposedError(name);
      const savedArgs = saved !== undefined && given.length === 0;
      const results: number[] = [];
      this.#callStarts(name);
      let placed: PlacedInputs | null = null;
      try {
        // Moved once for all runs (`moveInputs`): the runs time the function, not the uploads.
        placed = savedArgs ? null : this.#place(saved?.name ?? name, given, true);
        const args = savedArgs ? saved.args : placed?.args ?? given;
        // Runs that return at once resume on microtasks, which starve timers and I/O: the loop
        // yields a macrotask about every 20 ms, and stops when the VM's signal aborts.
        let lastYield = performance.now();
        for (let r = 0; r < repeat; r++) {
          let t0 = performance.now();
          for (let n = 0; n < number; n++) {
            const out = await this.#interp.invoke(this.#limits, index, args);
            // A function may return one of its arguments, which the caller still owns.
            if (!args.includes(out)) releaseValue(out);
            this.#flush();
            const now = performance.now();
            if (now - lastYield > 20) {
              await new Promise((resolve) => setTimeout(resolve, 0));
              lastYield = performance.now();
              t0 += lastYield - now; // the pause is not the function's time
              this.#checkAborted(name);
            }
          }
          await Promise.all(this.devices.map((d) => d.synchronize()));
          results.push((performance.now() - t0) / number);
        }
      } finally {
        placed?.finish();
        this.#callEnds();
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

  /**
   * Runs `name` once with `args` and reports where the time and memory went
   * (TVM's `relax.VirtualMachine.profile`, the Relay profiler VM): every
   * `Call` it made, nested VM calls included, with its wall time, the
   * bytes it allocated from the VM's allocators (`servedBytes`,
   * `allocatedBytes` of `memory_stats()`) and, on a WebGPU device with
   * timestamp queries, the GPU time of the kernels it recorded. The result
   * of the call is released; an error is thrown as `invoke` would throw it.
   *
   * The profiled call runs on the generic loop (calls made by other
   * invocations keep their dispatch form) and pays about a microsecond per
   * `Call` for the bookkeeping, so compare calls with each other rather
   * than with unprofiled runs. A user's instrument (`set_instrument`) is
   * still called, around each timed call. Nothing of the VM's state
   * changes, also when the call fails. Arguments move to the VM's device
   * first (`moveInputs`); the report counts them apart. With no `args`, a
   * name given to `save_function` runs with its saved arguments.
   *
   * @example
   * ```ts
   * import { ExecBuilder, tensor, VirtualMachine } from "@relaxvm/relaxvm";
   * import { assertEquals } from "@std/assert";
   *
   * const ib = new ExecBuilder();
   * ib.function("layer", { num_inputs: 2 }, () => {
   *   ib.emit_call("vm.op.matmul", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
   *   ib.emit_call("vm.op.relu", [ib.r(2)], { dst: ib.r(3) });
   *   ib.emit_ret(ib.r(3));
   * });
   * ib.function("main", { num_inputs: 2 }, () => {
   *   ib.emit_call("layer", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
   *   ib.emit_call("layer", [ib.r(2), ib.r(1)], { dst: ib.r(3) });
   *   ib.emit_ret(ib.r(3));
   * });
   * const vm = new VirtualMachine(ib.get());
   * using x = tensor([[1, -2], [3, 4]]);
   * const report = await vm.profile("main", x, x);
   * const calls = Object.fromEntries(report.byFunction().map((r) => [r.name, r.calls]));
   * assertEquals(calls, { layer: 2, "vm.op.matmul": 2, "vm.op.relu": 2 });
   * console.log(report.table()); // per function and per instruction: calls, times, bytes
   * ```
   */
  async profile(name: string, ...args: unknown[]): Promise<ProfileReport> {
    const saved = this.#saved.get(name);
    const useSaved = saved !== undefined && args.length === 0;
    const fnName = useSaved ? saved.name : name;
    const index = this.#vmFunctionIndex(fnName);
    this.#callStarts(fnName);
    let placed: PlacedInputs | null;
    try {
      placed = useSaved ? null : this.#place(fnName, args, false);
    } catch (e) {
      this.#callEnds();
      throw e;
    }
    const callArgs = useSaved ? saved.args : placed?.args ?? args;
    const ex = this.executable;
    const profiler = new Profiler(this.#program, this.#state, (callee) => {
      const i = ex.functionIndex(callee);
      return i >= 0 && ex.functions[i].kind === "vm";
    });
    profiler.start(this.devices);
    const t0 = performance.now();
    let callMs = 0;
    let failure: { error: unknown } | null = null;
    try {
      const out = await this.#interp.invoke(this.#limits, index, callArgs, profiler);
      callMs = performance.now() - t0;
      releaseValue(out);
    } catch (e) {
      callMs = performance.now() - t0;
      failure = { error: e };
    } finally {
      this.#flush();
      placed?.finish();
      this.#callEnds();
    }
    // Also after a failure: the GPU timers must stop.
    const report = await profiler.finish(fnName, callMs, {
      tensors: placed?.count ?? 0,
      bytes: placed?.bytes ?? 0,
      device: String(this.devices[0]),
    });
    if (failure !== null) throw failure.error;
    return report;
  }

  /**
   * Shown by `console.log` and `deno repl`: the devices, how the VM runs
   * code, its VM functions with their inputs, packed functions still not
   * registered, and the bytes its tensors hold now (per device when it has
   * several).
   *
   * @example
   * ```ts
   * import { ExecBuilder, VirtualMachine } from "@relaxvm/relaxvm";
   *
   * const ib = new ExecBuilder();
   * ib.function("double", { num_inputs: 1 }, () => {
   *   ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
   *   ib.emit_ret(ib.r(1));
   * });
   * console.log(new VirtualMachine(ib.get()));
   * // VirtualMachine(cpu(0); specialized dispatch; double(1 input); live 0 B)
   * ```
   */
  [INSPECT](): string {
    const parts = [this.devices.join(", ")];
    parts.push(this.#mode === "compiled" ? "compiled mode" : `${this.#dispatch} dispatch`);
    if (this.#inputTarget === null && this.devices[0].kind !== "cpu") {
      parts.push("inputs not moved");
    }
    const fns = this.executable.functions.filter((f) => f.kind === "vm").map((f) =>
      `${printable(f.name)}(${
        f.paramNames.length > 0
          ? f.paramNames.map(printable).join(", ")
          : `${f.numArgs} input${f.numArgs === 1 ? "" : "s"}`
      })`
    );
    parts.push(
      fns.length === 0
        ? "no functions"
        : fns.length <= 6
        ? fns.join(", ")
        : `${fns.slice(0, 5).join(", ")}, … ${fns.length - 5} more`,
    );
    const missing = this.#unregistered.filter((n) => this.#packedFunc(n) === undefined);
    if (missing.length > 0) parts.push(`unregistered: ${missing.map(printable).join(", ")}`);
    const live = (d: Device) =>
      this.#state.allocators().find((a) => a.device === d)?.stats().liveBytes ?? 0;
    parts.push(
      this.devices.length === 1
        ? `live ${formatBytes(live(this.devices[0]))}`
        : `live ${this.devices.map((d) => `${formatBytes(live(d))} on ${d}`).join(", ")}`,
    );
    return `VirtualMachine(${parts.join("; ")})`;
  }

  /**
   * The tensor cache this VM's programs see (VM option `tensorCache`; by
   * default the VM's own). The host may fill it itself, with no grant
   * needed: `await loadTensorCache(dir, { cache: vm.tensorCache })`.
   */
  get tensorCache(): TensorCache {
    return this.#state.tensorCache;
  }

  /** Memory counters of `device` (default: the first device) for this VM. */
  memory_stats(device?: Device): MemoryStats {
    return this.#state.allocatorFor(device ?? this.devices[0]).stats();
  }
}

/**
 * Whether a VM function of `ex` declares more registers than its inputs and
 * the register operands of its code could name: its registers are not
 * numbered densely (a crafted file), and its register file is not bounded by
 * its size. Counts operands, not distinct registers, so a dense program never
 * qualifies and the test is one pass over the instructions.
 */
function sparseRegisters(ex: Executable): boolean {
  const cursor = new InstructionCursor(ex);
  for (const f of ex.functions) {
    if (f.kind !== "vm") continue;
    let named = f.numArgs;
    for (let i = f.start; i < f.end && named < f.registerFileSize; i++) {
      const c = cursor.seek(i);
      if (c.op === Opcode.Call) named += 1 + c.argCount;
      else if (c.op !== Opcode.Goto) named += 1;
    }
    if (f.registerFileSize > named) return true;
  }
  return false;
}

/**
 * How deeply tuples and arrays may nest in a result handed to the user:
 * handing out is recursive, and a program can build a chain of a million
 * nested tuples in a loop.
 */
export const MAX_RESULT_DEPTH = 1000;

/**
 * What makes `v` impossible to hand out — a freed object in it or in the
 * tuples and arrays it holds, or nesting deeper than `MAX_RESULT_DEPTH` —
 * described, or null. Walks without recursion, each object once.
 */
function resultProblem(v: unknown): string | null {
  const seen = new Set<object>();
  const todo: [unknown, number][] = [[v, 0]];
  while (todo.length > 0) {
    const [x, depth] = todo.pop()!;
    if (typeof x !== "object" || x === null || seen.has(x)) continue;
    seen.add(x);
    let fields: readonly unknown[] | null = null;
    if (isVMObject(x)) {
      if (x.disposed) return `${shortText(x)}, whose memory was already released`;
      if (x instanceof Tuple) fields = x.fields;
    } else {
      try {
        if (Array.isArray(x)) fields = x;
      } catch {
        // A revoked Proxy: not a container.
      }
    }
    if (fields === null) continue;
    if (depth >= MAX_RESULT_DEPTH) {
      return `tuples nested more than ${MAX_RESULT_DEPTH} deep, which cannot be handed out`;
    }
    for (const f of fields) todo.push([f, depth + 1]);
  }
  return null;
}

/** What a result is, for `invokeTensor`'s message: `the number 3`, `an array of 2 values`. */
function describeResult(v: unknown): string {
  if (v === null) return "null";
  if (v === undefined) return "nothing";
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") {
    return `the ${typeof v} ${String(v)}`;
  }
  if (typeof v === "string") return `a string`;
  if (Array.isArray(v)) return `an array (tuple) of ${v.length} value${v.length === 1 ? "" : "s"}`;
  if (v instanceof ShapeTuple) return `the shape ${v}`;
  if (typeof v === "object") return shortText(v);
  return `a ${typeof v}`;
}

/** Drops the user's hold on everything `invokeTensor` was handed and will not return. */
function disposeResult(v: unknown): void {
  const todo = [v], seen = new Set<unknown>();
  while (todo.length > 0) {
    const x = todo.pop();
    if (seen.has(x)) continue;
    seen.add(x);
    if (isVMObject(x)) x.dispose();
    else if (Array.isArray(x)) todo.push(...x);
  }
}

/** A short name for an object in a message (a tuple's own `toString` recurses into its fields). */
function shortText(x: object): string {
  if (x instanceof Tuple) return `a tuple of ${x.length}`;
  try {
    return String(x);
  } catch {
    return "an object";
  }
}

/** `VirtualMachineOptions.functions` as a map, each entry checked to be a function. */
function ownFunctions(
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
