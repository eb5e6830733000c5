/**
 * The comparison operators, the logical operators and `where`: `vm.op.equal`,
 * `not_equal`, `less`, `less_equal`, `greater`, `greater_equal` (any
 * numeric dtype or bool → bool), `logical_and`, `logical_or`, `logical_xor`,
 * `logical_not` (bool → bool) and `vm.op.where(cond, x, y)`, all with NumPy
 * broadcasting, as TVM's Relax operators of those names. They make the
 * boolean tensors that masks and ONNX's `Equal`/`Where`/`Not` need; their
 * kernels are `compare` and `where` of the kernel registry.
 *
 * @example A mask and a select
 * ```ts
 * import { getGlobalFunc, type NDArray, tensor } from "@relaxvm/relaxvm";
 * import { assertEquals } from "@std/assert";
 *
 * const less = getGlobalFunc("vm.op.less")!, where = getGlobalFunc("vm.op.where")!;
 * using x = tensor([1, 5, 3]);
 * using limit = tensor([4]);
 * using mask = less(x, limit) as NDArray; // bool [true, false, true]
 * assertEquals([...mask.dataSync()], [1, 0, 1]);
 * using y = where(mask, x, limit) as NDArray;
 * assertEquals([...y.dataSync()], [1, 4, 3]);
 * ```
 *
 * @module
 */

import type { TensorDType } from "../../ground/dtype.ts";
import type { NDArray } from "../../devices/ndarray.ts";
import { formatShape, tryBroadcastShapes } from "../../kernels/broadcast.ts";
import type { CompareOp } from "../../kernels/kernel_backend.ts";
import { BuiltinTable } from "../builtin_table.ts";
import { tensorArg } from "../validate.ts";
import {
  checkArgCount,
  checkDType,
  checkSameDevice,
  checkSameDType,
  launch,
} from "../operators/operator_arguments.ts";

/** The builtins of this module, installed by `installBuiltins()`. */
export const comparisonBuiltins = new BuiltinTable("Comparison operators", import.meta.url);

/** Dtypes the comparisons take (int64 on the CPU only, as everywhere). */
const COMPARED: readonly TensorDType[] = ["float32", "int32", "int64", "bool"];
const BOOL: readonly TensorDType[] = ["bool"];

const COMPARISONS: Readonly<Record<Exclude<CompareOp, "logical_not">, string>> = {
  equal: "`a == b`",
  not_equal: "`a != b`",
  less: "`a < b`",
  less_equal: "`a <= b`",
  greater: "`a > b`",
  greater_equal: "`a >= b`",
  logical_and: "`a && b`",
  logical_or: "`a || b`",
  logical_xor: "`a != b` of two bools",
};

/** Every packed function name this module registers. */
export const COMPARISON_OPERATOR_NAMES: readonly string[] = [
  ...Object.keys(COMPARISONS),
  "logical_not",
  "where",
].map((op) => `vm.op.${op}`);

/** The broadcast shape of `tensors`, or a `RangeError` naming them. */
function broadcastAll(name: string, tensors: readonly NDArray[]): number[] {
  let shape: number[] | undefined = [...tensors[0].shape];
  for (const t of tensors.slice(1)) shape = shape && tryBroadcastShapes(shape, t.shape);
  if (shape === undefined) {
    throw new RangeError(
      `${name}: shapes ${tensors.map((t) => formatShape(t.shape)).join(", ")} do not broadcast`,
    );
  }
  return shape;
}

function makeCompare(op: CompareOp): (...args: unknown[]) => NDArray {
  const name = `vm.op.${op}`;
  const dtypes = op.startsWith("logical_") ? BOOL : COMPARED;
  return (...args: unknown[]) => {
    checkArgCount(name, args, 2, 2);
    const a = tensorArg(args[0], "argument 0 (a)", name);
    const b = tensorArg(args[1], "argument 1 (b)", name);
    checkDType(name, a, "a", dtypes);
    checkSameDType(name, [a, b]);
    checkSameDevice(name, [a, b]);
    const shape = broadcastAll(name, [a, b]);
    return launch(a, shape, "bool", (backend, out) => backend.compare(op, a, b, out));
  };
}

function logicalNot(...args: unknown[]): NDArray {
  const name = "vm.op.logical_not";
  checkArgCount(name, args, 1, 1);
  const x = tensorArg(args[0], "argument 0 (x)", name);
  checkDType(name, x, "x", BOOL);
  return launch(x, x.shape, "bool", (backend, out) => backend.compare("logical_not", x, x, out));
}

function where(...args: unknown[]): NDArray {
  const name = "vm.op.where";
  checkArgCount(name, args, 3, 3);
  const cond = tensorArg(args[0], "argument 0 (cond)", name);
  const x = tensorArg(args[1], "argument 1 (x)", name);
  const y = tensorArg(args[2], "argument 2 (y)", name);
  checkDType(name, cond, "cond", BOOL);
  checkDType(name, x, "x", COMPARED);
  checkSameDType(name, [x, y]);
  checkSameDevice(name, [cond, x, y]);
  const shape = broadcastAll(name, [cond, x, y]);
  return launch(x, shape, x.dtype, (backend, out) => backend.where(cond, x, y, out));
}

const DEVICES = ["cpu", "webgpu"] as const;
const ERRORS =
  "`TypeError` (an argument of the wrong kind or dtype, tensors on different devices, int64 on a GPU), `RangeError` (shapes that do not broadcast); messages start with the operator's name.";

for (const [op, meaning] of Object.entries(COMPARISONS) as [CompareOp, string][]) {
  const logical = op.startsWith("logical_");
  comparisonBuiltins.add(`vm.op.${op}`, makeCompare(op), {
    signature: "(a, b) → bool tensor",
    summary:
      `Elementwise ${meaning}, with NumPy broadcasting; \`a\` and \`b\` have the same dtype and device, the result is bool on that device.${
        logical ? "" : " NaN is unequal to everything (`not_equal` of NaN is true)."
      }`,
    dtypes: logical ? BOOL : COMPARED,
    devices: DEVICES,
    errors: ERRORS,
    tvm: `relax.op.${op}`,
  });
}
comparisonBuiltins.add("vm.op.logical_not", logicalNot, {
  signature: "(x) → bool tensor",
  summary: "Elementwise `!x` of a bool tensor.",
  dtypes: BOOL,
  devices: DEVICES,
  errors: ERRORS,
  tvm: "relax.op.logical_not",
});
comparisonBuiltins.add("vm.op.where", where, {
  signature: "(cond, x, y) → tensor",
  summary:
    "Elementwise `cond ? x : y`, the three broadcast together (NumPy's `where`); `cond` is bool, `x` and `y` share a dtype, which the result has.",
  dtypes: COMPARED,
  devices: DEVICES,
  errors: ERRORS,
  tvm: "relax.op.where",
});
