/**
 * The lifecycle of a call from the user into a VM (Lua's `ldo.c` beside the
 * loop of `lvm.c`): the call is counted (a disposed VM frees after the last
 * one settles), its CPU tensor arguments move to the VM's device
 * (`moveInputs`), the interpreter runs it under the call's limits, its result
 * is handed out (vm/results.ts) and device work is submitted. TVM's stateful
 * API (`save_function`, `set_input`, `invoke_stateful`, `get_outputs`) keeps
 * its arguments and outputs here too.
 *
 * @module
 */

import type { Device } from "../devices/device.ts";
import type { MemoryScope } from "../devices/memory_scope.ts";
import { NDArray } from "../devices/ndarray.ts";
import { Closure } from "../ground/closure.ts";
import { VMError } from "../ground/errors.ts";
import { releaseValue, retainValue } from "../ground/object.ts";
import { printable } from "../ground/printable.ts";
import type { Executable } from "../program/executable.ts";
import { type PlacedInputs, placeInputs } from "./input_placement.ts";
import { checkArgumentsLive, type Interpreter, reasonOf } from "./interpreter.ts";
import type { ResolvedLimits } from "./invocation.ts";
import { describeResult, disposeResult, exportResult } from "./results.ts";

/** Arguments a VM holds for later calls, with the copies it made of them. */
interface HeldArguments {
  readonly args: readonly unknown[];
  readonly placed: PlacedInputs | null;
}

/** The calls of one VM: what each one starts and finishes, and what the VM holds between them. */
export class Calls {
  /** Calls from the user that have not settled yet: `dispose()` frees after the last. */
  running = 0;
  disposed = false;
  /** `save_function`: saved name to the function and the arguments bound to it. */
  readonly saved = new Map<string, HeldArguments & { name: string }>();
  /** `set_input`: function name to its inputs. */
  readonly inputs = new Map<string, HeldArguments>();
  /** `invoke_stateful`: function name to its last output. */
  readonly outputs = new Map<string, unknown>();

  constructor(
    /** The VM: the owner of the closures `invokeClosure` accepts. */
    readonly vm: object,
    readonly executable: Executable,
    readonly devices: readonly Device[],
    readonly interp: Interpreter,
    readonly state: MemoryScope,
    /** The limits of a call that gives none. */
    readonly limits: ResolvedLimits,
    /** Where CPU tensor arguments are copied (`moveInputs`), or null: nowhere. */
    readonly inputTarget: Device | null,
    /** Lets go of the VM's constants (vm/linking.ts) when the VM is freed. */
    readonly releaseConstants: () => void,
  ) {}

  /** The VM was disposed: later calls are refused, and it frees once the running ones settle. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.running === 0) this.free();
  }

  /**
   * Hands a result of function `index` (or `name`) to the user
   * (vm/results.ts).
   */
  export(index: number | string, v: unknown): unknown {
    if (typeof v !== "object" || v === null) return v;
    return exportResult(
      typeof index === "string" ? index : this.executable.functions[index].name,
      v,
    );
  }

  vmFunctionIndex(name: string): number {
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
  checkArguments(name: string, args: readonly unknown[]): void {
    const want = this.executable.functions[this.vmFunctionIndex(name)].numArgs;
    if (args.length !== want) {
      throw new VMError(
        { functionName: name, pc: -1, instruction: "", packedFunc: "" },
        `@${name} takes ${want} argument${want === 1 ? "" : "s"}, got ${args.length}`,
      );
    }
  }

  /** Submits queued device work (the end of a VM call). */
  flush(): void {
    const devices = this.devices;
    for (let i = 0; i < devices.length; i++) devices[i].flush();
  }

  /** Throws a `VMError` naming `what` once the VM is disposed. */
  checkOpen(what: string): void {
    if (this.disposed) {
      throw new VMError(
        { functionName: "", pc: -1, instruction: "", packedFunc: "" },
        `${what}: the VM was disposed`,
      );
    }
  }

  /** A call of function `name` (or index) from the user begins; refused once the VM is disposed. */
  callStarts(name: string | number): void {
    if (this.disposed) throw this.disposedError(name);
    this.running++;
  }

  /** What a call of `name` (or index) gets once the VM is disposed. */
  disposedError(name: string | number): VMError {
    const what = typeof name === "number" ? this.executable.functions[name].name : name;
    return new VMError(
      { functionName: what, pc: -1, instruction: "", packedFunc: "" },
      `@${printable(what)}: the VM was disposed`,
    );
  }

  /** A call from the user ended: device work is submitted, and a disposed VM freed after the last. */
  callEnds(): void {
    this.flush();
    if (--this.running === 0 && this.disposed) this.free();
  }

  free(): void {
    this.releaseConstants();
    for (const held of [...this.saved.values(), ...this.inputs.values()]) {
      for (const a of held.args) releaseValue(a);
      held.placed?.finish();
    }
    this.saved.clear();
    this.inputs.clear();
    for (const out of this.outputs.values()) releaseValue(out);
    this.outputs.clear();
    this.state.clearOwnTensorCache();
    for (const a of this.state.allocators()) a.close();
  }

  /**
   * `args` with their CPU tensors copied to the VM's first device
   * (`moveInputs`; vm/input_placement.ts), or null when nothing moves. A
   * copy that cannot be made (the memory limit) is a `VMError` naming the
   * function.
   */
  place(name: string, args: readonly unknown[], holdAll: boolean): PlacedInputs | null {
    const target = this.inputTarget;
    if (target === null || args.length === 0) return null;
    try {
      return placeInputs(args, target, this.state, holdAll);
    } catch (e) {
      throw new VMError(
        { functionName: name, pc: -1, instruction: "", packedFunc: "" },
        `Cannot move the arguments of @${printable(name)} to ${target}: ${reasonOf(e)}`,
        { cause: e },
      );
    }
  }

  /** `callExported` after moving CPU tensor arguments to the VM's device (`moveInputs`). */
  callPlaced(index: number, args: readonly unknown[], limits: ResolvedLimits): Promise<unknown> {
    if (this.inputTarget === null) return this.callExported(index, args, limits);
    let placed: PlacedInputs | null;
    try {
      placed = this.place(this.executable.functions[index].name, args, false);
    } catch (e) {
      return Promise.reject(e);
    }
    if (placed === null) return this.callExported(index, args, limits);
    // Settles after the result was handed out: copies it holds belong to the caller then.
    return this.callExported(index, placed.args, limits).finally(() => placed.finish());
  }

  /**
   * Runs function `index` for the user under `limits`: the result is
   * exported (the user holds it) and device work is submitted. Not an async
   * function: a call that did not suspend settles without an extra await
   * (about 100 ns per invocation), and one that did is chained on its Promise.
   */
  callExported(index: number, args: readonly unknown[], limits: ResolvedLimits): Promise<unknown> {
    let out: unknown;
    try {
      this.callStarts(index);
    } catch (e) {
      return Promise.reject(e);
    }
    try {
      out = this.interp.invoke(limits, index, args);
    } catch (e) {
      this.callEnds();
      return Promise.reject(e);
    }
    if (out instanceof Promise) {
      return out.then(
        (v) => {
          try {
            return this.export(index, v);
          } finally {
            this.callEnds();
          }
        },
        (e) => {
          this.callEnds();
          throw e;
        },
      );
    }
    try {
      return Promise.resolve(this.export(index, out));
    } catch (e) {
      return Promise.reject(e);
    } finally {
      this.callEnds();
    }
  }

  invoke(name: string, args: unknown[], limits: ResolvedLimits): Promise<unknown> {
    if (this.disposed) return Promise.reject(this.disposedError(name));
    try {
      const saved = this.saved.get(name);
      if (saved !== undefined && args.length === 0) {
        return this.callExported(this.vmFunctionIndex(saved.name), saved.args, limits);
      }
      return this.callPlaced(this.vmFunctionIndex(name), args, limits);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  async invokeTensor(name: string, args: unknown[], limits: ResolvedLimits): Promise<NDArray> {
    const out = await this.invoke(name, args, limits);
    if (out instanceof NDArray) return out;
    const what = describeResult(out);
    disposeResult(out);
    throw new VMError(
      { functionName: name, pc: -1, instruction: "", packedFunc: "" },
      `The result is ${what}, not a tensor (NDArray): call invoke() for results of other kinds`,
    );
  }

  get(name: string, limits: ResolvedLimits): (...args: unknown[]) => Promise<unknown> {
    if (this.saved.has(name)) return (...args: unknown[]) => this.invoke(name, args, limits);
    const index = this.vmFunctionIndex(name);
    // Resolved once; a function saved later under this name takes over, as with invoke.
    return (...args: unknown[]) =>
      this.saved.size === 0
        ? this.callPlaced(index, args, limits)
        : this.invoke(name, args, limits);
  }

  async invokeClosure(
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
    if (closure.owner !== null && closure.owner !== this.vm) {
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
    this.callStarts(closure.name);
    let placed: PlacedInputs | null = null;
    try {
      placed = this.place(closure.name, args, false);
      const placedArgs = placed?.args ?? args;
      return this.export(
        closure.name,
        await this.interp.run(limits, () => closure.call(placedArgs)),
      );
    } finally {
      this.flush();
      placed?.finish();
      this.callEnds();
    }
  }

  /** Binds `args` to `name` under `saved_name`: `get(saved_name)()` then runs without them. */
  saveFunction(name: string, saved_name: string, ...args: unknown[]): void {
    this.checkOpen("save_function");
    this.checkArguments(name, args);
    checkArgumentsLive(name, args);
    // Moved once, here (TVM's SaveClosure); the VM holds the copies until replaced.
    const placed = this.place(name, args, true);
    const kept = placed?.args ?? args;
    const old = this.saved.get(saved_name);
    for (const a of kept) retainValue(a);
    if (old !== undefined) {
      for (const a of old.args) releaseValue(a);
      old.placed?.finish();
    }
    this.saved.set(saved_name, { name, args: kept, placed });
  }

  /** Stores the inputs of `name` for `invoke_stateful`. */
  setInput(name: string, ...args: unknown[]): void {
    this.checkOpen("set_input");
    this.checkArguments(name, args);
    checkArgumentsLive(name, args);
    // Moved once, here (TVM's set_input); the VM holds the copies until replaced.
    const placed = this.place(name, args, true);
    const kept = placed?.args ?? args;
    for (const a of kept) retainValue(a);
    const old = this.inputs.get(name);
    if (old !== undefined) {
      for (const a of old.args) releaseValue(a);
      old.placed?.finish();
    }
    this.inputs.set(name, { args: kept, placed });
  }

  /** Runs `name` on the inputs given to `set_input`; read the result with `get_outputs`. */
  async invokeStateful(name: string): Promise<void> {
    if (this.disposed) throw this.disposedError(name);
    const args = this.inputs.get(name)?.args;
    if (args === undefined) {
      throw new VMError(
        { functionName: name, pc: -1, instruction: "", packedFunc: "" },
        `No inputs set for "${name}": call set_input first`,
      );
    }
    let out: unknown;
    this.callStarts(name);
    try {
      out = await this.interp.invoke(this.limits, this.vmFunctionIndex(name), args);
    } finally {
      this.callEnds();
    }
    if (this.disposed) {
      releaseValue(out); // freed while it ran: nobody can read the output
      return;
    }
    retainValue(out);
    releaseValue(this.outputs.get(name));
    this.outputs.set(name, out);
  }

  /** The result of the last `invoke_stateful(name)`. */
  getOutputs(name: string): unknown {
    if (!this.outputs.has(name)) {
      throw new VMError(
        { functionName: name, pc: -1, instruction: "", packedFunc: "" },
        `No outputs for "${name}": call invoke_stateful first`,
      );
    }
    return this.export(name, this.outputs.get(name));
  }

  /** Throws the VM's "Aborted" `VMError` if its default signal (option `signal`) has aborted. */
  checkAborted(name: string): void {
    const signal = this.limits.signal;
    if (signal?.aborted) {
      throw new VMError(
        { functionName: name, pc: -1, instruction: "", packedFunc: "" },
        "Aborted by the call's AbortSignal",
        { cause: signal.reason },
      );
    }
  }
}
