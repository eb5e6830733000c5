/**
 * relaxvm's runtime alone: load executables and run them, without the
 * builder DSL. Import this entry point (`@relaxvm/relaxvm/runtime`) in
 * programs that only run `.rvm` files; the full library (`@relaxvm/relaxvm`)
 * adds `ExecBuilder`, `check` and `formalize`.
 *
 * @example Load and run saved bytes
 * ```ts
 * import { ExecBuilder } from "@relaxvm/relaxvm";
 * import { Executable, type NDArray, tensor, VirtualMachine } from "@relaxvm/relaxvm/runtime";
 * import { assertEquals } from "@std/assert";
 *
 * const ib = new ExecBuilder(); // elsewhere: the program that writes the .rvm file
 * ib.function("double", { num_inputs: 1 }, () => {
 *   ib.emit_call("vm.op.add", [ib.r(0), ib.r(0)], { dst: ib.r(1) });
 *   ib.emit_ret(ib.r(1));
 * });
 * const bytes = ib.get().save();
 *
 * const vm = new VirtualMachine(Executable.load(bytes));
 * using out = await vm.invoke("double", tensor([1, 2])) as NDArray;
 * assertEquals([...out.dataSync()], [2, 4]);
 * ```
 *
 * @module
 */

import { installBuiltins } from "./builtins/install.ts";

installBuiltins();

export { Executable } from "./program/executable.ts";
export type { SaveOptions } from "./program/executable.ts";
export type { Code, ConstantValue, FunctionInfo, ProgramData } from "./program/program_data.ts";
export type { TextOptions } from "./program/text_format.ts";
export type { TypeScriptOptions } from "./program/typescript_format.ts";
export { VirtualMachine } from "./vm/virtual_machine.ts";
export type {
  TimeEvaluatorOptions,
  TimingResult,
  VirtualMachineOptions,
} from "./vm/virtual_machine.ts";
export type { Execution } from "./vm/virtual_machine.ts";
export type { Instrument } from "./vm/interpreter.ts";
export type { CallLimits } from "./vm/invocation.ts";
export type { LimitedVirtualMachine } from "./vm/virtual_machine.ts";
export type {
  ChromeTrace,
  ChromeTraceEvent,
  ProfiledCall,
  ProfiledKernel,
  ProfileGpuSummary,
  ProfileReport,
  ProfileRow,
} from "./vm/profile_report.ts";
export { Closure } from "./ground/closure.ts";
export {
  describeGlobalFunc,
  getGlobalFunc,
  listGlobalFuncNames,
  registerFunc,
} from "./ground/registry.ts";
export type { FuncMeta, PackedFunc, RegisterOptions } from "./ground/registry.ts";
export type { VMObject } from "./ground/object.ts";
export { NDArray } from "./devices/ndarray.ts";
export { tensor } from "./devices/tensor.ts";
export type { NestedNumbers, TensorOptions } from "./devices/tensor.ts";
export { shape, ShapeTuple } from "./ground/shape_tuple.ts";
export { DataType, dtype, TENSOR_DTYPES } from "./ground/dtype.ts";
export type { NumberArray, TensorDType, TypedArray } from "./ground/dtype.ts";
export { Device } from "./devices/device.ts";
export type { DeviceKind } from "./devices/device.ts";
export { cpu } from "./devices/cpu_device.ts";
export type { CpuOptions } from "./devices/cpu_device.ts";
export { webgpu } from "./devices/webgpu/webgpu_device.ts";
export type { WebGPUDevice } from "./devices/webgpu/webgpu_device.ts";
export { isSoftwareAdapter, preferredDevice } from "./devices/preferred_device.ts";
export type { DeviceChoice } from "./devices/preferred_device.ts";
export type { Storage } from "./devices/storage.ts";
export type { AttentionKVCache } from "./devices/attention_kv_cache.ts";
export { PagedKVCache } from "./builtins/kv_state/paged_kv_cache.ts";
export type { PagedKVCacheOptions } from "./builtins/kv_state/paged_kv_cache.ts";
export type {
  PagedKVCacheConfig,
  PagedKVCacheKernels,
} from "./builtins/kv_state/create_arguments.ts";
export type { DepthPlan, ForwardPlan } from "./builtins/kv_state/page_table.ts";
export { loadTensorCache } from "./builtins/tensor_cache/cache_loader.ts";
export { TensorCache } from "./devices/tensor_cache.ts";
export type { TensorCacheLoader, TensorCacheRoot } from "./devices/tensor_cache.ts";
export type {
  LoadedTensorCache,
  LoadTensorCacheOptions,
  TensorCacheProgress,
} from "./builtins/tensor_cache/cache_loader.ts";
export { TensorCacheError } from "./builtins/tensor_cache/cache_format.ts";
export { loadTVMPackage } from "./tvm/load_package.ts";
export type { LoadTVMPackageOptions, TVMPackage, TVMPackageVMOptions } from "./tvm/load_package.ts";
export { DEFAULT_MAX_WORKGROUPS_PER_DISPATCH, LaunchBudgetError } from "./tvm/launch_budget.ts";
export { DEFAULT_MAX_FILE_BYTES } from "./tvm/package_files.ts";
export type { PackageReadOptions } from "./tvm/package_files.ts";
export { parseTVMPackageManifest, TVMPackageError } from "./tvm/package_format.ts";
export { Engine } from "./engine/engine.ts";
export type { ChatMessage, EngineModel, ForwardEntry, Tokenizer } from "./engine/model.ts";
export type { SchedulerStats } from "./engine/scheduler.ts";
export type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionRequest,
  Completion,
  CompletionRequest,
  CompletionUsage,
  FinishReason,
  GenerationRequest,
} from "./engine/openai_types.ts";
export type {
  HostFunction,
  HostParam,
  KernelInfo,
  PackageFunction,
  PlanExpr,
  PlanStmt,
  TVMPackageManifest,
} from "./tvm/package_format.ts";
export type {
  TensorCacheIndex,
  TensorCacheRecord,
  TensorCacheShard,
} from "./builtins/tensor_cache/cache_format.ts";
export type { ParamModule } from "./builtins/tensor_cache/param_module.ts";
export type { AllocatorKind, MemoryStats } from "./devices/allocator.ts";
export { CheckError, LoadError, VMError, WebGPUError } from "./ground/errors.ts";
export type { CheckProblem, VMErrorLocation } from "./ground/errors.ts";
