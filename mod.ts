/**
 * relaxvm: TVM's Relax virtual machine for Deno (and browsers).
 *
 * Build a program with the `ExecBuilder` DSL (it mirrors TVM's Python
 * `relax.ExecBuilder`), get a checked `Executable`, inspect it as text or
 * TypeScript, save and load it as bytes, and run it on a register VM against
 * the builtin library: shape-heap ops, allocators, and tensor kernels on the
 * CPU and, through WebGPU, on the GPU.
 *
 * @example Build, run, read the result
 * ```ts
 * import { ExecBuilder, type NDArray, tensor, VirtualMachine } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder();
 * ib.function("func0", { num_inputs: 2 }, () => {
 *   ib.emit_call("vm.op.add", [ib.r(0), ib.r(1)], { dst: ib.r(2) });
 *   ib.emit_ret(ib.r(2));
 * });
 * const vm = new VirtualMachine(ib.get());
 * using out = await vm.invoke("func0", tensor([1, 2, 3]), tensor([10, 20, 30])) as NDArray;
 * assertEquals([...await out.data()], [11, 22, 33]);
 * ```
 *
 * @module
 */

import "./builtins/mod.ts";

export { ExecBuilder } from "./builder/exec_builder.ts";
export type { CallArg, CallOptions, FunctionOptions, GetOptions } from "./builder/exec_builder.ts";
export type { Operand, OperandKind } from "./builder/operand.ts";
export type { ConstantInput } from "./builder/constant_pool.ts";
export { check } from "./builder/check.ts";
export type { CheckResult } from "./builder/check.ts";
export { formalize } from "./builder/formalize.ts";
export { Executable } from "./vm/executable.ts";
export type { ConstantValue, FunctionInfo } from "./vm/executable.ts";
export type { TextOptions } from "./vm/text_format.ts";
export type { TypeScriptOptions } from "./vm/typescript_format.ts";
export { VirtualMachine } from "./vm/virtual_machine.ts";
export type {
  TimeEvaluatorOptions,
  TimingResult,
  VirtualMachineOptions,
} from "./vm/virtual_machine.ts";
export type { Instrument } from "./vm/interpreter.ts";
export { Closure } from "./vm/closure.ts";
export { getGlobalFunc, listGlobalFuncNames, registerFunc } from "./builtins/registry.ts";
export type { PackedFunc, RegisterOptions } from "./builtins/registry.ts";
export { NDArray, tensor } from "./vm/ndarray.ts";
export type { NestedNumbers, TensorOptions } from "./vm/ndarray.ts";
export { shape, ShapeTuple } from "./vm/shape_tuple.ts";
export { DataType, dtype } from "./vm/dtype.ts";
export type { TensorDType, TypedArray } from "./vm/dtype.ts";
export { cpu, Device } from "./vm/device.ts";
export type { DeviceKind } from "./vm/device.ts";
export { webgpu } from "./vm/webgpu_device.ts";
export type { WebGPUDevice } from "./vm/webgpu_device.ts";
export { WebGPUError } from "./builtins/webgpu/command_batch.ts";
export type { Storage } from "./vm/memory/storage.ts";
export type { AllocatorKind, MemoryStats } from "./vm/memory/allocator.ts";
export { CheckError, LoadError, VMError } from "./vm/errors.ts";
export type { CheckProblem, VMErrorLocation } from "./vm/errors.ts";
