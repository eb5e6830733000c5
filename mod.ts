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

import "./builtins/install.ts";

export { ExecBuilder } from "./builder/exec_builder.ts";
export type { CallArg, CallOptions, FunctionOptions, GetOptions } from "./builder/exec_builder.ts";
export type { Operand, OperandKind } from "./builder/operand.ts";
export type { ConstantInput } from "./builder/constant_pool.ts";
export { check } from "./program/verifier.ts";
export type { CheckResult } from "./program/verifier.ts";
export { formalize } from "./program/formalize.ts";
export { Executable } from "./program/executable.ts";
export type { ConstantValue, FunctionInfo } from "./program/executable.ts";
export type { TextOptions } from "./program/text_format.ts";
export type { TypeScriptOptions } from "./program/typescript_format.ts";
export { VirtualMachine } from "./vm/virtual_machine.ts";
export type {
  TimeEvaluatorOptions,
  TimingResult,
  VirtualMachineOptions,
} from "./vm/virtual_machine.ts";
export type { Instrument } from "./vm/interpreter.ts";
export { Closure } from "./ground/closure.ts";
export { getGlobalFunc, listGlobalFuncNames, registerFunc } from "./ground/registry.ts";
export type { PackedFunc, RegisterOptions } from "./ground/registry.ts";
export { NDArray, tensor } from "./devices/ndarray.ts";
export type { NestedNumbers, TensorOptions } from "./devices/ndarray.ts";
export { shape, ShapeTuple } from "./ground/shape_tuple.ts";
export { DataType, dtype } from "./ground/dtype.ts";
export type { TensorDType, TypedArray } from "./ground/dtype.ts";
export { cpu, Device } from "./devices/device.ts";
export type { DeviceKind } from "./devices/device.ts";
export { webgpu } from "./devices/webgpu/webgpu_device.ts";
export type { WebGPUDevice } from "./devices/webgpu/webgpu_device.ts";
export { WebGPUError } from "./devices/webgpu/command_batch.ts";
export type { Storage } from "./devices/storage.ts";
export type { AllocatorKind, MemoryStats } from "./devices/allocator.ts";
export { CheckError, LoadError, VMError } from "./ground/errors.ts";
export type { CheckProblem, VMErrorLocation } from "./ground/errors.ts";
