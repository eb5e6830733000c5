/**
 * relaxvm: TVM's Relax virtual machine for Deno (and browsers).
 *
 * Build a program with the `ExecBuilder` DSL (it mirrors TVM's Python
 * `relax.ExecBuilder`), get a checked `Executable`, inspect it as text or
 * TypeScript, save and load it as bytes, and run it on a register VM against
 * the builtin library: shape-heap ops, allocators, and tensor kernels on the
 * CPU and, through WebGPU, on the GPU. Programs that only load and run
 * executables can import the smaller `@relaxvm/relaxvm/runtime`.
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

// Everything the runtime exports (loading and running), then what only the full library has:
// the builder, the checker and formalize, the tensor-cache writer, and the ONNX importer.
export * from "./runtime.ts";
export { ExecBuilder } from "./builder/exec_builder.ts";
// The Builtins interface, BuiltinName, and the per-family interfaces Builtins extends.
export type * from "./ground/builtin_names.ts";
export type { DTypeName, ScalarDTypeName } from "./ground/dtype.ts";
export type { CallArg, CallOptions, FunctionOptions, GetOptions } from "./builder/exec_builder.ts";
export type { Operand, OperandKind } from "./builder/operand.ts";
export type { ConstantInput } from "./builder/constant_pool.ts";
export { check } from "./program/verifier.ts";
export type { CheckResult } from "./program/verifier.ts";
export { formalize } from "./program/formalize.ts";
export { MakeShapeCode, MatchShapeCode } from "./builtins/shape_lowering/shape_heap.ts";
export { dumpTensorCache, encodeTensorCache } from "./builtins/tensor_cache/cache_writer.ts";
export type {
  EncodedTensorCache,
  EncodeTensorCacheOptions,
  ExistingTensorCache,
  TensorCacheParams,
} from "./builtins/tensor_cache/cache_writer.ts";
export { importONNX, ONNX_OPERATOR_NAMES } from "./onnx/import_onnx.ts";
export type { ImportedONNX, ImportONNXOptions, ONNXValueInfo } from "./onnx/import_onnx.ts";
export { ONNXImportError, UnsupportedONNXError } from "./onnx/onnx_errors.ts";
export type { UnsupportedNode } from "./onnx/onnx_errors.ts";
