/**
 * Linking a loaded executable to the world it runs in (TVM's
 * `VirtualMachineImpl::Init`): its tensor constants placed on the VM's first
 * device, each packed function it names resolved (the VM's own `functions`
 * first, then the registry; one not registered fails only the calls that reach
 * it), and the closures and callees its code reads as operands.
 *
 * @module
 */

import { activateAllocators, activeAllocators } from "../devices/allocation_context.ts";
import type { Device } from "../devices/device.ts";
import type { MemoryScope } from "../devices/memory_scope.ts";
import { NDArray } from "../devices/ndarray.ts";
import { Closure } from "../ground/closure.ts";
import { VMError } from "../ground/errors.ts";
import { isVMObject, releaseValue, retainValue } from "../ground/object.ts";
import { printable } from "../ground/printable.ts";
import { getGlobalFunc, listGlobalFuncNames, type PackedFunc } from "../ground/registry.ts";
import { suggestName } from "../ground/suggest.ts";
import { Opcode } from "../program/bytecode.ts";
import { InstructionCursor } from "../program/decoder.ts";
import type { Executable } from "../program/executable.ts";
import { copyToDevice } from "./input_placement.ts";
import { type Interpreter, reasonOf } from "./interpreter.ts";
import type { OperandResolver } from "./loaded_function.ts";

/** What the linker asks of its VM: who owns its closures, and whether a call may run now. */
export interface LinkOwner {
  /** The VM: the owner of closures of its functions. */
  readonly vm: object;
  /** Throws when a closure of function `index` may not run (the VM was disposed). */
  checkCallable(index: number): void;
}

/** The constants, closures and callees of one VM's executable. */
export class Linker {
  /** Packed functions the executable names that were not registered when the VM loaded it. */
  readonly unregistered: string[] = [];
  /** The executable's constants as the VM's code reads them (placed by `placeConstants`). */
  constants: unknown[] = [];
  readonly #functionRefs = new Map<number, Closure>();

  constructor(
    readonly executable: Executable,
    readonly state: MemoryScope,
    readonly interp: Interpreter,
    /** This VM's own packed functions (`functions`), looked up before the registry. */
    readonly ownFunctions: ReadonlyMap<string, PackedFunc>,
    readonly owner: LinkOwner,
  ) {
    for (const f of executable.functions) {
      if (f.kind === "packed" && this.packedFunc(f.name) === undefined) {
        this.unregistered.push(f.name);
      }
    }
  }

  /** How the loaded functions read constants, function references and callees. */
  resolver(): OperandResolver {
    return {
      constant: (i) => this.constants[i],
      functionRef: (i) => this.#functionRef(i),
      callee: (i) => this.#callee(i),
      vmState: () => this.state,
    };
  }

  /**
   * Tensor constants move to `target` once, here; the VM holds them
   * for its lifetime. Every tensor constant is pinned: it belongs to the
   * executable (or, moved, to this VM), so a program cannot `kill` it.
   */
  placeConstants(target: Device): void {
    const previous = activateAllocators(this.state);
    try {
      this.constants = this.executable.constants.map((c) => {
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

  /** Lets go of the constants (the VM is freed). */
  releaseConstants(): void {
    for (const c of this.constants.splice(0)) releaseValue(c);
  }

  /** The packed function `name`: this VM's own, else the registry's. */
  packedFunc(name: string): PackedFunc | undefined {
    return this.ownFunctions.get(name) ?? getGlobalFunc(name);
  }

  /** The packed functions the executable names that are still not registered. */
  missing(): string[] {
    return this.unregistered.filter((n) => this.packedFunc(n) === undefined);
  }

  #functionRef(index: number): Closure {
    let ref = this.#functionRefs.get(index);
    if (ref === undefined) {
      const f = this.executable.functions[index];
      ref = f.kind === "vm"
        ? new Closure(f.name, this.#guardedCallee(index), [], this.owner.vm)
        : new Closure(f.name, this.#callee(index));
      ref.retain();
      this.#functionRefs.set(index, ref);
    }
    return ref;
  }

  #callee(index: number): (...args: unknown[]) => unknown {
    const f = this.executable.functions[index];
    if (f.kind === "packed") return this.packedFunc(f.name) ?? this.#unregisteredCallee(f.name);
    const interp = this.interp;
    return (...args: unknown[]) => interp.call(index, args);
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
    const interp = this.interp, state = this.state, owner = this.owner;
    return (...args: unknown[]) => {
      owner.checkCallable(index);
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
    let reason = `Unknown packed function ${quote(name)}`;
    if (!name.includes(".") && compiledByTVM(this.executable)) {
      // registerFunc would send the user the wrong way: TVM's kernels are machine code.
      reason +=
        `: the executable was compiled by TVM (relax.build), and ${
          quote(name)
        } is one of its TIR kernels, ` +
        "native code in TVM's compiled library (the module relax.build returns; the executable file " +
        "holds only the bytecode that calls it), which relaxvm cannot run. Compile the model for " +
        "WebGPU with tools/tvm/export_webgpu.py instead and load the package with loadTVMPackage " +
        '(docs/tvm.md, "Running TVM-compiled models")';
    } else {
      reason += `${
        guess === undefined ? "" : ` (did you mean ${quote(guess)}?)`
      }: register it with registerFunc`;
    }
    const others = this.unregistered.filter((n) => n !== name && this.packedFunc(n) === undefined);
    if (others.length > 0) {
      const shown = others.slice(0, 10).map(quote).join(", ");
      const more = others.length > 10 ? ` and ${others.length - 10} more` : "";
      reason += `; this executable also calls ${shown}${more}, not registered either`;
    }
    return reason;
  }
}

/**
 * Whether TVM's Relax compiler made `ex`: its argument checks carry the
 * `ErrorContext(fn=...)` strings TVM's VMShapeLower writes, which relaxvm's
 * builder never does.
 */
function compiledByTVM(ex: Executable): boolean {
  return ex.constants.some((c) => typeof c === "string" && c.startsWith("ErrorContext(fn="));
}

/**
 * Whether a VM function of `ex` declares more registers than its inputs and
 * the register operands of its code could name: its registers are not
 * numbered densely (a crafted file), and its register file is not bounded by
 * its size. Counts operands, not distinct registers, so a dense program never
 * qualifies and the test is one pass over the instructions.
 */
export function sparseRegisters(ex: Executable): boolean {
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
