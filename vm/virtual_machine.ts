/**
 * `VirtualMachine`: loads an executable for a set of devices and runs its
 * functions (seed 002). Loading resolves every packed function by name (one
 * that is not registered fails the calls that reach it, with a `VMError`
 * naming it, and leaves the other functions runnable), moves tensor
 * constants to the VM's first device once (both in vm/linking.ts), computes
 * liveness, decodes the code for the loop in vm/interpreter.ts and writes out
 * the specialized (vm/specialized_dispatch.ts) or compiled
 * (vm/compiled_mode.ts) form of each function. Loading takes time linear in
 * the code (about 20 to 40 ms per 10,000 instructions once V8 has warmed up;
 * bench/construction_bench.ts).
 *
 * This file is the public face: each call from the user goes through
 * vm/calls.ts (counted, arguments placed, result handed out by
 * vm/results.ts), TVM's tools through vm/vm_tools.ts; the options and result
 * types are in vm/vm_options.ts.
 *
 * @module
 */
import type { MemoryStats } from "../devices/allocator.ts";
import { cpuResidentStats } from "../devices/cpu_device.ts";
import { cpu } from "../devices/cpu_device.ts";
import type { Device } from "../devices/device.ts";
import { MemoryScope } from "../devices/memory_scope.ts";
import type { NDArray } from "../devices/ndarray.ts";
import type { TensorCache } from "../devices/tensor_cache.ts";
import { VMError } from "../ground/errors.ts";
import { formatBytes, INSPECT } from "../ground/inspect.ts";
import { printable } from "../ground/printable.ts";
import type { Executable } from "../program/executable.ts";
import type { ProgramData } from "../program/program_data.ts";
import { formalize } from "../program/formalize.ts";
import { computeReleases } from "../program/liveness.ts";
import { Calls } from "./calls.ts";
import { type Instrument, Interpreter } from "./interpreter.ts";
import { type CallLimits, resolveLimits } from "./invocation.ts";
import { Linker, sparseRegisters } from "./linking.ts";
import { loadFunction } from "./loaded_function.ts";
import type { ProfileReport } from "./profile_report.ts";
import { profileCall, timeEvaluator } from "./vm_tools.ts";
import {
  checkedOptions,
  type FunctionLoadReport,
  type LimitedVirtualMachine,
  type TimeEvaluatorOptions,
  type TimingResult,
  type VirtualMachineOptions,
} from "./vm_options.ts";

export {
  DEFAULT_EXECUTION,
  DEFAULT_MAX_MEMORY_BYTES,
  type Execution,
  type FunctionLoadReport,
  type LimitedVirtualMachine,
  type TimeEvaluatorOptions,
  type TimingResult,
  type VirtualMachineOptions,
} from "./vm_options.ts";
export { MAX_RESULT_DEPTH } from "./results.ts";

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
 * const vm = new VirtualMachine(ib.get(), undefined, { execution: "compiled" });
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
  /** Calls from the user, and what the VM holds between them (vm/calls.ts). */
  readonly #calls: Calls;
  /** Constants, closures and packed functions of the executable (vm/linking.ts). */
  readonly #linker: Linker;
  /** The program the interpreter runs: the executable, or its dense renumbering. */
  readonly #program: ProgramData;
  /** How the VM runs code (its options). */
  readonly #mode: "interpret" | "compiled";
  readonly #dispatch: "specialized" | "generic";

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
    const checked = checkedOptions(options);
    const { mode, dispatch, limits } = checked;
    if (ex.disposed) {
      throw new VMError(
        { functionName: "", pc: -1, instruction: "", packedFunc: "" },
        "Cannot run a disposed executable: its constants are released",
      );
    }
    this.executable = ex;
    this.devices = Object.freeze(list);
    const inputTarget = checked.moveInputs && list[0].kind !== "cpu" ? list[0] : null;
    this.#mode = mode;
    this.#dispatch = dispatch;
    this.#state = new MemoryScope(
      this.devices,
      checked.allocator,
      checked.maxMemoryBytes,
      checked.tensorCache,
    );
    this.#state.tensorCacheRoots = checked.roots;
    // A file may name a high register once (r(2^24 - 1)) and so ask for a register file far
    // larger than its code: every call would copy it, and liveness would scan it per block.
    // The VM runs such a program renumbered densely (as the builder always does).
    // The renumbered copy holds the constants too; the VM reads them from `ex`, so it lets go.
    const run = sparseRegisters(ex) ? formalize(ex) : ex;
    if (run !== ex) run.dispose();
    this.#program = run;
    this.#interp = new Interpreter(run, this.#state);
    this.#interp.limits = limits;
    const interp = this.#interp;
    this.#state.callSignal = () => interp.currentCallSignal();
    // Between instructions the clock is read on backward jumps and calls only; a large kernel
    // reads it too, before its output is allocated, so straight-line heavy code stops in time.
    this.#state.limit.onLargeBlock = () => interp.checkNow();
    // A kernel charges its estimated work to the running call before it runs (fuel, time left)
    // and checks it between the chunks of a long one (builtins/operators/kernel_cost.ts).
    this.#state.limit.workBudget = () => interp.currentInvocation();
    const calls = new Calls(
      this,
      ex,
      this.devices,
      interp,
      this.#state,
      limits,
      inputTarget,
      () => linker.releaseConstants(),
    );
    this.#calls = calls;
    const linker = new Linker(ex, this.#state, interp, checked.own, {
      vm: this,
      checkCallable: (index) => {
        if (calls.disposed) throw calls.disposedError(index);
      },
    });
    this.#linker = linker;
    linker.placeConstants(this.devices[0]);
    const resolver = linker.resolver();
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

  /** True once `dispose()` was called: calls are refused from then on. */
  get disposed(): boolean {
    return this.#calls.disposed;
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
    this.#calls.dispose();
  }

  /** `using vm = new VirtualMachine(ex)` disposes at the end of the scope. */
  [Symbol.dispose](): void {
    this.dispose();
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
    return this.#calls.invoke(name, args, this.#calls.limits) as Promise<T>;
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
    return this.#calls.invokeTensor(name, args, this.#calls.limits);
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
    return this.#calls.get(name, this.#calls.limits) as (...args: unknown[]) => Promise<T>;
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
    const calls = this.#calls;
    const resolved = resolveLimits(limits, calls.limits);
    const shown = Object.entries(limits).filter(([, v]) => v !== undefined).map(([k, v]) =>
      k === "signal" ? "signal" : `${k}: ${String(v)}`
    );
    const limited: LimitedVirtualMachine = {
      invoke: <T>(name: string, ...args: unknown[]) =>
        calls.invoke(name, args, resolved) as Promise<T>,
      invokeTensor: (name, ...args) => calls.invokeTensor(name, args, resolved),
      get: <T>(name: string) => calls.get(name, resolved) as (...args: unknown[]) => Promise<T>,
      invoke_closure: <T>(closure: unknown, ...args: unknown[]) =>
        calls.invokeClosure(closure, args, resolved) as Promise<T>,
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
    return this.#calls.invokeClosure(closure, args, this.#calls.limits) as Promise<T>;
  }

  /** Binds `args` to `name` under `saved_name`: `get(saved_name)()` then runs without them. */
  save_function(name: string, saved_name: string, ...args: unknown[]): void {
    this.#calls.saveFunction(name, saved_name, ...args);
  }

  /** Calls `fn(func, name, before, ret, args)` before and after every `Call`; `"skip"` before skips it. `null` removes it. */
  set_instrument(fn: Instrument | null): void {
    this.#interp.instrument = fn;
  }

  /** Stores the inputs of `name` for `invoke_stateful`. */
  set_input(name: string, ...args: unknown[]): void {
    this.#calls.setInput(name, ...args);
  }

  /** Runs `name` on the inputs given to `set_input`; read the result with `get_outputs`. */
  invoke_stateful(name: string): Promise<void> {
    return this.#calls.invokeStateful(name);
  }

  /** The result of the last `invoke_stateful(name)`. */
  get_outputs(name: string): unknown {
    return this.#calls.getOutputs(name);
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
    return timeEvaluator(this.#calls, name, options);
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
  profile(name: string, ...args: unknown[]): Promise<ProfileReport> {
    return profileCall(this.#calls, this.#program, name, args);
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
   * // VirtualMachine(cpu(0); compiled mode; double(1 input); live 0 B)
   * ```
   */
  [INSPECT](): string {
    const parts = [this.devices.join(", ")];
    parts.push(this.#mode === "compiled" ? "compiled mode" : `${this.#dispatch} dispatch`);
    if (this.#calls.inputTarget === null && this.devices[0].kind !== "cpu") {
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
    const missing = this.#linker.missing();
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
    const d = device ?? this.devices[0];
    const stats = this.#state.allocatorFor(d).stats();
    // The CPU kernels' weight copies are process-wide (kernels/cpu/wasm/resident.ts).
    return d.kind === "cpu" ? { ...stats, ...cpuResidentStats() } : stats;
  }
}
